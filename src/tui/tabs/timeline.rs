//! Timeline tab: one lane per rank (or per stream), time across, compute and
//! communication in distinct shades and their overlap in a third; zoom, pan,
//! jump to a step, and a cursor naming the op under it. All lanes share the
//! trace's clock; each screen column is drawn from prefix-sum coverage indexes,
//! so a frame costs O(lanes × columns × log events) at any zoom.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::model::time::{human, human_tick};
use crate::model::{Interval, Ns};
use crate::tui::action::Action;
use crate::tui::data::{Data, Lane, StepSpan};
use crate::tui::theme::{Shade, Theme, EIGHTHS};
use crate::tui::widgets::fit;

#[derive(Debug, Clone)]
pub struct TimelineState {
    /// The visible time range.
    pub view: Interval,
    pub cursor: Ns,
    /// Selected lane (index into the lanes shown).
    pub lane: usize,
    /// One lane per stream instead of per rank.
    pub streams: bool,
    /// Show each file's own clock instead of the aligned one.
    pub raw: bool,
    /// The step number being typed after `:`.
    pub prompt: Option<String>,
    pub message: Option<String>,
    /// The step last jumped to (index into `Data::steps`): `n`/`p` walk from it.
    pub step: Option<usize>,
    drag: Option<(u16, Interval)>,
}

/// Where the parts of the tab go.
pub struct Areas {
    pub ruler: Rect,
    pub labels: Rect,
    pub lanes: Rect,
    pub info: Rect,
}

pub fn areas(area: Rect) -> Areas {
    let info_h = 3.min(area.height);
    let ruler_h = 2.min(area.height - info_h);
    let lanes_h = area.height - info_h - ruler_h;
    let label_w = 10.min(area.width / 3);
    let y = area.y + ruler_h;
    Areas {
        ruler: Rect::new(area.x + label_w, area.y, area.width - label_w, ruler_h),
        labels: Rect::new(area.x, y, label_w, lanes_h),
        lanes: Rect::new(area.x + label_w, y, area.width - label_w, lanes_h),
        info: Rect::new(area.x, y + lanes_h, area.width, info_h),
    }
}

/// Time at the left edge of column `c` of a `width`-column view.
fn col_time(view: Interval, width: u16, c: u16) -> Ns {
    let w = i128::from(width.max(1));
    (i128::from(view.start) + i128::from(view.len()) * i128::from(c) / w) as Ns
}

/// What to add to a displayed time to get the lane's time in the model: the
/// rank's alignment offset when raw clocks are shown, else nothing.
fn clock_shift(state: &TimelineState, data: &Data, rank_index: usize) -> Ns {
    match (&data.trace.offsets, state.raw) {
        (Some(o), true) => o.get(rank_index).map_or(0, |o| o.offset),
        _ => 0,
    }
}

/// The column showing time `t`, if visible.
fn time_col(view: Interval, width: u16, t: Ns) -> Option<u16> {
    if t < view.start || t >= view.end || width == 0 {
        return None;
    }
    let c = i128::from(t - view.start) * i128::from(width) / i128::from(view.len().max(1));
    Some(c as u16)
}

/// What one timeline cell shows: the kind of activity covering most of it and
/// the share of its time the device was busy with anything.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cell {
    pub shade: Shade,
    /// Busy time / cell time, 0 to 1.
    pub busy: f64,
}

impl Cell {
    /// Eighths of a `rows`-row cell to fill: at least one when anything ran,
    /// so a single short kernel stays visible; all of them only when the
    /// device was busy for (nearly) the whole cell.
    pub fn eighths(&self, rows: u16) -> u32 {
        let total = 8 * u32::from(rows.max(1));
        if self.busy <= 0.0 {
            return 0;
        }
        ((self.busy * f64::from(total)).round() as u32).clamp(1, total)
    }
}

/// What a lane shows over each `[lo, hi)` of `slices`: the kind of activity
/// covering most of it, and how busy it was.
pub fn shades(lane: &Lane, slices: &[(Ns, Ns)]) -> Vec<Cell> {
    let [overlap, comm, wait, compute, memory, busy] = [
        &lane.overlap,
        &lane.comm,
        &lane.wait,
        &lane.compute,
        &lane.memory,
        &lane.busy,
    ]
    .map(|c| c.covered_slices(slices));
    (0..slices.len())
        .map(|k| {
            let comm = comm[k] - overlap[k];
            // Waiting is communication time too; show it where compute does not hide it.
            let wait = wait[k].min(comm);
            let shade = [
                (overlap[k], Shade::Overlap),
                (wait, Shade::Wait),
                (comm - wait, Shade::Comm),
                (compute[k] - overlap[k], Shade::Compute),
                (memory[k], Shade::Memory),
            ]
            .into_iter()
            .filter(|(v, _)| *v > 0)
            // First of equals wins: the order above is the priority.
            .fold(None, |best: Option<(Ns, Shade)>, (v, s)| match best {
                Some((b, _)) if b >= v => best,
                _ => Some((v, s)),
            })
            .map_or(Shade::Idle, |(_, s)| s);
            let (lo, hi) = slices[k];
            let busy = (busy[k] as f64 / (hi - lo).max(1) as f64).clamp(0.0, 1.0);
            Cell { shade, busy }
        })
        .collect()
}

/// A round tick interval (1, 2 or 5 × 10^k ns) at least `min` long.
pub fn tick_step(min: Ns) -> Ns {
    let mut step: Ns = 1;
    loop {
        for m in [1, 2, 5] {
            if step * m >= min {
                return step * m;
            }
        }
        step *= 10;
    }
}

impl TimelineState {
    pub fn new(data: &Data) -> Self {
        Self {
            view: data.span,
            cursor: data.span.start,
            lane: 0,
            streams: false,
            raw: false,
            prompt: None,
            message: None,
            step: None,
            drag: None,
        }
    }

    pub fn lanes<'a>(&self, data: &'a Data) -> &'a [Lane] {
        if self.streams {
            &data.stream_lanes
        } else {
            &data.lanes
        }
    }

    pub fn typing(&self) -> bool {
        self.prompt.is_some()
    }

    fn set_view(&mut self, data: &Data, start: Ns, len: Ns, width: u16) {
        let full = data.span;
        // Never narrower than a nanosecond per column, never wider than the trace.
        let len = len.max(Ns::from(width.max(1))).min(full.len().max(1));
        let start = start.clamp(full.start, full.end - len);
        self.view = Interval::new(start, start + len);
    }

    fn zoom(&mut self, data: &Data, factor: f64, at: Ns, width: u16) {
        let v = self.view;
        let len = ((v.len() as f64) * factor).round() as Ns;
        // Keep `at` on the same screen position.
        let frac = (at - v.start) as f64 / v.len().max(1) as f64;
        let start = at - (len as f64 * frac).round() as Ns;
        self.set_view(data, start, len, width);
    }

    fn show_step(&mut self, data: &Data, i: usize, width: u16) {
        let s = data.steps[i];
        let pad = s.span.len() / 50;
        self.set_view(data, s.span.start - pad, s.span.len() + 2 * pad, width);
        self.cursor = s.span.start;
        self.step = Some(i);
        self.message = Some(s.label());
    }

    pub fn update(&mut self, action: Action, data: &Data, area: Rect) {
        let a = areas(area);
        let width = a.lanes.width;
        let ns_per_col = (self.view.len() / Ns::from(width.max(1))).max(1);
        if let Some(p) = &mut self.prompt {
            match action {
                Action::Input(c) if c.is_ascii_digit() || c == '-' => p.push(c),
                Action::Backspace => {
                    p.pop();
                }
                Action::Back => self.prompt = None,
                Action::Submit => {
                    let text = self.prompt.take().unwrap_or_default();
                    match text.parse::<i64>() {
                        Ok(n) => match data.steps.iter().position(|s| s.number == n) {
                            Some(i) => self.show_step(data, i, width),
                            None => self.message = Some(no_step(n, data)),
                        },
                        Err(_) => self.message = Some(format!("not a step number: {text:?}")),
                    }
                }
                _ => {}
            }
            return;
        }
        self.message = None;
        let nlanes = self.lanes(data).len();
        match action {
            Action::ZoomIn => self.zoom(data, 0.5, self.cursor, width),
            Action::ZoomOut => self.zoom(data, 2.0, self.cursor, width),
            // Esc undoes the zoom (one level of "cancel"); it never quits.
            Action::ResetZoom | Action::Back => {
                self.view = data.span;
                self.step = None;
            }
            Action::PanLeft | Action::PanRight => {
                let d = (self.view.len() / 8).max(1);
                let d = if action == Action::PanLeft { -d } else { d };
                self.set_view(data, self.view.start + d, self.view.len(), width);
            }
            Action::CursorLeft | Action::CursorRight => {
                let d = if action == Action::CursorLeft {
                    -ns_per_col
                } else {
                    ns_per_col
                };
                self.cursor = (self.cursor + d).clamp(data.span.start, data.span.end - 1);
                self.step = None;
                if self.cursor < self.view.start || self.cursor >= self.view.end {
                    let start = self.cursor - self.view.len() / 2;
                    self.set_view(data, start, self.view.len(), width);
                }
            }
            Action::Up => self.lane = self.lane.saturating_sub(1),
            Action::Down => self.lane = (self.lane + 1).min(nlanes.saturating_sub(1)),
            Action::PageUp | Action::Home => self.lane = 0,
            Action::PageDown | Action::End => self.lane = nlanes.saturating_sub(1),
            Action::NextStep => match next_step(&data.steps, self.step, self.cursor) {
                Some(i) => self.show_step(data, i, width),
                None => self.message = Some("no later step".into()),
            },
            Action::PrevStep => match prev_step(&data.steps, self.step, self.cursor) {
                Some(i) => self.show_step(data, i, width),
                None => self.message = Some("no earlier step".into()),
            },
            Action::GoToStep => {
                if data.steps.is_empty() {
                    self.message = Some(crate::model::timeline::NO_STEPS.into());
                } else {
                    self.prompt = Some(String::new());
                }
            }
            Action::ToggleAlign => match &data.trace.offsets {
                Some(_) => self.raw = !self.raw,
                None => {
                    self.message = Some(
                        "clocks were not aligned (no shared collectives, or --align none)".into(),
                    )
                }
            },
            Action::ToggleStreams => {
                let rank = self.lanes(data).get(self.lane).map(|l| l.rank);
                self.streams = !self.streams;
                self.lane = self
                    .lanes(data)
                    .iter()
                    .position(|l| Some(l.rank) == rank)
                    .unwrap_or(0);
            }
            Action::Click { col, row } => {
                if let Some(c) = inside(a.lanes, col, row).map(|(c, _)| c) {
                    let h = lane_height(a.lanes.height, nlanes);
                    let first = lane_offset(self.lane, a.lanes.height / h);
                    let lane = first + usize::from((row - a.lanes.y) / h);
                    if lane < nlanes {
                        self.lane = lane;
                    }
                    self.cursor = col_time(self.view, width, c) + ns_per_col / 2;
                    self.step = None;
                    self.drag = Some((col, self.view));
                }
            }
            Action::Drag { col, .. } => {
                if let Some((from, view)) = self.drag {
                    let d =
                        (i64::from(from) - i64::from(col)) * (view.len() / Ns::from(width.max(1)));
                    self.set_view(data, view.start + d, view.len(), width);
                }
            }
            Action::Release => self.drag = None,
            Action::ScrollUp { col, row } | Action::ScrollDown { col, row } => {
                let at = inside(a.lanes, col, row)
                    .map_or(self.cursor, |(c, _)| col_time(self.view, width, c));
                let f = if matches!(action, Action::ScrollUp { .. }) {
                    0.5
                } else {
                    2.0
                };
                self.zoom(data, f, at, width);
            }
            _ => {}
        }
    }
}

/// The step after the one last shown; before any jump, the first step that
/// starts after the cursor (steps are in start order).
fn next_step(steps: &[StepSpan], current: Option<usize>, cursor: Ns) -> Option<usize> {
    let i = match current {
        Some(i) => i + 1,
        None => steps.partition_point(|s| s.span.start < cursor),
    };
    (i < steps.len()).then_some(i)
}

/// The step before the one last shown; before any jump, the last step that
/// starts before the cursor.
fn prev_step(steps: &[StepSpan], current: Option<usize>, cursor: Ns) -> Option<usize> {
    match current {
        Some(i) => i.checked_sub(1),
        None => steps
            .partition_point(|s| s.span.start < cursor)
            .checked_sub(1),
    }
}

fn no_step(n: i64, data: &Data) -> String {
    let numbers = data.steps.iter().map(|s| s.number);
    let (first, last) = (
        numbers.clone().min().unwrap_or(0),
        numbers.max().unwrap_or(0),
    );
    format!("no step {n}; the trace has steps {first} to {last}")
}

/// Column and row within `r`, if (col, row) is inside it.
fn inside(r: Rect, col: u16, row: u16) -> Option<(u16, u16)> {
    (col >= r.x && col < r.right() && row >= r.y && row < r.bottom())
        .then(|| (col - r.x, row - r.y))
}

/// First lane shown so that the selected one is visible.
/// Rows per lane: up to 3 when there is room, so few ranks fill the screen.
fn lane_height(rows: u16, lanes: usize) -> u16 {
    let per = usize::from(rows) / lanes.max(1);
    per.clamp(1, 3) as u16
}

fn lane_offset(selected: usize, rows: u16) -> usize {
    crate::tui::widgets::table::offset(selected, usize::from(rows))
}

pub fn render(state: &TimelineState, data: &Data, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.width == 0 || area.height == 0 {
        return;
    }
    let a = areas(area);
    let view = state.view;
    let width = a.lanes.width;
    render_ruler(view, data.span.start, a.ruler, theme, buf);
    let lanes = state.lanes(data);
    let h = lane_height(a.lanes.height, lanes.len());
    let first = lane_offset(state.lane, a.lanes.height / h);
    let cursor_col = time_col(view, width, state.cursor);
    for (k, lane) in lanes
        .iter()
        .skip(first)
        .take(usize::from(a.lanes.height / h))
        .enumerate()
    {
        let y = a.lanes.y + k as u16 * h;
        let selected = first + k == state.lane;
        let label_style = if selected {
            theme.selected()
        } else {
            theme.dim()
        };
        Line::styled(fit(&lane.label(), usize::from(a.labels.width)), label_style)
            .render(Rect::new(a.labels.x, y, a.labels.width, 1), buf);
        let shift = clock_shift(state, data, lane.rank_index);
        let shown = Interval::new(view.start + shift, view.end + shift);
        let r = Rect::new(a.lanes.x, y, width, h);
        draw_lane(lane, shown, r, cursor_col, theme, buf);
    }
    render_info(state, data, theme, a.info, width, buf);
}

/// Draws `lane` over the time range `view` into `r`, one column per slice of
/// time, the column `cursor` reversed.
pub fn draw_lane(
    lane: &Lane,
    view: Interval,
    r: Rect,
    cursor: Option<u16>,
    theme: Theme,
    buf: &mut Buffer,
) {
    let slices: Vec<(Ns, Ns)> = (0..r.width)
        .map(|c| {
            let lo = col_time(view, r.width, c);
            (lo, col_time(view, r.width, c + 1).max(lo + 1))
        })
        .collect();
    for (c, cell) in (0..r.width).zip(shades(lane, &slices)) {
        let style = theme.shade(cell.shade);
        let full = cell.shade.full_glyph(theme);
        // A vertical bar over the lane's rows: its height is the busy share.
        let filled = cell.eighths(r.height);
        let saturated = filled == 8 * u32::from(r.height.max(1));
        for dy in 0..r.height {
            // Eighths below this row's bottom edge (rows counted from the bottom).
            let below = 8 * u32::from(r.height - 1 - dy);
            let glyph = match filled.saturating_sub(below) {
                0 => " ",
                n if n >= 8 && saturated => full,
                n if n >= 8 => "█",
                n => EIGHTHS[n as usize - 1],
            };
            if let Some(cell) = buf.cell_mut((r.x + c, r.y + dy)) {
                cell.set_symbol(glyph).set_style(style);
                if cursor == Some(c) {
                    cell.modifier.insert(Modifier::REVERSED);
                }
            }
        }
    }
}

/// Tick marks and labels for `view`, labelled as time since `origin`.
pub fn render_ruler(view: Interval, origin: Ns, r: Rect, theme: Theme, buf: &mut Buffer) {
    if r.height == 0 || r.width == 0 {
        return;
    }
    let ns_per_col = (view.len() as f64 / f64::from(r.width)).max(1e-9);
    let step = tick_step((ns_per_col * 14.0).ceil() as Ns);
    let rel_start = view.start - origin;
    let mut t = rel_start.div_euclid(step) * step;
    if t < rel_start {
        t += step;
    }
    let tick_row = r.y + r.height - 1;
    for c in 0..r.width {
        if let Some(cell) = buf.cell_mut((r.x + c, tick_row)) {
            cell.set_symbol("─").set_style(theme.dim());
        }
    }
    while t < view.end - origin {
        if let Some(c) = time_col(view, r.width, t + origin) {
            if let Some(cell) = buf.cell_mut((r.x + c, tick_row)) {
                cell.set_symbol("┬").set_style(theme.dim());
            }
            if r.height > 1 {
                let label = human_tick(t, step);
                let room = r.width - c;
                Line::raw(fit(&label, usize::from(room)))
                    .render(Rect::new(r.x + c, r.y, room, 1), buf);
            }
        }
        t += step;
    }
}

fn render_info(
    state: &TimelineState,
    data: &Data,
    theme: Theme,
    r: Rect,
    width: u16,
    buf: &mut Buffer,
) {
    let origin = data.span.start;
    let lanes = state.lanes(data);
    let mut lines = Vec::new();
    // Steps can overlap across ranks: name the latest one that started.
    let step = data
        .steps
        .iter()
        .rev()
        .find(|s| s.span.start <= state.cursor && state.cursor < s.span.end)
        .map_or(String::new(), |s| format!(" · {}", s.label()));
    let clocks = match (&data.trace.offsets, state.raw) {
        (None, _) => String::new(),
        (Some(_), false) => " · clocks aligned (a: raw)".to_owned(),
        (Some(o), true) => {
            let shifted = o.iter().filter(|o| o.offset != 0).count();
            format!(
                " · raw clocks, {shifted} rank(s) off by up to {} (a: aligned)",
                { human(o.iter().map(|o| o.offset.abs()).max().unwrap_or(0)) }
            )
        }
    };
    // Times as precise as a column is wide, so zoomed views read distinctly.
    let col = (state.view.len() / Ns::from(width.max(1))).max(1);
    lines.push(Line::from(vec![
        Span::styled("cursor ", theme.dim()),
        Span::styled(human_tick(state.cursor - origin, col), theme.cursor()),
        Span::raw(format!(
            "{step} · view {} – {} ({} wide) · {} lanes{clocks}",
            human_tick(state.view.start - origin, col),
            human_tick(state.view.end - origin, col),
            human(state.view.len()),
            lanes.len()
        )),
    ]));
    let under = lanes.get(state.lane).map(|lane| {
        let shift = clock_shift(state, data, lane.rank_index);
        // How busy the column under the cursor is, as drawn.
        let column = match time_col(state.view, width, state.cursor) {
            Some(c) => {
                let lo = col_time(state.view, width, c) + shift;
                let hi = (col_time(state.view, width, c + 1) + shift).max(lo + 1);
                let cell = shades(lane, &[(lo, hi)])[0];
                format!(" · column {:.0} % busy", cell.busy * 100.0)
            }
            None => String::new(),
        };
        let ops = data.ops_at(lane.rank_index, lane.stream, state.cursor + shift);
        let t = &data.trace.ranks[lane.rank_index];
        match ops.first() {
            None => Line::styled(
                format!("{}: idle at the cursor{column}", lane.label()),
                theme.dim(),
            ),
            Some(op) => {
                let mut s = format!(
                    "{}{column} · stream {}: {} · start {} · {} · {}",
                    lane.label(),
                    op.stream,
                    t.name(op.name),
                    human(op.start - shift - origin),
                    human(op.dur),
                    op.class.name()
                );
                if let Some(m) = t.coll_meta(op) {
                    s += &format!(" {}", m.kind.name());
                    if let Some(b) = m.in_bytes() {
                        s += &format!(" {}", crate::report::human::bytes(b));
                    }
                    if let Some(g) = m.group_size {
                        s += &format!(" group {g}");
                    }
                } else if let Some(b) = op.bytes() {
                    s += &format!(" {}", crate::report::human::bytes(b));
                }
                if ops.len() > 1 {
                    s += &format!("  (+{} more on other streams)", ops.len() - 1);
                }
                Line::raw(s)
            }
        }
    });
    lines.push(under.unwrap_or_default());
    lines.push(if let Some(p) = &state.prompt {
        Line::styled(
            format!("go to step: {p}▏ (Enter jumps, Esc cancels)"),
            theme.key(),
        )
    } else if let Some(m) = &state.message {
        Line::styled(m.clone(), theme.key())
    } else {
        let mut spans = Vec::new();
        for s in [
            Shade::Compute,
            Shade::Comm,
            Shade::Wait,
            Shade::Overlap,
            Shade::Memory,
        ] {
            spans.push(Span::styled(s.full_glyph(theme), theme.shade(s)));
            spans.push(Span::raw(format!(" {}  ", s.label())));
        }
        spans.push(Span::raw("▂▄▆█ height: busy share"));
        Line::from(spans)
    });
    for (k, l) in lines.into_iter().enumerate().take(usize::from(r.height)) {
        l.render(Rect::new(r.x, r.y + k as u16, r.width, 1), buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Coverage, IntervalSet};

    fn cov(v: &[(Ns, Ns)]) -> Coverage {
        Coverage::new(IntervalSet::from_unsorted(
            v.iter().map(|&(a, b)| Interval::new(a, b)).collect(),
        ))
    }

    #[test]
    fn column_shade_is_the_majority() {
        let lane = Lane {
            rank_index: 0,
            rank: 0,
            stream: None,
            compute: cov(&[(0, 60)]),
            comm: cov(&[(50, 100)]),
            overlap: cov(&[(50, 60)]),
            memory: cov(&[(200, 210)]),
            wait: cov(&[(60, 75)]),
            busy: cov(&[(0, 100), (200, 210)]),
        };
        // [40, 100): compute-only 10, overlap 10, comm-only 40 of which 15 waiting.
        let slices = [
            (0, 40),
            (50, 60),
            (40, 100),
            (60, 75),
            (100, 200),
            (150, 250),
        ];
        use Shade::*;
        let cells = shades(&lane, &slices);
        assert_eq!(
            cells.iter().map(|c| c.shade).collect::<Vec<_>>(),
            vec![Compute, Overlap, Comm, Wait, Idle, Memory]
        );
        // Busy: full, full, full, full, none, 10 of 100.
        let busy: Vec<f64> = cells.iter().map(|c| c.busy).collect();
        assert_eq!(busy, vec![1.0, 1.0, 1.0, 1.0, 0.0, 0.1]);
        // Adjacent columns, as drawn: [0, 50) compute, [50, 100) comm 40 vs overlap 10.
        let two = shades(&lane, &[(0, 50), (50, 100)]);
        assert_eq!((two[0].shade, two[1].shade), (Compute, Comm));
    }

    /// One lane, `busy` of every `period` ns running a compute kernel.
    fn duty_lane(busy: Ns, period: Ns, periods: Ns) -> Lane {
        let k: Vec<(Ns, Ns)> = (0..periods)
            .map(|i| (i * period, i * period + busy))
            .collect();
        Lane {
            rank_index: 0,
            rank: 0,
            stream: None,
            compute: cov(&k),
            comm: cov(&[]),
            overlap: cov(&[]),
            memory: cov(&[]),
            wait: cov(&[]),
            busy: cov(&k),
        }
    }

    fn drawn(lane: &Lane, view: Interval, w: u16, h: u16, theme: Theme) -> Vec<String> {
        let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
        draw_lane(lane, view, buf.area, None, theme, &mut buf);
        (0..h)
            .map(|y| (0..w).map(|x| buf[(x, y)].symbol()).collect())
            .collect()
    }

    #[test]
    fn a_launch_bound_gpu_does_not_look_saturated() {
        // 26 % busy (24 µs kernels every 90 µs... as in a launch-bound MoE step):
        // each of 10 columns spans 10 periods, so each is 26 % busy.
        let lane = duty_lane(26, 100, 100);
        let view = Interval::new(0, 10_000);
        for theme in [Theme::mono(), Theme::default()] {
            // One row: 0.26 × 8 = 2.08 → two eighths.
            assert_eq!(drawn(&lane, view, 10, 1, theme), vec!["▂".repeat(10)]);
            // Three rows: 0.26 × 24 = 6.24 → six eighths, on the bottom row.
            assert_eq!(
                drawn(&lane, view, 10, 3, theme),
                vec![" ".repeat(10), " ".repeat(10), "▆".repeat(10)]
            );
        }
        // Fully busy: the kind's glyph (without colour), a full block (with colour).
        let full = duty_lane(100, 100, 100);
        assert_eq!(drawn(&full, view, 4, 1, Theme::mono()), vec!["████"]);
        // A single 1 ns kernel in a 1 µs column stays visible.
        let tiny = duty_lane(1, 1000, 10);
        assert_eq!(
            drawn(&tiny, view, 10, 1, Theme::mono())[0].chars().next(),
            Some('▁')
        );
    }

    #[test]
    fn without_colour_full_cells_name_their_kind() {
        let mut lane = duty_lane(0, 100, 0);
        lane.comm = cov(&[(0, 100), (200, 250)]);
        lane.busy = cov(&[(0, 100), (200, 250)]);
        let view = Interval::new(0, 400);
        // Columns of 100 ns: full comm, idle, half comm, idle.
        assert_eq!(drawn(&lane, view, 4, 1, Theme::mono()), vec!["░ ▄ "]);
        assert_eq!(drawn(&lane, view, 4, 1, Theme::default()), vec!["█ ▄ "]);
    }

    #[test]
    fn ticks_and_columns() {
        assert_eq!(tick_step(1), 1);
        assert_eq!(tick_step(3), 5);
        assert_eq!(tick_step(1_100), 2_000);
        let v = Interval::new(1000, 2000);
        assert_eq!(col_time(v, 10, 0), 1000);
        assert_eq!(col_time(v, 10, 10), 2000);
        assert_eq!(time_col(v, 10, 1550), Some(5));
        assert_eq!(time_col(v, 10, 2000), None);
    }
}
