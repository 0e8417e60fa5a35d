//! Memory tab (with CUDA memory snapshots): one rank's device memory over
//! the allocator history. Where the rank's trace states the Unix time of its
//! clock, the chart is on the Timeline's time axis, column for column: the
//! same ruler, step marks, the forward/backward/optimizer ranges the trace
//! annotates, and the view and cursor shared with the Timeline both ways.
//! Allocated bytes are stacked by the phase that allocated them (read from
//! each allocation's stack), reserved bytes drawn as a line above them.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Modifier;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use crate::model::memory::{MemoryTimeline, Phase};
use crate::model::{Interval, Ns};
use crate::tui::action::Action;
use crate::tui::data::Data;
use crate::tui::memory_view::{phase_marks, MemClock, MemView};
use crate::tui::tabs::{Jump, Needs, TabCtx, TabSpec, TabView};
use crate::tui::theme::{phase_glyph, Shade, Theme, EIGHTHS};
use crate::tui::widgets::fit;
use crate::tui::widgets::lanes::{
    col_time, draw_names, fit_view, moved_cursor, panned, render_ruler, render_step_marks,
    time_col, zoom_about,
};

#[derive(Debug, Clone)]
pub struct MemoryState {
    /// Index into the trace's memory timelines.
    pub index: usize,
    /// The visible time range, on the snapshot's clock (the Timeline's when
    /// it shares it).
    pub view: Interval,
    pub cursor: Ns,
    message: Option<String>,
    jump: Option<Jump>,
}

/// Columns left of the chart for its labels: the Timeline's, so a time is
/// in the same column on both tabs.
const LABEL_W: u16 = 10;

/// Where the parts of the tab go: header lines, then the ruler, the phase
/// row (when the trace marks phases), the chart and two info lines.
struct Areas {
    head: Rect,
    ruler: Rect,
    phases: Option<Rect>,
    labels: Rect,
    chart: Rect,
    info: Rect,
}

fn areas(area: Rect, head: u16, phases: bool) -> Areas {
    let head = head.min(area.height / 3);
    let info_h = 2.min(area.height - head);
    let ruler_h = 2.min(area.height - head - info_h);
    let phase_h = u16::from(phases).min(area.height - head - info_h - ruler_h);
    let chart_h = area.height - head - info_h - ruler_h - phase_h;
    let label_w = LABEL_W.min(area.width / 3);
    let x = area.x + label_w;
    let w = area.width - label_w;
    let y = area.y + head + ruler_h;
    Areas {
        head: Rect::new(area.x, area.y, area.width, head),
        ruler: Rect::new(x, area.y + head, w, ruler_h),
        phases: (phase_h > 0).then(|| Rect::new(x, y, w, phase_h)),
        labels: Rect::new(area.x, y + phase_h, label_w, chart_h),
        chart: Rect::new(x, y + phase_h, w, chart_h),
        info: Rect::new(area.x, y + phase_h + chart_h, area.width, info_h),
    }
}

/// Everything the snapshot's clock can show: with the Timeline's, the trace
/// and the history together (the history often starts before the profiler).
fn full(data: &Data, v: &MemView) -> Interval {
    let own = v.span().unwrap_or(Interval::new(Ns::ZERO, Ns(1)));
    match v.clock {
        MemClock::Trace { .. } => {
            Interval::new(data.span.start.min(own.start), data.span.end.max(own.end))
        }
        MemClock::Own(_) => own,
    }
}

/// The time shown as 0 on the ruler: the Timeline's origin when on its
/// clock, else the history's first event.
fn origin(data: &Data, v: &MemView) -> Ns {
    match v.clock {
        MemClock::Trace { .. } => data.span.start,
        MemClock::Own(_) => v.span().map_or(Ns::ZERO, |s| s.start),
    }
}

impl MemoryState {
    pub(crate) fn new(data: &Data) -> Self {
        let mut s = Self {
            index: 0,
            view: data.span,
            cursor: data.span.start,
            message: None,
            jump: None,
        };
        s.reset(data);
        s
    }

    fn mem<'a>(&self, data: &'a Data) -> Option<(&'a MemoryTimeline, &'a MemView)> {
        Some((
            data.trace.memory.get(self.index)?,
            data.memory.get(self.index)?,
        ))
    }

    /// The whole history (and trace) in view, the cursor at the peak.
    fn reset(&mut self, data: &Data) {
        let Some((m, v)) = self.mem(data) else {
            return;
        };
        self.view = full(data, v);
        self.cursor = m
            .peak_index()
            .and_then(|i| v.times.get(i).copied())
            .unwrap_or(self.view.start);
    }

    /// Whether the chart is on the Timeline's clock.
    fn shares_clock(&self, data: &Data) -> bool {
        self.mem(data)
            .is_some_and(|(_, v)| matches!(v.clock, MemClock::Trace { .. }))
    }

    fn set_view(&mut self, data: &Data, start: Ns, len: Ns, width: u16) {
        let Some((_, v)) = self.mem(data) else {
            return;
        };
        self.view = fit_view(full(data, v), start, len, width);
    }

    fn zoom(&mut self, data: &Data, factor: f64, at: Ns, width: u16) {
        let (start, len) = zoom_about(self.view, factor, at);
        self.set_view(data, start, len, width);
    }

    fn show_step(&mut self, data: &Data, forward: bool, width: u16) {
        if !self.shares_clock(data) {
            self.message = Some("no steps: the snapshot is not on the trace's clock".into());
            return;
        }
        let c = self.cursor;
        let step = if forward {
            data.steps.iter().find(|s| s.span.start > c)
        } else {
            data.steps.iter().rev().find(|s| s.span.start < c)
        };
        match step {
            Some(s) => {
                let pad = s.span.len() / 50;
                self.set_view(data, s.span.start - pad, s.span.len() + pad * 2, width);
                // The cursor line names the step.
                self.cursor = s.span.start;
            }
            None => {
                self.message = Some(
                    if forward {
                        "no later step"
                    } else {
                        "no earlier step"
                    }
                    .into(),
                )
            }
        }
    }

    pub(crate) fn update(&mut self, action: Action, data: &Data, area: Rect) {
        let n = data.trace.memory.len().max(1);
        let phases = self
            .mem(data)
            .is_some_and(|(m, v)| !marks(data, m, v).is_empty());
        let head = self.mem(data).map_or(0, |(m, _)| head_rows(m));
        let a = areas(area, head, phases);
        let width = a.chart.width;
        let per_col = (self.view.len() / i64::from(width.max(1))).max(Ns(1));
        self.message = None;
        match action {
            Action::NextRank | Action::Down | Action::PrevRank | Action::Up => {
                let before = self.shares_clock(data);
                self.index = if matches!(action, Action::NextRank | Action::Down) {
                    (self.index + 1) % n
                } else {
                    (self.index + n - 1) % n
                };
                // Another clock: its own whole span; the same: the same view.
                if !(before && self.shares_clock(data)) {
                    self.reset(data);
                }
            }
            Action::ZoomIn => self.zoom(data, 0.5, self.cursor, width),
            Action::ZoomOut => self.zoom(data, 2.0, self.cursor, width),
            Action::ResetZoom | Action::Back => {
                let c = self.cursor;
                self.reset(data);
                self.cursor = c;
            }
            Action::PanLeft | Action::PanRight => {
                let all = self.mem(data).map_or(self.view, |(_, v)| full(data, v));
                self.view = panned(all, self.view, action == Action::PanLeft, width);
            }
            Action::CursorLeft | Action::CursorRight => {
                let by = if action == Action::CursorLeft {
                    -per_col
                } else {
                    per_col
                };
                let all = self.mem(data).map_or(self.view, |(_, v)| full(data, v));
                (self.view, self.cursor) = moved_cursor(all, (self.view, self.cursor), by, width);
            }
            Action::NextStep => self.show_step(data, true, width),
            Action::PrevStep => self.show_step(data, false, width),
            Action::Open => match self.mem(data).map(|(_, v)| &v.clock) {
                Some(&MemClock::Trace { rank_index }) => {
                    self.jump = Some(Jump {
                        rank_index,
                        stream: None,
                        span: self.view,
                        cursor: self.cursor,
                        why: "the Memory tab's view and cursor".into(),
                    })
                }
                Some(MemClock::Own(why)) => {
                    self.message = Some(format!("not on the Timeline's clock: {why}"))
                }
                None => {}
            },
            Action::Click { col, row }
                if inside(a.chart, col, row) || a.phases.is_some_and(|p| inside(p, col, row)) =>
            {
                self.cursor = col_time(self.view, width, col - a.chart.x) + per_col / 2;
            }
            Action::ScrollUp { col, row } | Action::ScrollDown { col, row } => {
                let at = if inside(a.chart, col, row) {
                    col_time(self.view, width, col - a.chart.x)
                } else {
                    self.cursor
                };
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

fn inside(r: Rect, col: u16, row: u16) -> bool {
    col >= r.x && col < r.right() && row >= r.y && row < r.bottom()
}

/// The lines [`header`] writes for `m`.
fn head_rows(m: &MemoryTimeline) -> u16 {
    1 + u16::from(m.peak_index().is_some())
        + u16::from(m.peak_reserved().is_some())
        + u16::from(!m.peak_sites.is_empty())
}

/// The rank's phase ranges, when the snapshot is on its trace's clock.
fn marks(data: &Data, _m: &MemoryTimeline, v: &MemView) -> Vec<(Ns, Ns, Phase)> {
    match v.clock {
        MemClock::Trace { rank_index } => data
            .trace
            .ranks
            .get(rank_index)
            .map(phase_marks)
            .unwrap_or_default(),
        MemClock::Own(_) => Vec::new(),
    }
}

fn gb(bytes: i64) -> String {
    format!("{:.3} GB", bytes as f64 / 1e9)
}

/// The phases holding any bytes, in words: "forward 2.130 GB, backward …".
fn by_phase(bytes: [i64; 5]) -> String {
    let parts: Vec<String> = Phase::ALL
        .iter()
        .zip(bytes)
        .filter(|(_, b)| *b != 0)
        .map(|(p, b)| format!("{} {}", p.name(), gb(b)))
        .collect();
    parts.join(", ")
}

pub(crate) fn render(state: &MemoryState, data: &Data, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.width == 0 || area.height == 0 {
        return;
    }
    let Some((m, v)) = state.mem(data) else {
        Line::styled("no memory snapshot", theme.dim()).render(area, buf);
        return;
    };
    let marks = marks(data, m, v);
    let head = header(
        m,
        v,
        (state.index, data.trace.memory.len()),
        theme,
        area.width,
    );
    let a = areas(area, head.len() as u16, !marks.is_empty());
    Paragraph::new(head).render(a.head, buf);
    let view = state.view;
    let width = a.chart.width;
    if width == 0 {
        return;
    }
    render_ruler(view, origin(data, v), a.ruler, theme, buf);
    if matches!(v.clock, MemClock::Trace { .. }) {
        render_step_marks(view, &data.step_marks(), a.ruler, theme, buf);
    }
    let cursor_col = time_col(view, width, state.cursor);
    if let Some(r) = a.phases {
        draw_phases(&marks, view, r, cursor_col, theme, buf);
        Line::styled("phase", theme.dim())
            .render(Rect::new(a.labels.x, r.y, a.labels.width, 1), buf);
    }
    draw_chart(v, view, a.chart, cursor_col, theme, buf);
    // GB at the top, middle and foot of the chart.
    let h = a.chart.height;
    if h >= 2 {
        for (row, frac) in [(0, 1.0), (h / 2, 0.5), (h - 1, 0.0)] {
            let label = format!("{:.2} GB", v.top as f64 * frac / 1e9);
            Line::styled(fit(&label, usize::from(a.labels.width)), theme.dim()).render(
                Rect::new(a.labels.x, a.labels.y + row, a.labels.width, 1),
                buf,
            );
        }
    }
    let info = info_lines(state, data, v, &marks, theme, area.width);
    Paragraph::new(info).render(a.info, buf);
}

/// The phase row: each annotated range in its phase's colour, named where
/// it is wide enough.
fn draw_phases(
    marks: &[(Ns, Ns, Phase)],
    view: Interval,
    r: Rect,
    cursor: Option<u16>,
    theme: Theme,
    buf: &mut Buffer,
) {
    for c in 0..r.width {
        let mid = col_time(view, r.width, c) + (view.len() / i64::from(r.width.max(1))) / 2;
        let k = marks.partition_point(|m| m.0 <= mid);
        let Some(&(_, end, p)) = k.checked_sub(1).and_then(|k| marks.get(k)) else {
            continue;
        };
        if mid < end {
            if let Some(cell) = buf.cell_mut((r.x + c, r.y)) {
                cell.set_symbol(phase_glyph(p, theme))
                    .set_style(theme.phase(p));
                if cursor == Some(c) {
                    cell.modifier.insert(Modifier::REVERSED);
                }
            }
        }
    }
    let mut named: Vec<(Ns, Ns, String)> = marks
        .iter()
        .map(|&(s, e, p)| (s, e, p.name().to_owned()))
        .collect();
    draw_names(&mut named, view, r, theme, buf);
}

/// Each column: the bytes allocated by phase stacked from the foot (eighth
/// blocks at the top), the reserved bytes as `─` above them, the cursor's
/// column reversed.
fn draw_chart(
    v: &MemView,
    view: Interval,
    r: Rect,
    cursor: Option<u16>,
    theme: Theme,
    buf: &mut Buffer,
) {
    if r.height == 0 {
        return;
    }
    let eighths = f64::from(r.height) * 8.0;
    let scale =
        |bytes: i64| -> u32 { (bytes.max(0) as f64 / v.top as f64 * eighths).round() as u32 };
    let reserved = &v.reserved;
    let edges: Vec<Ns> = (0..=r.width).map(|c| col_time(view, r.width, c)).collect();
    for (c, pick) in v.columns(&edges).into_iter().enumerate() {
        let c = c as u16;
        let Some(i) = pick else { continue };
        // Eighths where each phase's bytes end, stacked in `Phase::ALL` order.
        let mut ends = [0u32; 5];
        let mut acc = 0i64;
        for (k, b) in v.phases[i].iter().enumerate() {
            acc += b.max(&0);
            ends[k] = scale(acc);
        }
        let top = ends[4];
        let res = reserved.get(i).map_or(0, |&b| scale(b));
        for row in 0..r.height {
            let lo = u32::from(row) * 8;
            let y = r.bottom() - 1 - row;
            let Some(cell) = buf.cell_mut((r.x + c, y)) else {
                continue;
            };
            if top > lo {
                // The phase holding the cell's middle (or its top, for a
                // partly filled cell).
                let probe = (lo + 4).min(top - 1);
                let k = ends.iter().position(|&e| e > probe).unwrap_or(4);
                let p = Phase::ALL[k];
                let filled = top - lo;
                let glyph = if filled >= 8 {
                    phase_glyph(p, theme)
                } else {
                    EIGHTHS[filled as usize - 1]
                };
                cell.set_symbol(glyph).set_style(theme.phase(p));
            } else if res > lo && res <= lo + 8 {
                cell.set_symbol("─").set_style(theme.shade(Shade::Memory));
            }
            if cursor == Some(c) {
                cell.modifier.insert(Modifier::REVERSED);
            }
        }
    }
}

/// The cursor's time, step and phase and the bytes then; a legend.
fn info_lines(
    state: &MemoryState,
    data: &Data,
    v: &MemView,
    marks: &[(Ns, Ns, Phase)],
    theme: Theme,
    width: u16,
) -> Vec<Line<'static>> {
    let w = usize::from(width);
    let t = state.cursor;
    let mut at = format!("cursor {}", crate::model::time::human(t - origin(data, v)));
    if matches!(v.clock, MemClock::Trace { .. }) {
        if let Some(s) = data
            .steps
            .iter()
            .find(|s| s.span.start <= t && t < s.span.end)
        {
            at.push_str(&format!(" · {}", s.label()));
        }
        if let Some(&(_, _, p)) = marks.iter().rev().find(|m| m.0 <= t && t < m.1) {
            at.push_str(&format!(" · in {}", p.name()));
        }
    }
    let first = match v.at(t) {
        Some(i) => {
            format!(
                "{at} · allocated {} ({}) · reserved {}",
                gb(v.allocated(i)),
                by_phase(v.phases[i]),
                gb(v.reserved[i])
            )
        }
        None => format!("{at} · before the allocator history"),
    };
    let first = match &state.message {
        Some(m) => Line::styled(fit(m, w), theme.key()),
        None => Line::raw(fit(&first, w)),
    };
    let mut legend: Vec<Span<'static>> = Vec::new();
    for p in Phase::ALL {
        legend.push(Span::styled(phase_glyph(p, theme), theme.phase(p)));
        legend.push(Span::styled(format!(" {}  ", p.name()), theme.dim()));
    }
    legend.push(Span::styled("─", theme.shade(Shade::Memory)));
    legend.push(Span::styled(" reserved", theme.dim()));
    vec![first, Line::from(legend)]
}

/// `which`: (index, count) of this rank's snapshot among the trace's.
fn header(
    m: &MemoryTimeline,
    v: &MemView,
    which: (usize, usize),
    theme: Theme,
    width: u16,
) -> Vec<Line<'static>> {
    let w = usize::from(width);
    let clock = match &v.clock {
        MemClock::Trace { .. } => "on the Timeline's clock".to_owned(),
        MemClock::Own(why) => format!("on the allocator's own clock: {why}"),
    };
    let mut out = vec![Line::from(vec![
        Span::styled(format!("Rank {} ", m.rank), theme.title()),
        Span::styled(
            fit(
                &format!(
                    "({} of {} with snapshots, r/R) · {clock} · {}",
                    which.0 + 1,
                    which.1,
                    m.source.display()
                ),
                w.saturating_sub(8),
            ),
            theme.dim(),
        ),
    ])];
    let mut facts = Vec::new();
    if let (Some(p), Some(i)) = (m.peak_allocated(), m.peak_index()) {
        let frag = if p.reserved > 0 {
            format!(
                " ({:.1} % of the reservation unusable then)",
                (1.0 - p.allocated as f64 / p.reserved as f64) * 100.0
            )
        } else {
            String::new()
        };
        facts.push(format!(
            "peak allocated {} (by phase: {}), reserved {} then{frag}",
            gb(p.allocated),
            by_phase(v.phases[i]),
            gb(p.reserved)
        ));
    }
    if let Some(r) = m.peak_reserved() {
        facts.push(format!(
            "peak reserved {} · at snapshot: allocated {}, reserved {}, active {} · {} allocations, {} frees",
            gb(r),
            gb(m.end.allocated),
            gb(m.end.reserved),
            gb(m.end.active),
            m.allocs,
            m.frees
        ));
    }
    if !m.peak_sites.is_empty() {
        let sites: Vec<String> = m
            .peak_sites
            .iter()
            .map(|(at, bytes)| format!("{} {at}", crate::human::bytes(*bytes as u64)))
            .collect();
        facts.push(format!(
            "live at the peak, by where it was allocated: {}",
            sites.join(" · ")
        ));
    }
    out.extend(facts.into_iter().map(|f| Line::raw(fit(&f, w))));
    out
}

pub(crate) const TAB: TabSpec = TabSpec {
    tab: super::Tab::Memory,
    needs: Needs::MemorySnapshot,
    make: |data| Box::new(MemoryState::new(data)),
    per_run: true,
};

impl TabView for MemoryState {
    fn update(&mut self, action: Action, view: &TabCtx) {
        MemoryState::update(self, action, view.data, view.area);
    }

    fn render(&self, view: &TabCtx, theme: Theme, buf: &mut Buffer) {
        render(self, view.data, theme, view.area, buf);
    }

    fn take_jump(&mut self) -> Option<Jump> {
        self.jump.take()
    }

    fn clock(&self, data: &Data) -> Option<(Interval, Ns)> {
        self.shares_clock(data).then_some((self.view, self.cursor))
    }

    fn follow(&mut self, view: Interval, cursor: Ns, data: &Data, area: Rect) {
        if self.shares_clock(data) {
            let width = area.width.saturating_sub(LABEL_W);
            self.set_view(data, view.start, view.len(), width);
            self.cursor = cursor;
        }
    }
}
