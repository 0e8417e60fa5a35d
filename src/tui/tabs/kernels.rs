//! Kernels tab: device time per kernel (or per kernel class) over all ranks or
//! one, sortable by any column, filtered by typing `/`.

use std::cmp::Ordering;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use crate::metrics::breakdown::{merged_table, Grouping, KernelRow};
use crate::model::time::human;
use crate::model::{Activity, Ns};
use crate::tui::action::Action;
use crate::tui::data::Data;
use crate::tui::tabs::{Jump, Needs, TabCtx, TabSpec, TabView};
use crate::tui::theme::{Shade, Theme};
use crate::tui::widgets::bar;
use crate::tui::widgets::table::{self, col, moved, Column, Hit, Row, Table};

const COLUMNS: [Column; 8] = [
    col("name", 0, false),
    col("class", 13, false),
    col("count", 8, true),
    col("total", 9, true),
    col("mean", 9, true),
    col("max", 9, true),
    col("share", 6, true),
    col("", 12, false),
];
const SHARE: usize = 6;

#[derive(Debug, Clone)]
pub struct KernelsState {
    pub grouping: Grouping,
    /// `None`: all ranks.
    pub rank: Option<u32>,
    pub filter: String,
    pub typing: bool,
    /// Sorted column and whether descending.
    pub sort: (usize, bool),
    pub selected: usize,
    /// Every row for the current grouping and rank.
    rows: Vec<KernelRow>,
    /// Indices into `rows` that pass the filter, in sort order.
    pub shown: Vec<usize>,
    /// Where Enter asked the Timeline to go.
    jump: Option<Jump>,
}

impl KernelsState {
    pub(crate) fn new(data: &Data) -> Self {
        let mut s = Self {
            grouping: Grouping::Kernel,
            rank: None,
            filter: String::new(),
            typing: false,
            sort: (3, true),
            selected: 0,
            rows: Vec::new(),
            jump: None,
            shown: Vec::new(),
        };
        s.recompute(data);
        s
    }

    pub fn rows(&self) -> impl Iterator<Item = &KernelRow> {
        self.shown.iter().map(|&i| &self.rows[i])
    }

    fn recompute(&mut self, data: &Data) {
        let scope = data
            .trace
            .ranks
            .iter()
            .zip(&data.kernels)
            .filter(|(t, _)| self.rank.is_none_or(|r| t.rank == r));
        self.rows = merged_table(scope, self.grouping);
        self.refilter();
    }

    /// The selected row's longest op (of the rank shown, or of any rank).
    fn longest(&self, data: &Data) -> Option<Jump> {
        let row = &self.rows[*self.shown.get(self.selected)?];
        let matches =
            |t: &crate::model::RankTimeline, o: &crate::model::DeviceOp| match self.grouping {
                Grouping::Kernel => o.activity == row.activity && t.name(o.name) == row.name,
                Grouping::Class => o.class == row.class,
            };
        let best = if data.paged.is_some() {
            self.longest_paged(data, &matches)?
        } else {
            self.longest_resident(data, &matches)?
        };
        let (ri, op) = best;
        let pad = (op.dur / 4).max(Ns(1));
        Some(Jump {
            rank_index: ri,
            stream: Some(op.stream),
            span: crate::model::Interval::new(op.start - pad, op.end() + pad),
            cursor: op.start,
            why: format!(
                "longest {}: {} on rank {} (Backspace: back)",
                crate::model::classify::bare_name(&row.name),
                crate::model::time::human(op.dur),
                data.trace.ranks[ri].rank
            ),
        })
    }

    /// The longest matching op over the ranks in scope, every op at hand.
    fn longest_resident(
        &self,
        data: &Data,
        matches: &dyn Fn(&crate::model::RankTimeline, &crate::model::DeviceOp) -> bool,
    ) -> Option<(usize, crate::model::DeviceOp)> {
        let best = data
            .trace
            .ranks
            .iter()
            .enumerate()
            .filter(|(_, t)| self.rank.is_none_or(|r| r == t.rank))
            .flat_map(|(ri, t)| {
                t.ops
                    .iter()
                    .filter(move |o| matches(t, o))
                    .map(move |o| (ri, o))
            })
            // The first of equals: on the lowest rank, the earliest (what
            // the ranks' kernel tables find without reading every rank).
            .max_by_key(|(ri, o)| (o.dur, std::cmp::Reverse((*ri, o.start))))?;
        Some((best.0, best.1.clone()))
    }

    /// [`Self::longest_resident`] in pages: the ranks' kernel tables say
    /// how long it is and on which rank; that rank alone is read, a row
    /// group at a time, for the first op that long.
    fn longest_paged(
        &self,
        data: &Data,
        matches: &dyn Fn(&crate::model::RankTimeline, &crate::model::DeviceOp) -> bool,
    ) -> Option<(usize, crate::model::DeviceOp)> {
        let row = &self.rows[*self.shown.get(self.selected)?];
        let (longest, ri) = data
            .trace
            .ranks
            .iter()
            .zip(&data.kernels)
            .enumerate()
            .filter(|(_, (t, _))| self.rank.is_none_or(|r| r == t.rank))
            .filter_map(|(ri, (t, k))| {
                let max = match self.grouping {
                    Grouping::Kernel => k
                        .names
                        .iter()
                        .filter(|n| n.1 == row.activity && t.name(n.0) == row.name)
                        .map(|n| n.3.max)
                        .max()?,
                    Grouping::Class => k.classes[crate::derive::class_index(row.class)].max,
                };
                Some((max, std::cmp::Reverse(ri)))
            })
            .max()
            .map(|(m, r)| (m, r.0))?;
        let t = &data.trace.ranks[ri];
        let mut found = None;
        let all = crate::model::Interval::new(Ns::MIN / 4, Ns::MAX / 4);
        let r = data.visit_ops(ri, all, &mut |o| {
            if found.is_none() && o.dur == longest && matches(t, o) {
                found = Some(o.clone());
            }
        });
        if let Err(e) = r {
            data.page_failed(e);
        }
        found.map(|o| (ri, o))
    }

    fn refilter(&mut self) {
        let needle = self.filter.to_lowercase();
        self.shown = (0..self.rows.len())
            .filter(|&i| {
                let r = &self.rows[i];
                needle.is_empty()
                    || r.name.to_lowercase().contains(&needle)
                    || r.class.name().contains(&needle)
            })
            .collect();
        let (c, desc) = self.sort;
        let rows = &self.rows;
        self.shown.sort_by(|&a, &b| {
            let o = compare(&rows[a], &rows[b], c);
            let o = if desc { o.reverse() } else { o };
            o.then_with(|| rows[a].name.cmp(&rows[b].name))
        });
        self.selected = self.selected.min(self.shown.len().saturating_sub(1));
    }

    pub(crate) fn update(&mut self, action: Action, data: &Data, area: Rect) {
        if self.typing {
            match action {
                Action::Input(c) => self.filter.push(c),
                Action::Backspace => {
                    self.filter.pop();
                }
                Action::Submit => self.typing = false,
                Action::Back => {
                    self.typing = false;
                    self.filter.clear();
                }
                _ => return,
            }
            self.refilter();
            return;
        }
        let page = usize::from(area.height.saturating_sub(3)).max(1);
        let last = self.shown.len().saturating_sub(1);
        if let Some(to) = moved(self.selected, &action, page, last) {
            self.selected = to;
            self.refilter();
            return;
        }
        match action {
            Action::Open => self.jump = self.longest(data),
            Action::Filter => self.typing = true,
            Action::Back if !self.filter.is_empty() => {
                self.filter.clear();
                self.refilter();
            }
            Action::ToggleGrouping => {
                self.grouping = match self.grouping {
                    Grouping::Kernel => Grouping::Class,
                    Grouping::Class => Grouping::Kernel,
                };
                self.selected = 0;
                self.recompute(data);
            }
            Action::NextRank | Action::PrevRank => {
                let ranks: Vec<Option<u32>> = std::iter::once(None)
                    .chain(data.trace.ranks.iter().map(|r| Some(r.rank)))
                    .collect();
                let i = ranks.iter().position(|&r| r == self.rank).unwrap_or(0);
                let n = ranks.len();
                let j = if action == Action::NextRank {
                    (i + 1) % n
                } else {
                    (i + n - 1) % n
                };
                self.rank = ranks[j];
                self.recompute(data);
            }
            Action::NextSort => self.sort_by((self.sort.0 + 1) % SHARE_END, None),
            Action::ReverseSort => self.sort = (self.sort.0, !self.sort.1),
            Action::Click { col, row } => {
                let rows = self.shown.len();
                match table::hit(&COLUMNS, table_area(area), self.selected, rows, col, row) {
                    Some(Hit::Header(c)) => self.sort_by(c.min(SHARE_END - 1), Some(())),
                    Some(Hit::Row(i)) => self.selected = i,
                    None => {}
                }
            }
            _ => return,
        }
        self.refilter();
    }

    /// Sort by column `c`; clicking the sorted column again flips the order.
    fn sort_by(&mut self, c: usize, clicked: Option<()>) {
        self.sort = if clicked.is_some() && self.sort.0 == c {
            (c, !self.sort.1)
        } else {
            // Names and classes read best ascending, numbers largest first.
            (c, c >= 2)
        };
    }

    /// What the table shows, for the status line.
    pub(crate) fn scope(&self) -> String {
        let scope = self
            .rank
            .map_or("all ranks".to_owned(), |r| format!("rank {r}"));
        let what = match self.grouping {
            Grouping::Kernel => "kernels",
            Grouping::Class => "classes",
        };
        format!("{what} · {scope}")
    }
}

/// Sortable columns: name .. share (the bar sorts like share).
const SHARE_END: usize = SHARE + 1;

fn compare(a: &KernelRow, b: &KernelRow, column: usize) -> Ordering {
    match column {
        0 => a.name.cmp(&b.name),
        1 => a.class.name().cmp(b.class.name()),
        2 => a.count.cmp(&b.count),
        4 => a.mean().cmp(&b.mean()),
        5 => a.max.cmp(&b.max),
        _ => a.total.cmp(&b.total),
    }
}

/// Rows under the table for the selected row's full name (the table cuts
/// names in the middle, which can hide what tells two variants apart).
fn footer_h(area: Rect) -> u16 {
    if area.height >= 10 {
        2
    } else {
        0
    }
}

/// The table below the one-line title, above the footer.
fn table_area(area: Rect) -> Rect {
    Rect::new(
        area.x,
        area.y + 1,
        area.width,
        area.height.saturating_sub(1 + footer_h(area)),
    )
}

pub(crate) fn render(
    state: &KernelsState,
    _data: &Data,
    theme: Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    if area.height == 0 {
        return;
    }
    let what = match state.grouping {
        Grouping::Kernel => "Kernels",
        Grouping::Class => "Kernel classes",
    };
    let scope = state
        .rank
        .map_or("all ranks".to_owned(), |r| format!("rank {r}"));
    let total: Ns = state.rows().map(|r| r.total).sum();
    let mut title = vec![
        Span::styled(format!("{what} · {scope} · "), theme.title()),
        Span::raw(format!(
            "{} shown, {} device time",
            state.shown.len(),
            human(total)
        )),
    ];
    if state.typing || !state.filter.is_empty() {
        title.push(Span::styled(
            format!(
                "  filter: {}{}",
                state.filter,
                if state.typing { "▏" } else { "" }
            ),
            theme.key(),
        ));
    }
    Line::from(title).render(Rect::new(area.x, area.y, area.width, 1), buf);
    // Bars scale to the largest row before filtering, so typing a filter does
    // not stretch them.
    let max_share = state.rows.iter().map(|r| r.share).fold(0.0, f64::max);
    let rows = state
        .rows()
        .map(|r| {
            let shade = if r.activity != Activity::Kernel || r.class.name() == "memory" {
                Shade::Memory
            } else if r.class.is_compute() {
                Shade::Compute
            } else {
                Shade::Comm
            };
            Row {
                cells: vec![
                    Span::raw(r.name.clone()),
                    Span::styled(r.class.name(), theme.shade(shade)),
                    Span::raw(r.count.to_string()),
                    Span::raw(human(r.total)),
                    Span::raw(human(r.mean())),
                    Span::raw(human(r.max)),
                    Span::raw(format!("{:.1}%", r.share)),
                    Span::styled(
                        bar(
                            if max_share > 0.0 {
                                r.share / max_share
                            } else {
                                0.0
                            },
                            12,
                        ),
                        theme.bar(),
                    ),
                ],
                style: Style::new(),
            }
        })
        .collect();
    let table = table_area(area);
    Table {
        columns: &COLUMNS,
        rows,
        selected: (!state.shown.is_empty()).then_some(state.selected),
        sort: Some(state.sort),
        theme,
    }
    .render(table, buf);
    let footer = Rect::new(area.x, table.bottom(), area.width, footer_h(area));
    let selected = state.shown.get(state.selected).map(|&i| &state.rows[i]);
    if let (Some(r), true) = (selected, footer.height > 0) {
        Paragraph::new(Line::from(vec![
            Span::styled("▸ ", theme.key()),
            Span::raw(crate::safe::text(&r.name).into_owned()),
        ]))
        .wrap(Wrap { trim: false })
        .render(footer, buf);
    }
}

pub(crate) const TAB: TabSpec = TabSpec {
    tab: super::Tab::Kernels,
    needs: Needs::Nothing,
    make: |data| Box::new(KernelsState::new(data)),
    per_run: true,
};

impl TabView for KernelsState {
    fn update(&mut self, action: Action, view: &TabCtx) {
        KernelsState::update(self, action, view.data, view.area);
    }

    fn render(&self, view: &TabCtx, theme: Theme, buf: &mut Buffer) {
        render(self, view.data, theme, view.area, buf);
    }

    fn status(&self) -> String {
        self.scope()
    }

    fn typing(&self) -> bool {
        self.typing
    }

    fn take_jump(&mut self) -> Option<Jump> {
        self.jump.take()
    }
}
