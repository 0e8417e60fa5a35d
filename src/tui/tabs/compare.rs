//! Compare tab (two runs open): the metric table with both values and the
//! change, coloured by direction (or the kernels, classes and collective kinds
//! whose time changed most), and one step of each run drawn A above B on a
//! common axis: time since that step's start.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::compare::{MetricDiff, TimeDiff, Verdict};
use crate::model::time::human;
use crate::model::{Interval, Ns};
use crate::tui::action::Action;
use crate::tui::data::Data;
use crate::tui::pair::{step_window, Pair};
use crate::tui::tabs::{Needs, TabCtx, TabSpec, TabView};
use crate::tui::theme::Theme;
use crate::tui::widgets::fit;
use crate::tui::widgets::lanes::{draw_lane, render_ruler};
use crate::tui::widgets::table::{self, col, Column, Row, Table};

/// What the table lists.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum View {
    #[default]
    Metrics,
    Kernels,
    Classes,
    Collectives,
}

impl View {
    fn next(self) -> Self {
        match self {
            Self::Metrics => Self::Kernels,
            Self::Kernels => Self::Classes,
            Self::Classes => Self::Collectives,
            Self::Collectives => Self::Metrics,
        }
    }

    fn title(self) -> &'static str {
        match self {
            Self::Metrics => "metrics",
            Self::Kernels => "kernels",
            Self::Classes => "kernel classes",
            Self::Collectives => "collectives",
        }
    }
}

const METRIC_COLUMNS: [Column; 7] = [
    col("metric", 0, false),
    col("unit", 6, false),
    col("A", 12, true),
    col("B", 12, true),
    col("B - A", 12, true),
    col("change", 8, true),
    col("", 7, false),
];

const TIME_COLUMNS: [Column; 6] = [
    col("name", 0, false),
    col("A count", 8, true),
    col("A time", 10, true),
    col("B count", 8, true),
    col("B time", 10, true),
    col("B - A", 12, true),
];

#[derive(Debug, Clone, Default)]
pub(crate) struct CompareState {
    pub view: View,
    /// Only rows changed beyond the threshold (metrics view).
    pub changed_only: bool,
    pub selected: usize,
    /// Step shown on the timeline, by position in each run.
    pub step: usize,
    /// First rank drawn on the timeline (r/R scroll through many ranks).
    pub first_rank: usize,
}

/// Table on top, step timeline below: the timeline gets up to half the rows,
/// less when the runs have few ranks to draw.
fn split(area: Rect, pair: &Pair) -> (Rect, Rect) {
    let head = 1.min(area.height);
    let rest = area.height - head;
    let lanes = pair.a.lanes.len() + pair.b.lanes.len();
    let wanted = (3 + 2 * lanes).min(usize::from(u16::MAX)) as u16;
    let lanes_h = if rest >= 12 { wanted.min(rest / 2) } else { 0 };
    let table = Rect::new(area.x, area.y + head, area.width, rest - lanes_h);
    let lanes = Rect::new(area.x, table.bottom(), area.width, lanes_h);
    (table, lanes)
}

fn metric_rows<'a>(state: &CompareState, pair: &'a Pair) -> Vec<&'a MetricDiff> {
    pair.diff
        .metrics
        .iter()
        .filter(|d| d.a.as_value().is_some() || d.b.as_value().is_some())
        .filter(|d| !state.changed_only || d.verdict != Verdict::Same)
        .collect()
}

fn time_rows<'a>(state: &CompareState, pair: &'a Pair) -> &'a [TimeDiff] {
    match state.view {
        View::Kernels => &pair.diff.kernels,
        View::Classes => &pair.diff.classes,
        View::Collectives | View::Metrics => &pair.diff.collectives,
    }
}

fn row_count(state: &CompareState, pair: &Pair) -> usize {
    match state.view {
        View::Metrics => metric_rows(state, pair).len(),
        _ => time_rows(state, pair).len(),
    }
}

impl CompareState {
    pub(crate) fn update(&mut self, action: Action, pair: &Pair, area: Rect) {
        let (t, _) = split(area, pair);
        let rows = row_count(self, pair);
        let page = usize::from(t.height.saturating_sub(1)).max(1);
        let last = rows.saturating_sub(1);
        match action {
            Action::Up | Action::ScrollUp { .. } => self.selected = self.selected.saturating_sub(1),
            Action::Down | Action::ScrollDown { .. } => self.selected += 1,
            Action::PageUp => self.selected = self.selected.saturating_sub(page),
            Action::PageDown => self.selected += page,
            Action::Home => self.selected = 0,
            Action::End => self.selected = last,
            Action::ToggleGrouping => {
                self.view = self.view.next();
                self.selected = 0;
            }
            Action::Filter => {
                self.changed_only = !self.changed_only;
                self.selected = 0;
            }
            Action::Back if self.changed_only => {
                self.changed_only = false;
                self.selected = 0;
            }
            Action::NextStep => self.step = (self.step + 1).min(pair.steps() - 1),
            Action::PrevStep => self.step = self.step.saturating_sub(1),
            Action::NextRank => {
                let ranks = pair.a.lanes.len().max(pair.b.lanes.len());
                self.first_rank = (self.first_rank + 1).min(ranks.saturating_sub(1));
            }
            Action::PrevRank => self.first_rank = self.first_rank.saturating_sub(1),
            Action::Click { col, row } => {
                let hit = table::hit(&METRIC_COLUMNS, t, self.selected, rows, col, row);
                if let Some(table::Hit::Row(i)) = hit {
                    self.selected = i;
                }
            }
            _ => {}
        }
        let last = row_count(self, pair).saturating_sub(1);
        self.selected = self.selected.min(last);
    }

    /// What the table shows, for the status line.
    pub(crate) fn scope(&self) -> String {
        format!(
            "{} · {}",
            self.view.title(),
            if self.changed_only {
                "changed only"
            } else {
                "all rows"
            }
        )
    }
}

fn verdict_style(v: Verdict, theme: Theme) -> Style {
    match v {
        Verdict::Worse => theme.alert(),
        Verdict::Better => theme.good(),
        Verdict::Changed => theme.key(),
        Verdict::OneSided => theme.dim(),
        Verdict::Same => Style::new(),
    }
}

fn secs(s: f64) -> String {
    human(Ns::rounded(s * 1e9))
}

pub(crate) fn render(
    state: &CompareState,
    pair: &Pair,
    theme: Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    if area.width == 0 || area.height == 0 {
        return;
    }
    let name = |d: &Data| d.trace.source.display().to_string();
    let head = format!(
        "A {} ({}) vs B {} ({}) · {} · changes beyond {:.1}% coloured",
        name(&pair.a),
        crate::human::plural(pair.a.trace.ranks.len(), "rank", "ranks"),
        name(&pair.b),
        crate::human::plural(pair.b.trace.ranks.len(), "rank", "ranks"),
        state.view.title(),
        pair.threshold * 100.0
    );
    Line::styled(fit(&head, usize::from(area.width)), theme.title())
        .render(Rect::new(area.x, area.y, area.width, 1), buf);
    let (t, lanes) = split(area, pair);
    let selected = Some(state.selected);
    match state.view {
        View::Metrics => {
            let rows = metric_rows(state, pair)
                .into_iter()
                .map(|d| {
                    let unit = d.metric.unit;
                    let v = |o: &crate::metrics::Outcome| {
                        o.as_value().map_or("n/a".into(), |v| unit.people(v))
                    };
                    Row {
                        cells: vec![
                            Span::raw(d.metric.name),
                            Span::raw(unit.people_unit()),
                            Span::raw(v(&d.a)),
                            Span::raw(v(&d.b)),
                            Span::raw(d.delta().map_or(String::new(), |x| unit.people(x))),
                            Span::raw(d.change_text()),
                            Span::raw(d.verdict.label()),
                        ],
                        style: verdict_style(d.verdict, theme),
                    }
                })
                .collect();
            Table {
                columns: &METRIC_COLUMNS,
                rows,
                selected,
                sort: None,
                theme,
            }
            .render(t, buf);
        }
        _ => {
            let rows = time_rows(state, pair)
                .iter()
                .map(|d| {
                    let delta = d.delta();
                    let sign = if delta > 0.0 { "+" } else { "" };
                    // Less time is better for kernels and collectives alike.
                    let style = if (d.a - d.b).abs() <= pair.threshold * d.a.abs().max(1e-12) {
                        Style::new()
                    } else if delta > 0.0 {
                        theme.alert()
                    } else {
                        theme.good()
                    };
                    Row {
                        cells: vec![
                            Span::raw(d.name.clone()),
                            Span::raw(d.a_count.to_string()),
                            Span::raw(secs(d.a)),
                            Span::raw(d.b_count.to_string()),
                            Span::raw(secs(d.b)),
                            Span::raw(format!("{sign}{}", secs(delta))),
                        ],
                        style,
                    }
                })
                .collect();
            Table {
                columns: &TIME_COLUMNS,
                rows,
                selected,
                sort: None,
                theme,
            }
            .render(t, buf);
        }
    }
    render_steps(state, pair, theme, lanes, buf);
}

/// Step `state.step` of both runs, A's ranks above B's, each lane on the time
/// since its run's step start.
fn render_steps(state: &CompareState, pair: &Pair, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.height < 4 || area.width < 12 {
        return;
    }
    let wa = step_window(&pair.a, state.step);
    let wb = step_window(&pair.b, state.step);
    let len = |w: Option<(Option<i64>, Interval)>| w.map_or(Ns::ZERO, |(_, s)| s.len());
    let axis = len(wa).max(len(wb)).max(Ns(1));
    let describe = |side: &str, w: Option<(Option<i64>, Interval)>| match w {
        Some((Some(n), s)) => format!("{side} step {n} {}", human(s.len())),
        Some((None, s)) => format!("{side} whole run {}", human(s.len())),
        None => format!("{side} has no step {}", state.step + 1),
    };
    let title = format!(
        "Step {} of {} · {} · {} · time since the step's start",
        state.step + 1,
        pair.steps(),
        describe("A", wa),
        describe("B", wb)
    );
    Line::styled(fit(&title, usize::from(area.width)), theme.header())
        .render(Rect::new(area.x, area.y, area.width, 1), buf);
    let label_w = 10.min(area.width / 3);
    let ruler = Rect::new(area.x + label_w, area.y + 1, area.width - label_w, 2);
    let view = Interval::new(Ns::ZERO, axis);
    render_ruler(view, Ns::ZERO, ruler, theme, buf);
    let rows = area.height - 3;
    // Half the rows to each run, the same ranks on both sides so they line up;
    // a run with fewer ranks leaves its rest to the other.
    let skip = state.first_rank;
    let (na, nb) = (
        pair.a.lanes.len().saturating_sub(skip),
        pair.b.lanes.len().saturating_sub(skip),
    );
    let rows = usize::from(rows);
    let show_a = na.min((rows / 2).max(rows.saturating_sub(nb)));
    let show_b = nb.min(rows - show_a);
    let width = ruler.width;
    let h = (rows / (show_a + show_b).max(1)).clamp(1, 2) as u16;
    let mut y = area.y + 3;
    for (side, data, w, shown) in [("A", &pair.a, wa, show_a), ("B", &pair.b, wb, show_b)] {
        for lane in data.lanes.iter().skip(skip).take(shown) {
            let label = format!("{side} rank {}", lane.rank);
            let style = if side == "A" {
                theme.dim()
            } else {
                theme.key()
            };
            Line::styled(fit(&label, usize::from(label_w)), style)
                .render(Rect::new(area.x, y, label_w, 1), buf);
            if let Some((_, win)) = w {
                let view = Interval::new(win.start, win.start + axis);
                let r = Rect::new(ruler.x, y, width, h);
                draw_lane(lane, view, r, None, theme, buf);
            }
            y += h;
        }
    }
}

pub(crate) const TAB: TabSpec = TabSpec {
    tab: super::Tab::Compare,
    needs: Needs::TwoRuns,
    make: |_| Box::new(CompareState::default()),
    per_run: false,
};

impl TabView for CompareState {
    fn update(&mut self, action: Action, view: &TabCtx) {
        if let Some(pair) = view.pair {
            CompareState::update(self, action, pair, view.area)
        };
    }

    fn render(&self, view: &TabCtx, theme: Theme, buf: &mut Buffer) {
        if let Some(pair) = view.pair {
            render(self, pair, theme, view.area, buf)
        };
    }

    fn status(&self) -> String {
        self.scope()
    }
}
