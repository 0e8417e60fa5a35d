//! Collectives tab: every collective matched across ranks (wait for the last
//! member, transfer, bandwidth, who was late), or grouped by kind, size and
//! group (`c`); sortable; Enter shows the instance on the Timeline.

use std::cmp::Ordering;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

mod bandwidth;

use crate::derive::instances::{grouped, GroupRow, InstanceRow};
use crate::model::time::{human, Ns};
use crate::tui::action::Action;
use crate::tui::data::Data;
use crate::tui::tabs::{Jump, Needs, TabCtx, TabSpec, TabView};
use crate::tui::theme::Theme;
use crate::tui::widgets::table::{self, col, moved, offset, Column, Hit, Row, Table};
use bandwidth::Plot;

// Who was late comes before the bandwidth: on a narrow terminal the
// columns on the right are cut first.
const INSTANCE_COLUMNS: [Column; 11] = [
    col("id", 5, true),
    col("kind", 14, false),
    col("group", 0, false),
    col("n", 3, true),
    col("size", 9, true),
    col("wait", 9, true),
    col("last", 5, true),
    col("late by", 9, true),
    col("transfer", 9, true),
    col("busbw", 8, true),
    col("start", 10, true),
];

const GROUP_COLUMNS: [Column; 10] = [
    col("kind", 14, false),
    col("size", 9, true),
    col("group", 0, false),
    col("n", 4, true),
    col("count", 6, true),
    col("p50 xfer", 9, true),
    col("p95 xfer", 9, true),
    col("busbw", 8, true),
    col("wait", 9, true),
    col("most wait caused by", 22, false),
];

#[derive(Debug, Clone)]
pub struct CollectivesState {
    /// Grouped by (kind, size, group) instead of one row per instance.
    pub grouped: bool,
    /// Sorted column and whether descending, per view.
    pub sort: [(usize, bool); 2],
    pub selected: usize,
    groups: Vec<GroupRow>,
    /// Row order of the view shown: indices into the instances or groups
    /// (4 bytes a collective: rows are numbered in u32 slots).
    pub shown: Vec<u32>,
    /// Transfer time against size (`v`): the series shown (index into
    /// `series`) and its points.
    plot: Option<(usize, Plot)>,
    series: Vec<(bandwidth::Key, usize)>,
    /// Why the last key did nothing, for the status line.
    said: Option<&'static str>,
    jump: Option<Jump>,
}

impl CollectivesState {
    pub(crate) fn new(data: &Data) -> Self {
        let mut s = Self {
            grouped: false,
            sort: [(0, false), (8, true)],
            selected: 0,
            groups: grouped(&data.collectives),
            shown: Vec::new(),
            plot: None,
            series: Vec::new(),
            said: None,
            jump: None,
        };
        s.resort(data);
        s
    }

    fn columns(&self) -> &'static [Column] {
        if self.grouped {
            &GROUP_COLUMNS
        } else {
            &INSTANCE_COLUMNS
        }
    }

    fn resort(&mut self, data: &Data) {
        let (c, desc) = self.sort[usize::from(self.grouped)];
        let n = if self.grouped {
            self.groups.len()
        } else {
            data.collectives.len()
        };
        let mut shown: Vec<u32> = (0..u32::try_from(n).unwrap_or(u32::MAX)).collect();
        shown.sort_by(|&a, &b| {
            let (a, b) = (a as usize, b as usize);
            let o = if self.grouped {
                compare_groups(&self.groups[a], &self.groups[b], c)
            } else {
                compare_instances(&data.collectives.get(a), &data.collectives.get(b), c)
            };
            (if desc { o.reverse() } else { o }).then(a.cmp(&b))
        });
        self.shown = shown;
        self.selected = self.selected.min(self.shown.len().saturating_sub(1));
    }

    /// The selected instance on the Timeline (in the grouped view, the
    /// group's instance with the most waiting, the one to look at first):
    /// every member's op in view, the cursor where the last member started,
    /// on the lane of the member that waited longest.
    fn open(&self, data: &Data) -> Option<Jump> {
        let selected = *self.shown.get(self.selected)? as usize;
        let (id, of_group) = if self.grouped {
            let g = self.groups.get(selected)?;
            let of_group = |r: &InstanceRow| {
                r.kind.map(|k| k.name()) == g.kind.map(|k| k.name())
                    && r.bytes == g.bytes
                    && r.group == g.group
                    && r.size as usize == g.size
            };
            let worst = (0..data.collectives.len())
                .filter(|&i| of_group(&data.collectives.get(i)))
                .max_by_key(|&i| (data.collectives.get(i).wait, std::cmp::Reverse(i)))?;
            (worst, Some(g.count))
        } else {
            (selected, None)
        };
        let note = of_group.map_or(String::new(), |n| format!(", the most waiting of its {n}"));
        jump_to(data, id, &note)
    }

    /// Shows series `k` on the plot.
    fn show_series(&mut self, data: &Data, k: usize) {
        self.plot = self
            .series
            .get(k)
            .map(|(key, _)| (k, Plot::of(&data.collectives, key)));
    }

    /// In the plot: ↑↓ another series, Enter its worst outlier (else its
    /// slowest transfer), `v` back to the table.
    fn update_plot(&mut self, action: Action, data: &Data) {
        let Some((k, plot)) = &self.plot else { return };
        let n = self.series.len();
        match action {
            Action::Up | Action::ScrollUp { .. } => self.show_series(data, k.saturating_sub(1)),
            Action::Down | Action::ScrollDown { .. } => {
                self.show_series(data, (k + 1).min(n.saturating_sub(1)))
            }
            Action::Open => {
                let worst = plot.outliers.first().copied().map(|i| (i, "the worst fit"));
                let slowest = || {
                    let &(i, _, _) = plot
                        .points
                        .iter()
                        .max_by_key(|p| (p.2, std::cmp::Reverse(p.0)))?;
                    Some((i, "the slowest transfer"))
                };
                self.jump = worst.or_else(slowest).and_then(|(i, what)| {
                    jump_to(
                        data,
                        i,
                        &format!(", {what} of {}", bandwidth::name(&plot.key)),
                    )
                });
            }
            Action::TogglePlot | Action::Back => self.plot = None,
            _ => {}
        }
    }
}

/// Instance `id` on the Timeline: every member's op in view, the cursor
/// where the last member started, on the lane of the member that waited
/// longest; `note` follows the group in the status line.
fn jump_to(data: &Data, id: usize, note: &str) -> Option<Jump> {
    {
        let r = data.collectives.get(id);
        let longest = r
            .members(&data.trace, &data.instances)
            .max_by_key(|m| m.wait)?;
        let rank_index = longest.index as usize;
        let stream = longest.of(&data.trace).1.stream;
        let pad = ((r.end - r.start) / 4).max(Ns(1));
        let last_start = r.last_start;
        Some(Jump {
            rank_index,
            stream: Some(stream),
            span: crate::model::Interval::new(r.start - pad, r.end + pad),
            cursor: last_start,
            why: format!(
                "{} #{} in group {}{}: {} members, rank {} last by {} (Backspace: back)",
                r.kind.map_or("collective", |k| k.name()),
                r.seq,
                group_text(r.role, r.group),
                note,
                r.size,
                r.last_rank,
                human(r.last_by)
            ),
        })
    }
}

impl CollectivesState {
    pub(crate) fn update(&mut self, action: Action, data: &Data, area: Rect) {
        if self.plot.is_some() {
            return self.update_plot(action, data);
        }
        self.said = None;
        if action == Action::TogglePlot {
            if self.series.is_empty() {
                self.series = bandwidth::series(&data.collectives);
            }
            self.show_series(data, 0);
            if self.plot.is_none() {
                self.said = Some("no size plot: no matched collective has a known size");
            }
            return;
        }
        let page = usize::from(area.height.saturating_sub(3)).max(1);
        let last = self.shown.len().saturating_sub(1);
        if let Some(to) = moved(self.selected, &action, page, last) {
            self.selected = to;
            return;
        }
        let view = usize::from(self.grouped);
        let ncols = self.columns().len();
        match action {
            Action::Open => self.jump = self.open(data),
            Action::ToggleGrouping => {
                self.grouped = !self.grouped;
                self.selected = 0;
            }
            Action::NextSort => {
                let c = (self.sort[view].0 + 1) % ncols;
                self.sort[view] = (c, numeric(self.grouped, c));
            }
            Action::ReverseSort => self.sort[view].1 = !self.sort[view].1,
            Action::Click { col, row } => {
                let cols = self.columns();
                match table::hit(
                    cols,
                    table_area(area),
                    self.selected,
                    self.shown.len(),
                    col,
                    row,
                ) {
                    Some(Hit::Header(c)) => {
                        self.sort[view] = if self.sort[view].0 == c {
                            (c, !self.sort[view].1)
                        } else {
                            (c, numeric(self.grouped, c))
                        };
                    }
                    Some(Hit::Row(i)) => self.selected = i,
                    None => {}
                }
            }
            _ => return,
        }
        self.resort(data);
    }
}

/// Whether a column reads best largest first (numbers; not ids, names or start).
fn numeric(grouped: bool, c: usize) -> bool {
    if grouped {
        !matches!(c, 0 | 2 | 9)
    } else {
        !matches!(c, 0 | 1 | 2 | 6 | 10)
    }
}

fn compare_instances(a: &InstanceRow, b: &InstanceRow, c: usize) -> Ordering {
    let bw = |r: &InstanceRow| r.busbw().unwrap_or(-1.0);
    match c {
        1 => a.kind.map(|k| k.name()).cmp(&b.kind.map(|k| k.name())),
        2 => a.group.cmp(b.group),
        3 => a.size.cmp(&b.size),
        4 => a.bytes.cmp(&b.bytes),
        5 => a.wait.cmp(&b.wait),
        6 => a.last_rank.cmp(&b.last_rank),
        7 => a.last_by.cmp(&b.last_by),
        8 => a.transfer.cmp(&b.transfer),
        9 => bw(a).total_cmp(&bw(b)),
        10 => a.start.cmp(&b.start),
        _ => a.id.cmp(&b.id),
    }
}

fn compare_groups(a: &GroupRow, b: &GroupRow, c: usize) -> Ordering {
    let bw = |g: &GroupRow| g.busbw.unwrap_or(-1.0);
    match c {
        0 => a.kind.map(|k| k.name()).cmp(&b.kind.map(|k| k.name())),
        1 => a.bytes.cmp(&b.bytes),
        2 => a.group.cmp(&b.group),
        3 => a.size.cmp(&b.size),
        4 => a.count.cmp(&b.count),
        5 => a.transfer_p50.cmp(&b.transfer_p50),
        6 => a.transfer_p95.cmp(&b.transfer_p95),
        7 => bw(a).total_cmp(&bw(b)),
        9 => a.culprit.map(|c| c.1).cmp(&b.culprit.map(|c| c.1)),
        _ => a.wait.cmp(&b.wait),
    }
}

/// Below the title and the per-role line.
fn table_area(area: Rect) -> Rect {
    Rect::new(
        area.x,
        area.y + 2,
        area.width,
        area.height.saturating_sub(2),
    )
}

/// Per group role: communication per step, wait per step and bus bandwidth
/// (the `*_by_role` metrics' parts), e.g. `tp comm 1.20 ms wait 300 µs 120.0 GB/s`.
fn roles_line(data: &Data) -> Vec<(String, String)> {
    let parts = |name: &str| -> Vec<(String, f64)> {
        data.summary
            .iter()
            .find(|(m, _)| m.name == name)
            .and_then(|(_, o)| match o {
                crate::metrics::Outcome::Value(m) => Some(m.parts.clone()),
                crate::metrics::Outcome::NotApplicable(_) => None,
            })
            .unwrap_or_default()
    };
    let (comm, wait, bw) = (
        parts("comm_time_by_role_s"),
        parts("comm_wait_by_role_s"),
        parts("busbw_by_role_gbps"),
    );
    let get = |ps: &[(String, f64)], label: &str| ps.iter().find(|p| p.0 == label).map(|p| p.1);
    let secs = |v: f64| human(Ns::rounded(v * 1e9));
    comm.iter()
        .map(|(label, c)| {
            let mut text = format!("comm {}/step", secs(*c));
            if let Some(w) = get(&wait, label) {
                text += &format!(" wait {}", secs(w));
            }
            if let Some(b) = get(&bw, label) {
                text += &format!(" {b:.1} GB/s");
            }
            (label.clone(), text)
        })
        .collect()
}

/// The group column: its role and name (`tp (1)`), the role alone for the
/// collectives that record no group.
fn group_text(role: Option<crate::derive::groups::Role>, group: &str) -> String {
    match role {
        Some(r) if group == crate::model::collectives::DEFAULT => r.name().to_owned(),
        Some(r) => format!("{} ({group})", r.name()),
        None => crate::derive::groups::label(None, group),
    }
}

fn size(b: Option<u64>) -> String {
    b.map_or("-".to_owned(), crate::human::bytes)
}

fn gbps(v: Option<f64>) -> String {
    v.map_or("-".to_owned(), |v| format!("{:.2}", v / 1e9))
}

pub(crate) fn render(
    state: &CollectivesState,
    data: &Data,
    theme: Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    if area.height == 0 {
        return;
    }
    if let Some((k, plot)) = &state.plot {
        return bandwidth::render(plot, *k, state.series.len(), theme, area, buf);
    }
    let rows = &data.collectives;
    if rows.is_empty() {
        Line::styled(
            "no collective is matched across ranks (it needs communication kernels on 2 or more ranks)",
            theme.dim(),
        )
        .render(area, buf);
        return;
    }
    let wait: Ns = rows.iter().map(|r| r.wait).sum();
    let title = if state.grouped {
        format!(
            "Collectives by kind, size and group · {} groups",
            state.groups.len()
        )
    } else {
        format!("Collectives matched across ranks · {}", rows.len())
    };
    Line::from(vec![
        Span::styled(format!("{title} · "), theme.title()),
        Span::raw(format!(
            "{} waiting for the last member · busbw in GB/s",
            human(wait)
        )),
    ])
    .render(Rect::new(area.x, area.y, area.width, 1), buf);
    let mut by_role = vec![Span::styled("by group role: ", theme.dim())];
    for (i, (label, text)) in roles_line(data).into_iter().enumerate() {
        if i > 0 {
            by_role.push(Span::styled(" │ ", theme.dim()));
        }
        by_role.push(Span::styled(label, theme.title()));
        by_role.push(Span::raw(format!(" {text}")));
    }
    Line::from(by_role).render(Rect::new(area.x, area.y + 1, area.width, 1), buf);
    // Times since the first op of the trace, as the Timeline's ruler and `d`
    // give them, so a start read here is found there.
    let origin = data.span.start;
    let kind = |k: Option<crate::model::CollKind>| k.map_or("?", |k| k.name());
    // Only the rows on screen are made: a run has millions of collectives
    // (made each frame, every row took 0.3 GB and its time to format).
    let table = table_area(area);
    let visible = usize::from(table.height.saturating_sub(1));
    let first = offset(state.selected, visible);
    let on_screen = state
        .shown
        .iter()
        .skip(first)
        .take(visible)
        .map(|&i| i as usize);
    let lines: Vec<Row> =
        if state.grouped {
            on_screen
                .map(|i| {
                    let g = &state.groups[i];
                    Row {
                        cells: vec![
                            Span::raw(kind(g.kind)),
                            Span::raw(size(g.bytes)),
                            Span::raw(group_text(g.role, &g.group)),
                            Span::raw(g.size.to_string()),
                            Span::raw(g.count.to_string()),
                            Span::raw(human(g.transfer_p50)),
                            Span::raw(human(g.transfer_p95)),
                            Span::raw(gbps(g.busbw)),
                            Span::raw(human(g.wait)),
                            Span::raw(g.culprit.map_or("-".to_owned(), |(r, c)| {
                                format!("rank {r} ({})", human(c))
                            })),
                        ],
                        style: Style::new(),
                    }
                })
                .collect()
        } else {
            on_screen
                .map(|i| {
                    let r = rows.get(i);
                    Row {
                        cells: vec![
                            Span::raw(r.id.to_string()),
                            Span::raw(kind(r.kind)),
                            Span::raw(group_text(r.role, r.group)),
                            Span::raw(r.size.to_string()),
                            Span::raw(size(r.bytes)),
                            Span::raw(human(r.wait)),
                            // Nobody is late when all started together.
                            Span::raw(if r.last_by > Ns::ZERO {
                                r.last_rank.to_string()
                            } else {
                                "-".to_owned()
                            }),
                            Span::raw(human(r.last_by)),
                            Span::raw(human(r.transfer)),
                            Span::raw(gbps(r.busbw())),
                            Span::raw(human(r.start - origin)),
                        ],
                        style: Style::new(),
                    }
                })
                .collect()
        };
    Table {
        columns: state.columns(),
        rows: lines,
        // Within the rows made, which start at `first`.
        selected: (!state.shown.is_empty()).then_some(state.selected - first),
        sort: Some(state.sort[usize::from(state.grouped)]),
        theme,
    }
    .render(table, buf);
}

pub(crate) const TAB: TabSpec = TabSpec {
    tab: super::Tab::Collectives,
    needs: Needs::Nothing,
    make: |data| Box::new(CollectivesState::new(data)),
    per_run: true,
};

impl TabView for CollectivesState {
    fn update(&mut self, action: Action, view: &TabCtx) {
        CollectivesState::update(self, action, view.data, view.area);
    }

    fn render(&self, view: &TabCtx, theme: Theme, buf: &mut Buffer) {
        render(self, view.data, theme, view.area, buf);
    }

    fn status(&self) -> String {
        match (self.said, &self.plot) {
            (Some(why), _) => why.to_owned(),
            (None, Some(_)) => "size plot".to_owned(),
            (None, None) => if self.grouped { "grouped" } else { "instances" }.to_owned(),
        }
    }

    fn take_jump(&mut self) -> Option<Jump> {
        self.jump.take()
    }
}
