//! Stragglers tab: ranks side by side (step time, where it went, how long the
//! others waited for each), the straggler verdict and the arrival heatmap.

use std::cmp::Ordering;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::derive::RankRow;
use crate::metrics::ranks::Verdict;
use crate::model::time::{human, Ns};
use crate::tui::action::Action;
use crate::tui::data::Data;
use crate::tui::step_grid::Measure;
use crate::tui::tabs::{Jump, Needs, TabCtx, TabSpec, TabView};
use crate::tui::theme::Theme;
use crate::tui::widgets::table::{self, col, offset, Column, Hit, Row, Table};
use crate::tui::widgets::{bar, fit};

const COLUMNS: [Column; 10] = [
    col("rank", 5, true),
    col("step", 9, true),
    col("holds up", 9, true),
    col("compute", 9, true),
    col("comm", 9, true),
    col("exposed", 9, true),
    col("idle", 9, true),
    col("busy", 9, true),
    col("work", 9, true),
    col("work █ + exposed comm ░", 0, false),
];
/// Columns up to the bar sort; the bar sorts like work.
const SORTABLE: usize = 9;
const WORK: usize = 8;

#[derive(Debug, Clone)]
pub struct StragglersState {
    pub sort: (usize, bool),
    pub selected: usize,
    /// Indices into `Data::ranks` in sort order.
    pub order: Vec<usize>,
    /// The heatmap's step column under the cursor (`n`/`p`), if moved.
    pub step: Option<usize>,
    /// What the heatmap's cells show (`m`).
    pub measure: Measure,
    /// Where Enter asked the Timeline to go.
    jump: Option<Jump>,
}

impl StragglersState {
    pub(crate) fn new(data: &Data) -> Self {
        let mut s = Self {
            sort: (0, false),
            selected: 0,
            order: (0..data.ranks.len()).collect(),
            step: None,
            // Who holds the others up first, where someone waited for someone.
            measure: if data
                .arrivals
                .late
                .iter()
                .flatten()
                .any(|c| c.is_some_and(|w| w > Ns::ZERO))
            {
                Measure::Caused
            } else {
                Measure::Step
            },
            jump: None,
        };
        s.resort(data);
        s
    }

    fn resort(&mut self, data: &Data) {
        let (c, desc) = self.sort;
        let rows = &data.ranks;
        self.order.sort_by(|&a, &b| {
            let o = compare(&rows[a], &rows[b], c);
            let o = if desc { o.reverse() } else { o };
            o.then(rows[a].rank.cmp(&rows[b].rank))
        });
    }

    pub(crate) fn update(&mut self, action: Action, data: &Data, area: Rect) {
        let last = self.order.len().saturating_sub(1);
        match action {
            Action::Up | Action::ScrollUp { .. } => self.selected = self.selected.saturating_sub(1),
            Action::Down | Action::ScrollDown { .. } => {
                self.selected = (self.selected + 1).min(last)
            }
            Action::PageUp | Action::Home => self.selected = 0,
            Action::PageDown | Action::End => self.selected = last,
            Action::NextSort => {
                let c = (self.sort.0 + 1) % SORTABLE;
                self.sort = (c, c > 0);
            }
            Action::ReverseSort => self.sort.1 = !self.sort.1,
            Action::NextStep | Action::PrevStep => {
                let n = data.step_grid().steps.len();
                self.step = match (self.step, action == Action::NextStep) {
                    _ if n == 0 => None,
                    (None, true) => Some(0),
                    (None, false) => Some(n - 1),
                    (Some(k), true) => Some((k + 1).min(n - 1)),
                    (Some(k), false) => Some(k.saturating_sub(1)),
                };
                return;
            }
            Action::NextMeasure => {
                self.measure = self.measure.next();
                return;
            }
            Action::Open => {
                let ri = self.order.get(self.selected).copied();
                self.jump = match (ri, self.step) {
                    (Some(ri), Some(k)) => step_jump(data, ri, k, self.measure),
                    (Some(ri), None) => step_of(data, ri),
                    _ => None,
                };
                return;
            }
            Action::Click { col, row } => {
                let rows = self.order.len();
                let t = table_area(area, rows);
                match table::hit(&COLUMNS, t, self.selected, rows, col, row) {
                    Some(Hit::Header(c)) => {
                        let c = if c >= SORTABLE { WORK } else { c };
                        self.sort = if self.sort.0 == c {
                            (c, !self.sort.1)
                        } else {
                            (c, c > 0)
                        };
                    }
                    Some(Hit::Row(i)) => self.selected = i,
                    None => {
                        // A heatmap cell: that rank's step on the Timeline.
                        if let Some((ri, k)) = self.heatmap_cell(data, area, col, row) {
                            self.step = Some(k);
                            self.jump = step_jump(data, ri, k, self.measure);
                            return;
                        }
                    }
                }
            }
            _ => return,
        }
        self.resort(data);
    }
}

/// Rows above the heatmap's first rank row, and columns before its first
/// step cell (`r12   `), each cell's width, and the spread columns' width
/// at the right: as `render_heatmap` lays it out.
const HEAT_TOP: u16 = 4;
const HEAT_LEFT: u16 = 6;
const HEAT_CELL: u16 = 4;
/// ` p50 p95 max`: a space and three columns of 9.
const SPREAD_W: u16 = 30;

/// What the heatmap shows of `data` in `area` (below the table): the first
/// step column and how many, the first rank row (into the table's order)
/// and how many.
struct HeatView {
    first_col: usize,
    cols: usize,
    first_row: usize,
    rows: usize,
}

impl StragglersState {
    fn heat_view(&self, data: &Data, rest: Rect) -> HeatView {
        let room = rest.width.saturating_sub(HEAT_LEFT + SPREAD_W) / HEAT_CELL;
        let cols = usize::from(room).min(data.step_grid().steps.len());
        let first_col = match self.step {
            Some(k) if cols > 0 && k >= cols => k + 1 - cols,
            _ => 0,
        };
        let rows = usize::from(rest.height.saturating_sub(HEAT_TOP)).min(self.order.len());
        HeatView {
            first_col,
            cols,
            first_row: offset(self.selected, rows),
            rows,
        }
    }

    /// The (rank index, step column) of the heatmap cell at a click.
    fn heatmap_cell(&self, data: &Data, area: Rect, col: u16, row: u16) -> Option<(usize, usize)> {
        let t = table_area(area, data.ranks.len());
        let rest = Rect::new(area.x, t.bottom(), area.width, area.bottom() - t.bottom());
        let v = self.heat_view(data, rest);
        let y = usize::from(row.checked_sub(rest.y + HEAT_TOP)?);
        let x = usize::from(col.checked_sub(rest.x + HEAT_LEFT)? / HEAT_CELL);
        if y >= v.rows || x >= v.cols {
            return None;
        }
        let ri = *self.order.get(v.first_row + y)?;
        Some((ri, v.first_col + x))
    }
}

/// The step of the heatmap's column `k`.
fn step_at(data: &Data, k: usize) -> Option<&crate::tui::data::StepSpan> {
    let (number, occurrence) = *data.step_grid().steps.get(k)?;
    data.steps
        .iter()
        .find(|s| s.number == number && s.occurrence == occurrence)
}

/// Rank `ri` in the heatmap's step column `k`, on the Timeline, with the
/// cell's figure against the rank's median.
fn step_jump(data: &Data, ri: usize, k: usize, measure: Measure) -> Option<Jump> {
    let rank = data.trace.ranks.get(ri)?.rank;
    let s = step_at(data, k)?;
    let cell = data
        .step_grid()
        .cells(measure)
        .get(ri)?
        .get(k)
        .copied()
        .flatten();
    let why = match (cell, data.step_grid().spread(measure, ri)) {
        (Some(v), Some(sp)) => format!(
            "rank {rank}, {}: {} {} (its median {}) (Backspace: back)",
            s.label(),
            measure.name(),
            human(v),
            human(sp.p50)
        ),
        _ => format!(
            "rank {rank}, {}: no {} here (Backspace: back)",
            s.label(),
            measure.name()
        ),
    };
    Some(Jump {
        rank_index: ri,
        stream: None,
        span: s.span,
        cursor: s.span.start,
        why,
    })
}

/// Rank `ri` in step column `k` on the Timeline, saying how long the others
/// waited for it there.
fn caused_jump(data: &Data, ri: usize, k: usize) -> Option<Jump> {
    let mut j = step_jump(data, ri, k, Measure::Caused)?;
    let rank = data.trace.ranks.get(ri)?.rank;
    let label = step_at(data, k)?.label();
    j.why = match data.arrivals.late.get(ri)?.get(k).copied().flatten() {
        Some(w) if w > Ns::ZERO => format!(
            "rank {rank}, {label}: the others waited {} for it here (Backspace: back)",
            human(w)
        ),
        _ => format!("rank {rank}, {label}: it kept no one waiting (Backspace: back)"),
    };
    Some(j)
}

/// Rank `ri`'s step where the others waited longest for it; without any
/// wait, its first step; without steps, its whole trace.
fn step_of(data: &Data, ri: usize) -> Option<Jump> {
    let rank = data.trace.ranks.get(ri)?.rank;
    let worst = data.arrivals.late.get(ri).and_then(|l| {
        l.iter()
            .enumerate()
            .filter_map(|(k, w)| Some((k, (*w)?)))
            .filter(|&(_, w)| w > Ns::ZERO)
            .max_by_key(|&(k, w)| (w, std::cmp::Reverse(k)))
    });
    if let Some(j) = worst.and_then(|(k, _)| caused_jump(data, ri, k)) {
        return Some(j);
    }
    let (span, why) = match data.steps.first() {
        Some(s) => (
            s.span,
            format!(
                "rank {rank}, {}: it kept no one waiting (Backspace: back)",
                s.label()
            ),
        ),
        None => (data.span, format!("rank {rank} (Backspace: back)")),
    };
    Some(Jump {
        rank_index: ri,
        stream: None,
        span,
        cursor: span.start,
        why,
    })
}

fn compare(a: &RankRow, b: &RankRow, column: usize) -> Ordering {
    match column {
        0 => a.rank.cmp(&b.rank),
        1 => a.step_time.cmp(&b.step_time),
        2 => a.caused.cmp(&b.caused),
        3 => a.compute.cmp(&b.compute),
        4 => a.comm.cmp(&b.comm),
        5 => a.exposed_comm.cmp(&b.exposed_comm),
        6 => a.idle.cmp(&b.idle),
        7 => a.busy.cmp(&b.busy),
        _ => a.work().cmp(&b.work()),
    }
}

/// The table below the two header lines: as tall as the ranks need, leaving
/// the rest to the heatmap.
fn table_area(area: Rect, ranks: usize) -> Rect {
    let top = 2.min(area.height);
    let h = (area.height - top).min(u16::try_from(ranks + 1).unwrap_or(u16::MAX));
    Rect::new(area.x, area.y + top, area.width, h)
}

/// Shade for a share of the largest value: darker is later.
fn heat(frac: f64) -> &'static str {
    match frac {
        f if f <= 0.0 => "·",
        f if f < 0.25 => "░",
        f if f < 0.5 => "▒",
        f if f < 0.75 => "▓",
        _ => "█",
    }
}

/// Steps × ranks: every step of every rank (rows in the table's order) in
/// the chosen measure, outliers marked, each rank's spread at the right.
fn render_heatmap(
    state: &StragglersState,
    data: &Data,
    theme: Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let g = data.step_grid();
    let m = state.measure;
    if area.height < 2 {
        return;
    }
    let mut lines = vec![Line::raw("")];
    if g.steps.is_empty() {
        lines.push(Line::styled(
            "No steps: no steps × ranks heatmap (it needs ProfilerStep ranges or repeated XLA programs)",
            theme.dim(),
        ));
        return draw_lines(lines, area, buf);
    }
    let cells = g.cells(m);
    let max = cells
        .iter()
        .flatten()
        .flatten()
        .copied()
        .max()
        .unwrap_or(Ns::ZERO);
    lines.push(Line::from(vec![
        Span::styled(format!("Steps × ranks: {} ", m.name()), theme.title()),
        Span::raw(format!(
            "({}; darker = longer, max {}; ! = an outlier of its rank) · m measure · n/p step · Enter: on the Timeline",
            m.about(),
            human(max)
        )),
    ]));
    lines.push(who_line(data, theme));
    if let Some(why) = g.missing(m) {
        lines.push(Line::styled(format!("{}: {why}", m.name()), theme.dim()));
        return draw_lines(lines, area, buf);
    }
    let v = state.heat_view(data, area);
    let cell = usize::from(HEAT_CELL);
    let mut head = String::from("step  ");
    for &(number, k) in g.steps.iter().skip(v.first_col).take(v.cols) {
        let label = if k == 0 {
            number.to_string()
        } else {
            format!("{number}'")
        };
        head += &fit(&format!("{label:<cell$}"), cell);
    }
    // The spread sits at the right edge, whatever the columns shown.
    let used = usize::from(HEAT_LEFT) + v.cols * cell;
    let pad = usize::from(area.width).saturating_sub(used + usize::from(SPREAD_W));
    let spread_head = format!("{:>9} {:>9} {:>9}", "p50", "p95", "max");
    lines.push(Line::from(vec![
        Span::styled(head, theme.dim()),
        Span::styled(format!("{:pad$} {spread_head}", ""), theme.dim()),
    ]));
    let who = straggler_index(data);
    for (y, &ri) in state
        .order
        .iter()
        .enumerate()
        .skip(v.first_row)
        .take(v.rows)
    {
        let Some(row) = cells.get(ri) else { continue };
        let outliers = g.outliers(m, ri);
        let label_style = if y == state.selected {
            theme.selected()
        } else {
            Style::new()
        };
        let mut spans = vec![
            Span::styled(format!("r{:<4}", data.trace.ranks[ri].rank), label_style),
            Span::raw(" "),
        ];
        let style = if Some(ri) == who {
            theme.alert()
        } else {
            theme.bar()
        };
        for (k, c) in row.iter().enumerate().skip(v.first_col).take(v.cols) {
            let g = match c {
                Some(l) => heat(if max > Ns::ZERO {
                    l.as_f64() / max.as_f64()
                } else {
                    0.0
                }),
                None => " ",
            };
            let mark = if outliers.get(k).copied().unwrap_or(false) {
                "!"
            } else {
                " "
            };
            let mut st = style;
            if y == state.selected && state.step == Some(k) {
                st = st.patch(theme.selected());
            }
            spans.push(Span::styled(g.repeat(cell - 2) + mark, st));
            spans.push(Span::raw(" "));
        }
        let spread = g.spread(m, ri).map_or(String::new(), |sp| {
            format!(
                "{:>9} {:>9} {:>9}",
                human(sp.p50),
                human(sp.p95),
                human(sp.max)
            )
        });
        spans.push(Span::raw(format!("{:pad$} {spread}", "")));
        lines.push(Line::from(spans));
    }
    draw_lines(lines, area, buf);
}

/// The rank index of the verdict's straggler, so the heatmap and the
/// headline name the same one.
fn straggler_index(data: &Data) -> Option<usize> {
    match data.verdict {
        Verdict::Straggler { rank, .. } => data.trace.ranks.iter().position(|t| t.rank == rank),
        _ => None,
    }
}

/// The verdict's late rank and its evidence at collectives, so the heatmap
/// and the headline name the same one.
fn who_line(data: &Data, theme: Theme) -> Line<'static> {
    let a = &data.arrivals;
    let who = straggler_index(data);
    match who.and_then(|w| Some((w, data.trace.ranks.get(w)?))) {
        Some((w, t)) if a.collectives > 0 => Line::styled(
            format!(
                "rank {} started last at {} of {} matched collectives, by a median {} after the others",
                t.rank,
                a.last[w],
                a.collectives,
                human(a.last_by[w])
            ),
            theme.alert(),
        ),
        _ => match &data.verdict {
            // The cells are the raw figures; the verdict says why they
            // name no one.
            Verdict::Unknown { why, .. } => Line::styled(
                format!("straggler unknown ({why}): the cells are not a verdict"),
                theme.key(),
            ),
            Verdict::NoStraggler(why) => Line::styled(format!("no straggler: {why}"), theme.dim()),
            Verdict::OneRank => Line::styled("one rank: nothing to compare", theme.dim()),
            _ => Line::styled("no rank stands out", theme.dim()),
        },
    }
}

fn draw_lines(lines: Vec<Line<'static>>, area: Rect, buf: &mut Buffer) {
    for (k, l) in lines.into_iter().enumerate().take(usize::from(area.height)) {
        l.render(Rect::new(area.x, area.y + k as u16, area.width, 1), buf);
    }
}

pub(crate) fn render(
    state: &StragglersState,
    data: &Data,
    theme: Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    if area.height == 0 {
        return;
    }
    let per = if data.ranks.iter().any(|r| r.step_time.is_some()) {
        "per step (mean)"
    } else {
        "no ProfilerStep annotations: over the whole device window"
    };
    let straggler = match data.verdict {
        Verdict::Straggler { index, .. } => Some(index),
        _ => None,
    };
    let headline = match &data.verdict {
        v @ Verdict::Straggler { .. } => Line::from(vec![
            Span::styled("Straggler ", theme.alert()),
            Span::raw(v.sentence()),
        ]),
        Verdict::NoStraggler(why) => Line::from(vec![
            Span::styled("No straggler: ", theme.title()),
            Span::raw(why.clone()),
        ]),
        Verdict::OneRank => Line::styled("One rank: nothing to compare", theme.dim()),
        Verdict::Unknown { why, work } => Line::from(vec![
            Span::styled("Straggler unknown: ", theme.key()),
            Span::raw(format!("{why}; by work: {work}")),
        ]),
    };
    headline.render(Rect::new(area.x, area.y, area.width, 1), buf);
    if area.height > 1 {
        Line::styled(
            format!(
                "{per}; holds up = the others' waiting at collectives charged to this rank, summed over them; \
                 work = busy − exposed comm; exposed = comm not overlapped by compute"
            ),
            theme.dim(),
        )
        .render(Rect::new(area.x, area.y + 1, area.width, 1), buf);
    }
    let max_total = data.ranks.iter().map(|r| r.busy).max().unwrap_or(Ns::ZERO);
    let widths = table::widths(&COLUMNS, area.width);
    let bar_w = widths[COLUMNS.len() - 1];
    let rows = state
        .order
        .iter()
        .map(|&i| {
            let r = &data.ranks[i];
            let is_slowest = straggler == Some(i);
            let frac = |v: Ns| {
                if max_total > Ns::ZERO {
                    v.as_f64() / max_total.as_f64()
                } else {
                    0.0
                }
            };
            let work_bar = bar(frac(r.work()), bar_w);
            let cells = work_bar.chars().count() as u16;
            let exposed_bar = "░".repeat(usize::from(
                ((frac(r.exposed_comm) * f64::from(bar_w)).round() as u16)
                    .min(bar_w.saturating_sub(cells)),
            ));
            let style = if is_slowest {
                theme.alert()
            } else {
                Style::new()
            };
            Row {
                cells: vec![
                    Span::raw(r.rank.to_string()),
                    Span::raw(r.step_time.map_or("-".to_owned(), human)),
                    Span::raw(if r.matched > 0 {
                        human(r.caused)
                    } else {
                        "-".to_owned()
                    }),
                    Span::raw(human(r.compute)),
                    Span::raw(human(r.comm)),
                    Span::raw(human(r.exposed_comm)),
                    Span::raw(human(r.idle)),
                    Span::raw(human(r.busy)),
                    Span::raw(human(r.work())),
                    Span::styled(format!("{work_bar}{exposed_bar}"), theme.bar()),
                ],
                style,
            }
        })
        .collect();
    Table {
        columns: &COLUMNS,
        rows,
        selected: (!state.order.is_empty()).then_some(state.selected),
        sort: Some(state.sort),
        theme,
    }
    .render(table_area(area, data.ranks.len()), buf);
    let t = table_area(area, data.ranks.len());
    let rest = Rect::new(area.x, t.bottom(), area.width, area.bottom() - t.bottom());
    render_heatmap(state, data, theme, rest, buf);
}

pub(crate) const TAB: TabSpec = TabSpec {
    tab: super::Tab::Stragglers,
    needs: Needs::Nothing,
    make: |data| Box::new(StragglersState::new(data)),
    per_run: true,
};

impl TabView for StragglersState {
    fn update(&mut self, action: Action, view: &TabCtx) {
        StragglersState::update(self, action, view.data, view.area);
    }

    fn render(&self, view: &TabCtx, theme: Theme, buf: &mut Buffer) {
        render(self, view.data, theme, view.area, buf);
    }

    fn take_jump(&mut self) -> Option<Jump> {
        self.jump.take()
    }
}
