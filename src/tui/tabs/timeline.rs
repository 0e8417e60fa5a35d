//! Timeline tab: one lane per rank (or per stream), time across, compute and
//! communication in distinct shades and their overlap in a third; zoom, pan,
//! jump to a step, and a cursor naming the op under it. All lanes share the
//! trace's clock; each screen column is drawn from prefix-sum coverage indexes,
//! so a frame costs O(lanes × columns × log events) at any zoom.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use crate::model::classify::bare_name;
use crate::model::time::{human, human_at, human_tick};
use crate::model::{Interval, Ns};
use crate::tui::action::Action;
use crate::tui::data::{Data, Lane, StepSpan};
use crate::tui::tabs::{Jump, Needs, TabCtx, TabSpec, TabView};
use crate::tui::theme::{Shade, Theme};
use crate::tui::widgets::fit;
use crate::tui::widgets::lanes::{
    col_time, draw_lane, draw_names, fit_view, moved_cursor, panned, render_ruler,
    render_step_marks, shades, time_col, zoom_about,
};

#[derive(Debug, Clone)]
pub struct TimelineState {
    /// The visible time range.
    pub view: Interval,
    pub cursor: Ns,
    /// Selected lane (index into the lanes shown).
    pub lane: usize,
    /// One lane per stream instead of per rank.
    pub streams: bool,
    /// Each rank's launching threads as CPU lanes above its device lanes.
    pub cpu: bool,
    /// Show each file's own clock instead of the aligned one.
    pub raw: bool,
    /// The step number being typed after `:`.
    pub prompt: Option<String>,
    pub message: Option<String>,
    /// The step last jumped to (index into `Data::steps`): `n`/`p` walk from it.
    pub step: Option<usize>,
    /// The search being typed after `/`.
    pub query: Option<String>,
    /// The last search's hits: `}`/`{` walk them.
    pub hits: Option<Hits>,
    /// The details pane for the op under the cursor is open.
    pub details: bool,
    /// A range being marked (its first end) or marked, with its totals.
    pub range: Option<Range>,
    drag: Option<(u16, Interval)>,
    /// The views zoomed in from, latest last: Esc goes back one.
    zooms: Vec<Interval>,
}

/// Zoom levels kept for Esc.
const ZOOMS: usize = 100;

/// Where the parts of the tab go.
pub(crate) struct Areas {
    pub ruler: Rect,
    pub labels: Rect,
    pub lanes: Rect,
    pub info: Rect,
}

/// `pane`: rows for the details or range pane below the info lines; it
/// never takes more than half the tab.
pub(crate) fn areas(area: Rect, pane: u16) -> Areas {
    let info_h = if pane > 0 {
        (pane + 3).min(area.height / 2).max(3)
    } else {
        3
    }
    .min(area.height);
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

/// What to add to a displayed time to get the lane's time in the model: the
/// rank's alignment offset when raw clocks are shown, else nothing.
fn clock_shift(state: &TimelineState, data: &Data, rank_index: usize) -> Ns {
    match (&data.trace.offsets, state.raw) {
        (Some(o), true) => o.get(rank_index).map_or(Ns::ZERO, |o| o.offset),
        _ => Ns::ZERO,
    }
}

impl TimelineState {
    pub(crate) fn new(data: &Data) -> Self {
        Self {
            view: data.span,
            cursor: data.span.start,
            lane: 0,
            streams: false,
            cpu: false,
            raw: false,
            prompt: None,
            message: None,
            step: None,
            query: None,
            hits: None,
            details: false,
            range: None,
            drag: None,
            zooms: Vec::new(),
        }
    }

    /// Remembers `before` for Esc when the view has narrowed since.
    fn remember(&mut self, before: Interval) {
        if self.view.len() < before.len() {
            if self.zooms.len() == ZOOMS {
                self.zooms.remove(0);
            }
            self.zooms.push(before);
        }
    }

    /// The lanes shown, top to bottom: per rank, its CPU lanes (when on)
    /// above its device lane or streams.
    pub fn lanes<'a>(&self, data: &'a Data) -> Vec<&'a Lane> {
        let device = if self.streams {
            &data.stream_lanes
        } else {
            &data.lanes
        };
        if !self.cpu {
            return device.iter().collect();
        }
        let mut out =
            Vec::with_capacity(device.len() + data.cpu_lanes.len() + data.queue_lanes.len());
        let mut cpu = data.cpu_lanes.iter().peekable();
        let mut queue = data.queue_lanes.iter().peekable();
        for l in device {
            while let Some(c) = cpu.next_if(|c| c.rank_index <= l.rank_index) {
                out.push(c);
            }
            // Between a rank's CPU lanes and its first device lane.
            while let Some(q) = queue.next_if(|q| q.rank_index <= l.rank_index) {
                out.push(q);
            }
            out.push(l);
        }
        out.extend(cpu);
        out
    }

    /// Rows the details or range pane wants.
    fn pane_rows(&self, data: &Data) -> u16 {
        match &self.range {
            Some(Range {
                totals: Some(_), ..
            }) => 2 + data.lanes.len().min(64) as u16,
            Some(_) => 1,
            None if self.details => DETAIL_ROWS,
            None => 0,
        }
    }

    pub(crate) fn typing(&self) -> bool {
        self.prompt.is_some() || self.query.is_some()
    }

    /// Moves to hit `k`: its rank's lane (or its stream's), the cursor on its
    /// start, the view around it at the same zoom (wider when the op is).
    fn show_hit(&mut self, data: &Data, k: usize, width: u16) {
        let Some(h) = &mut self.hits else { return };
        let Some(&hit) = h.list.get(k) else {
            return;
        };
        h.at = k;
        let said = h.say();
        let ri = hit.rank_index as usize;
        let shift = clock_shift(self, data, ri);
        let (start, end) = (hit.start - shift, hit.start + hit.dur - shift);
        self.select_lane(data, ri, Some(hit.stream));
        let len = self.view.len().max((end - start) * 5 / 4);
        if start < self.view.start || end > self.view.end || len > self.view.len() {
            let mid = start + (end - start) / 2;
            self.set_view(data, mid - len / 2, len, width);
        }
        self.cursor = start;
        self.step = None;
        self.message = Some(said);
    }

    fn set_view(&mut self, data: &Data, start: Ns, len: Ns, width: u16) {
        self.view = fit_view(data.span, start, len, width);
    }

    fn zoom(&mut self, data: &Data, factor: f64, at: Ns, width: u16) {
        let (start, len) = zoom_about(self.view, factor, at);
        self.set_view(data, start, len, width);
    }

    /// Selects rank `rank_index`'s lane, or its `stream`'s with one lane per stream.
    fn select_lane(&mut self, data: &Data, rank_index: usize, stream: Option<u32>) {
        let stream = stream.filter(|_| self.streams);
        if let Some(l) = self.lanes(data).iter().position(|l| {
            l.is_device() && l.rank_index == rank_index && (stream.is_none() || l.stream == stream)
        }) {
            self.lane = l;
        }
    }

    /// Shows `j` (Enter on another tab's row): its rank's lane (its stream's
    /// with one lane per stream), its range and cursor.
    pub(crate) fn show(&mut self, data: &Data, j: &Jump, area: Rect) {
        let before = self.view;
        self.show_jump(data, j, area);
        self.remember(before);
    }

    fn show_jump(&mut self, data: &Data, j: &Jump, area: Rect) {
        let width = areas(area, self.pane_rows(data)).lanes.width;
        self.select_lane(data, j.rank_index, j.stream);
        self.set_view(data, j.span.start, j.span.len(), width);
        self.cursor = j.cursor;
        self.step = None;
        self.message = Some(j.why.clone());
    }

    fn show_step(&mut self, data: &Data, i: usize, width: u16) {
        let s = data.steps[i];
        let pad = s.span.len() / 50;
        self.set_view(data, s.span.start - pad, s.span.len() + pad * 2, width);
        self.cursor = s.span.start;
        self.step = Some(i);
        self.message = Some(s.label());
    }

    pub(crate) fn update(&mut self, action: Action, data: &Data, area: Rect) {
        let before = self.view;
        self.act(action, data, area);
        if action != Action::Back {
            self.remember(before);
        }
    }

    fn act(&mut self, action: Action, data: &Data, area: Rect) {
        let a = areas(area, self.pane_rows(data));
        let width = a.lanes.width;
        let ns_per_col = (self.view.len() / i64::from(width.max(1))).max(Ns(1));
        if let Some(q) = &mut self.query {
            match action {
                Action::Input(c) => q.push(c),
                Action::Backspace => {
                    q.pop();
                }
                Action::Back => self.query = None,
                Action::Submit => {
                    let text = self.query.take().unwrap_or_default();
                    match Hits::find(data, &text) {
                        Some(h) => {
                            let first = h.first_from(self.cursor);
                            self.hits = Some(h);
                            self.show_hit(data, first, width);
                        }
                        None => self.message = Some(format!("no op matches {text:?}")),
                    }
                }
                _ => {}
            }
            return;
        }
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
            // Esc clears a range first, then undoes the zoom; it never quits.
            Action::Back if self.range.is_some() => self.range = None,
            Action::Mark => {
                self.range = Some(match self.range.take() {
                    Some(Range { from, totals: None }) => {
                        let span =
                            Interval::new(from.min(self.cursor), from.max(self.cursor) + Ns(1));
                        Range {
                            from,
                            totals: Some(RangeTotals::of(data, span)),
                        }
                    }
                    _ => Range {
                        from: self.cursor,
                        totals: None,
                    },
                });
            }
            // Esc goes back to the view zoomed in from (the whole trace when
            // none is left); it never quits.
            Action::Back => {
                self.view = self.zooms.pop().unwrap_or(data.span);
                self.step = None;
            }
            Action::ResetZoom => {
                self.zooms.clear();
                self.view = data.span;
                self.step = None;
            }
            Action::PanLeft | Action::PanRight => {
                self.view = panned(data.span, self.view, action == Action::PanLeft, width);
            }
            Action::CursorLeft | Action::CursorRight => {
                let by = if action == Action::CursorLeft {
                    -ns_per_col
                } else {
                    ns_per_col
                };
                (self.view, self.cursor) =
                    moved_cursor(data.span, (self.view, self.cursor), by, width);
                self.step = None;
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
            Action::Search => self.query = Some(String::new()),
            Action::ToggleDetails => self.details = !self.details,
            Action::NextHit | Action::PrevHit => match &self.hits {
                None => self.message = Some("no search yet: / finds ops by name".into()),
                Some(h) => {
                    let n = h.list.len();
                    let k = if action == Action::NextHit {
                        (h.at + 1) % n
                    } else {
                        (h.at + n - 1) % n
                    };
                    self.show_hit(data, k, width);
                }
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
                    self.message = Some(match &data.trace.clock_doubt {
                        Some(d) => format!("clocks not moved: {d}"),
                        None => "clocks not moved: the ranks' collectives already end together \
                                 on their own clocks (one host clock), none is shared, or \
                                 --align none"
                            .into(),
                    })
                }
            },
            Action::ToggleStreams | Action::ToggleCpu => {
                let rank = self.lanes(data).get(self.lane).map(|l| l.rank);
                if action == Action::ToggleCpu {
                    if data.cpu_lanes.is_empty() && data.paged.is_some() {
                        self.message = Some(
                            "no CPU lanes: a summary opened in pages reads no CPU ranges (--pages never reads every op)".into(),
                        );
                        return;
                    }
                    if data.cpu_lanes.is_empty() {
                        self.message = Some(
                            "no CPU lanes: they come from the threads making kernel-launch calls (PyTorch profiler traces; Nsight Systems exports with CUDA API calls, a process per GPU; nsys-jax archives whose ranges keep their CPU times), and this trace has none".into(),
                        );
                        return;
                    }
                    self.cpu = !self.cpu;
                } else {
                    self.streams = !self.streams;
                }
                self.lane = self
                    .lanes(data)
                    .iter()
                    .position(|l| Some(l.rank) == rank && l.is_device())
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
                        (view.len() / i64::from(width.max(1))) * (i64::from(from) - i64::from(col));
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

/// The ops whose name matches a search, in start order over all ranks.
#[derive(Debug, Clone)]
pub struct Hits {
    pub pattern: String,
    pub list: Vec<Hit>,
    /// Hits per rank, for ranks with any.
    pub per_rank: Vec<(u32, usize)>,
    /// The hit shown.
    pub at: usize,
}

/// One op a search found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hit {
    pub rank_index: u32,
    pub start: Ns,
    pub dur: Ns,
    pub stream: u32,
}

impl Hits {
    /// Ops whose name contains `pattern` as a case-insensitive regex (as
    /// plain text when it is not a valid one); `None` without a hit. In
    /// pages, ranks with a matching name are read a row group at a time.
    pub fn find(data: &Data, pattern: &str) -> Option<Self> {
        let build = |p: &str| {
            regex::RegexBuilder::new(p)
                .case_insensitive(true)
                .size_limit(1 << 20)
                .build()
        };
        let re = build(pattern)
            .or_else(|_| build(&regex::escape(pattern)))
            .ok()?;
        let mut list = Vec::new();
        let mut per_rank = Vec::new();
        for (ri, t) in data.trace.ranks.iter().enumerate() {
            // Each distinct name is matched once, not each op.
            let names: Vec<bool> = t.strings.iter().map(|n| re.is_match(n)).collect();
            if !names.contains(&true) {
                continue;
            }
            let before = list.len();
            let mut add = |o: &crate::model::DeviceOp| {
                if names[o.name.0 as usize] {
                    list.push(Hit {
                        rank_index: ri as u32,
                        start: o.start,
                        dur: o.dur,
                        stream: o.stream,
                    });
                }
            };
            let all = Interval::new(Ns::MIN / 4, Ns::MAX / 4);
            if let Err(e) = data.visit_ops(ri, all, &mut add) {
                data.page_failed(e);
            }
            if list.len() > before {
                per_rank.push((t.rank, list.len() - before));
            }
        }
        if list.is_empty() {
            return None;
        }
        list.sort_by_key(|h| (h.start, h.rank_index));
        Some(Self {
            pattern: pattern.to_owned(),
            list,
            per_rank,
            at: 0,
        })
    }

    /// The first hit starting at or after `t` (the first of all past the end).
    fn first_from(&self, t: Ns) -> usize {
        let i = self.list.partition_point(|h| h.start < t);
        if i < self.list.len() {
            i
        } else {
            0
        }
    }

    /// "hit 3 of 16 for "gemm" · r0 8, r1 8 · } next  { previous".
    pub(crate) fn say(&self) -> String {
        let ranks: Vec<String> = self
            .per_rank
            .iter()
            .map(|(r, n)| format!("r{r} {n}"))
            .collect();
        format!(
            "hit {} of {} for {:?} · {} · }} next  {{ previous",
            self.at + 1,
            self.list.len(),
            self.pattern,
            ranks.join(", ")
        )
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

pub(crate) fn render(
    state: &TimelineState,
    data: &Data,
    theme: Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    if area.width == 0 || area.height == 0 {
        return;
    }
    let a = areas(area, state.pane_rows(data));
    let view = state.view;
    let width = a.lanes.width;
    render_ruler(view, data.span.start, a.ruler, theme, buf);
    render_step_marks(view, &data.step_marks(), a.ruler, theme, buf);
    // A marked range: a bar over its columns on the ruler's label row.
    if let Some(Range {
        totals: Some(t), ..
    }) = &state.range
    {
        for c in 0..a.ruler.width {
            let (lo, hi) = (col_time(view, width, c), col_time(view, width, c + 1));
            if hi > t.span.start && lo < t.span.end {
                if let Some(cell) = buf.cell_mut((a.ruler.x + c, a.ruler.y)) {
                    cell.set_symbol("▔").set_style(theme.key());
                }
            }
        }
    }
    let lanes = state.lanes(data);
    let h = lane_height(a.lanes.height, lanes.len());
    let first = lane_offset(state.lane, a.lanes.height / h);
    let cursor_col = time_col(view, width, state.cursor);
    let visible = || {
        lanes
            .iter()
            .skip(first)
            .take(usize::from(a.lanes.height / h))
    };
    // Paged: the visible ranks' windows are read together.
    let views: Vec<(usize, Interval)> = visible()
        .map(|l| {
            let shift = clock_shift(state, data, l.rank_index);
            (
                l.rank_index,
                Interval::new(view.start + shift, view.end + shift),
            )
        })
        .collect();
    data.prefetch(&views, width);
    for (k, lane) in visible().enumerate() {
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
        if lane.queue {
            draw_queue(data, lane.rank_index, shown, r, cursor_col, theme, buf);
            continue;
        }
        draw_lane(
            &data.shown(lane, shown, width),
            shown,
            r,
            cursor_col,
            theme,
            buf,
        );
        // Zoomed in far enough, ops show their names (a few per column at most
        // are looked at; wider views have no room for names anyway).
        let max = usize::from(width) * 4;
        if let Some(th) = lane.thread(&data.trace) {
            // One nesting level per row: the outermost ranges on the first.
            let t = &data.trace.ranks[lane.rank_index];
            for dy in 0..h {
                let Some(ops) = th.at_depth(dy as u8, shown.start, shown.end, max) else {
                    break;
                };
                let mut named: Vec<(Ns, Ns, String)> = ops
                    .iter()
                    .map(|o| (o.start, o.end(), bare_name(t.name(o.name))))
                    .collect();
                draw_names(
                    &mut named,
                    shown,
                    Rect::new(r.x, r.y + dy, r.width, 1),
                    theme,
                    buf,
                );
            }
        } else if let Some(ops) = data.ops_in(lane.rank_index, lane.stream, shown, max) {
            let t = &data.trace.ranks[lane.rank_index];
            let mut named: Vec<(Ns, Ns, String)> = ops
                .iter()
                .map(|o| (o.start, o.end(), bare_name(t.name(o.name))))
                .collect();
            draw_names(&mut named, shown, r, theme, buf);
        }
    }
    if state.cpu {
        let rows: Vec<(usize, &Lane)> = visible().copied().enumerate().collect();
        draw_launch_flow(state, data, (first, &rows), (a.lanes, h), theme, buf);
    }
    render_info(state, data, theme, a.info, width, buf);
}

/// Per column, the longest wait between launch and start of the rank's ops
/// starting in it, exactly from the ops where few are in view, else from
/// the queue's bins.
fn queue_waits(data: &Data, rank_index: usize, shown: Interval, width: u16) -> Vec<Option<Ns>> {
    use crate::tui::queue::longest_of;
    let Some(Some(q)) = data.queues.get(rank_index) else {
        return vec![None; usize::from(width)];
    };
    let edges: Vec<Ns> = (0..=width).map(|c| col_time(shown, width, c)).collect();
    let per_col = shown.len() / i64::from(width.max(1));
    let exact = (per_col < q.resolution() * 4)
        .then(|| data.ops_in(rank_index, None, shown, usize::from(width) * 16))
        .flatten();
    edges
        .windows(2)
        .map(|e| match &exact {
            Some(ops) => longest_of(ops, e[0], e[1]),
            None => q.longest(e[0], e[1]),
        })
        .collect()
}

/// A rank's launch queue as a row of bars: per column, how long the ops
/// starting there waited after their launch (how far the CPU ran ahead),
/// on a log scale from 1 µs (an eighth) to 10 ms (a full cell).
fn draw_queue(
    data: &Data,
    rank_index: usize,
    shown: Interval,
    r: Rect,
    cursor: Option<u16>,
    theme: Theme,
    buf: &mut Buffer,
) {
    use crate::tui::queue::eighths;
    use crate::tui::theme::EIGHTHS;
    for (c, w) in queue_waits(data, rank_index, shown, r.width)
        .into_iter()
        .enumerate()
    {
        let x = r.x + c as u16;
        // The bar's eighths over the lane's whole height.
        let filled = w.map_or(0, |w| eighths(w) * usize::from(r.height));
        for row in 0..r.height {
            let Some(cell) = buf.cell_mut((x, r.bottom() - 1 - row)) else {
                continue;
            };
            let here = filled.saturating_sub(usize::from(row) * 8).min(8);
            if here > 0 {
                cell.set_symbol(EIGHTHS[here - 1])
                    .set_style(theme.shade(Shade::CpuOp));
            }
            if cursor == Some(c as u16) {
                cell.modifier.insert(ratatui::style::Modifier::REVERSED);
            }
        }
    }
}

/// With CPU lanes on and the cursor on a kernel: `◆` at its launch on the
/// launching thread's lane and at its start on the device lane, joined by
/// `┆` on the rows between (the flow Perfetto draws as an arrow), so how far
/// the CPU ran ahead reads off the screen. `rows`: the visible lanes with
/// their row index, the first being lane `first`; `lanes`: their area and
/// each lane's height.
fn draw_launch_flow(
    state: &TimelineState,
    data: &Data,
    (first, rows): (usize, &[(usize, &Lane)]),
    (lanes, h): (Rect, u16),
    theme: Theme,
    buf: &mut Buffer,
) {
    let Some(&(k_dev, lane)) = rows.iter().find(|(k, _)| first + k == state.lane) else {
        return;
    };
    let ri = lane.rank_index;
    // Only a device lane with its rank's CPU lanes on screen (none in a
    // paged summary) looks up the op under the cursor.
    if !lane.is_device()
        || !rows
            .iter()
            .any(|(_, l)| l.rank_index == ri && l.cpu.is_some())
    {
        return;
    }
    let shift = clock_shift(state, data, ri);
    let Some(op) = data
        .ops_at(ri, lane.stream, state.cursor + shift)
        .into_iter()
        .next()
    else {
        return;
    };
    let t = &data.trace.ranks[ri];
    let Some((th, _)) = launched_from(t, op.launch).filter(|_| op.launch != op.start) else {
        return;
    };
    let Some(&(k_cpu, _)) = rows.iter().find(|(_, l)| {
        l.rank_index == ri && l.thread(&data.trace).is_some_and(|x| std::ptr::eq(x, th))
    }) else {
        return;
    };
    let view = state.view;
    let (Some(c_launch), Some(c_start)) = (
        time_col(view, lanes.width, op.launch - shift),
        time_col(view, lanes.width, op.start - shift),
    ) else {
        return;
    };
    let row = |k: usize| lanes.y + k as u16 * h;
    let mut mark = |x: u16, y: u16, glyph: &str| {
        if let Some(cell) = buf.cell_mut((lanes.x + x, y)) {
            cell.set_symbol(glyph).set_style(theme.cursor());
        }
    };
    mark(c_launch, row(k_cpu), "◆");
    for y in row(k_cpu) + 1..row(k_dev) {
        mark(c_launch, y, "┆");
    }
    mark(c_start, row(k_dev), "◆");
}

/// A time range marked with `m`: its first end, and once closed its totals.
#[derive(Debug, Clone)]
pub struct Range {
    pub from: Ns,
    pub totals: Option<RangeTotals>,
}

/// What every rank did in a marked range, and the kernels with the most
/// device time in it.
#[derive(Debug, Clone, PartialEq)]
pub struct RangeTotals {
    pub span: Interval,
    /// Per rank: (rank, [compute only, overlap, exposed communication of which
    /// waiting, waiting, copies, idle]).
    pub ranks: Vec<(u32, [Ns; 6])>,
    /// (name, device time in the range over all ranks), most first.
    pub top: Vec<(String, Ns)>,
}

/// Columns a range's totals are drawn at: paged, its lanes are read at
/// this resolution.
const RANGE_COLUMNS: u16 = 1024;

impl RangeTotals {
    pub(crate) const TERMS: [&'static str; 6] = [
        "compute",
        "overlap",
        "exp. comm",
        "waiting",
        "copies",
        "idle",
    ];

    pub fn of(data: &Data, span: Interval) -> Self {
        let slice = [(span.start, span.end)];
        let ranks = data
            .lanes
            .iter()
            .map(|l| {
                // Paged, bins at most 1/4096 of the range wide (or its ops).
                let l = data.shown(l, span, RANGE_COLUMNS);
                let c = |cov: &crate::model::Coverage| cov.covered_slices(&slice)[0];
                let (compute, comm, overlap) = (c(&l.compute), c(&l.comm), c(&l.overlap));
                let exposed = comm - overlap;
                let wait = c(&l.wait).min(exposed);
                let idle = span.len() - c(&l.busy);
                (
                    l.rank,
                    [
                        compute - overlap,
                        overlap,
                        exposed,
                        wait,
                        c(&l.memory),
                        idle,
                    ],
                )
            })
            .collect();
        let mut by_name: std::collections::HashMap<String, Ns> = Default::default();
        for (ri, t) in data.trace.ranks.iter().enumerate() {
            let mut by_id: std::collections::HashMap<crate::model::StrId, Ns> = Default::default();
            let r = data.visit_ops(ri, span, &mut |o| {
                if o.is_kernel() {
                    let inside = o.end().min(span.end) - o.start.max(span.start);
                    *by_id.entry(o.name).or_default() += inside.max(Ns::ZERO);
                }
            });
            if let Err(e) = r {
                data.page_failed(e);
            }
            for (id, d) in by_id {
                *by_name.entry(bare_name(t.name(id))).or_default() += d;
            }
        }
        let mut top: Vec<(String, Ns)> = by_name.into_iter().collect();
        top.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        top.truncate(3);
        Self { span, ranks, top }
    }
}

/// The range pane: per rank what the device did in the range, as time and
/// share, and the top kernels.
fn range_lines(range: &Range, cursor: Ns, origin: Ns, theme: Theme) -> Vec<Line<'static>> {
    let Some(t) = &range.totals else {
        return vec![Line::styled(
            format!(
                "range from {} to the cursor ({}): m marks its other end, Esc cancels",
                human(range.from - origin),
                human(cursor - origin)
            ),
            theme.key(),
        )];
    };
    let mut out = vec![Line::styled(
        format!(
            "range {} – {} ({} wide; waiting is part of exp. comm; Esc clears) · top kernels: {}",
            human(t.span.start - origin),
            human(t.span.end - origin),
            human(t.span.len()),
            t.top
                .iter()
                .map(|(n, d)| format!("{n} {}", human(*d)))
                .collect::<Vec<_>>()
                .join(", ")
        ),
        theme.key(),
    )];
    let mut head = format!("{:<6}", "rank");
    for term in RangeTotals::TERMS {
        head += &format!(" {term:>12}");
    }
    out.push(Line::styled(head, theme.header()));
    for (rank, v) in &t.ranks {
        let mut row = format!("{rank:<6}");
        for x in v {
            let share = x.as_f64() / t.span.len().max(Ns(1)).as_f64() * 100.0;
            row += &format!(" {:>12}", format!("{} {share:.0}%", human(*x)));
        }
        out.push(Line::raw(row));
    }
    out
}

/// Rows of the details pane.
const DETAIL_ROWS: u16 = 7;

/// The op under the cursor on `lane` in full: name, kind and place, times,
/// launch, collective, and at a collective matched across ranks its wait
/// and whom it waited for.
fn details(data: &Data, lane: &Lane, at: Ns, shift: Ns, width: u16) -> Vec<Line<'static>> {
    let ri = lane.rank_index;
    let t = &data.trace.ranks[ri];
    if let Some(th) = lane.thread(&data.trace) {
        return cpu_details(data, t, th, at, shift);
    }
    let ops = data.ops_at(ri, lane.stream, at);
    let Some(op) = ops.first() else {
        return vec![Line::raw("details: no op under the cursor on this lane")];
    };
    // Its index among the rank's resident ops, where matched collectives are.
    let oi = data.op_index(ri, op);
    let origin = data.span.start;
    let w = usize::from(width) + 10;
    let mut out = Vec::new();
    let name = crate::safe::text(t.name(op.name));
    for chunk in name.chars().collect::<Vec<_>>().chunks(w.max(1)).take(2) {
        out.push(Line::raw(chunk.iter().collect::<String>()));
    }
    let step = op
        .step
        .get()
        .and_then(|i| t.steps.get(i as usize))
        .map_or(String::new(), |s| {
            format!(" · launched in step {}", s.number)
        });
    out.push(Line::raw(format!(
        "{} {:?} · rank {} · device {} · stream {}{step}",
        op.class.name(),
        op.activity,
        t.rank,
        op.device,
        op.stream
    )));
    let at = |t: Ns| human_at(t - shift - origin, op.dur);
    out.push(Line::raw(format!(
        "start {} · duration {} · end {} (since the first op of the trace)",
        at(op.start),
        human(op.dur),
        at(op.end())
    )));
    if op.launch != op.start {
        out.push(Line::raw(format!(
            "launched by the CPU at {}: {} before it started",
            at(op.launch),
            human(op.start - op.launch)
        )));
        if let Some((th, stack)) = launched_from(t, op.launch) {
            out.push(Line::raw(format!(
                "launched from thread {}: {}",
                th.tid,
                stack_text(t, &stack)
            )));
        }
    }
    if let Some(m) = t.coll_meta(op) {
        let mut s = format!("collective {}", m.kind.name());
        if let Some(b) = m.in_bytes() {
            s += &format!(" · {} in", crate::human::bytes(b));
        }
        if let Some(g) = m.group_size {
            s += &format!(" · group of {g}");
        }
        if let Some(pg) = m.pg_name {
            s += &format!(" \"{}\"", crate::safe::text(t.name(pg)));
        }
        if let Some(r) = m.pg_ranks {
            s += &format!(" ranks {}", crate::safe::text(t.name(r)));
        }
        out.push(Line::raw(s));
    } else if let Some(kind) = op.coll {
        out.push(Line::raw(format!(
            "collective {} (no size recorded)",
            kind.name()
        )));
    }
    let inst = oi.and_then(|oi| data.instances.of_op(t, oi));
    if let Some(k) = inst {
        let i = data.instances.get(k);
        let ranks = &data.trace.ranks;
        let last = i
            .pairs()
            .map(|(r, o)| (ranks[r].ops[o].start, r))
            .max_by_key(|&(s, r)| (s, std::cmp::Reverse(r)));
        if let Some((last, lr)) = last {
            let s = if lr == ri {
                format!(
                    "matched on {} ranks: this rank arrived last; transfer {}",
                    i.len(),
                    human(op.dur)
                )
            } else {
                let wait = (last - op.start).clamp(Ns::ZERO, op.dur);
                format!(
                    "matched on {} ranks: waited {} for rank {} (the last to arrive), transfer {}",
                    i.len(),
                    human(wait),
                    ranks[lr].rank,
                    human(op.dur - wait)
                )
            };
            out.push(Line::raw(s));
        }
    }
    if ops.len() > 1 {
        out.push(Line::raw(format!(
            "{} more op(s) at the cursor on other streams (t: one lane per stream)",
            ops.len() - 1
        )));
    }
    out
}

/// The launching thread and the CPU call stack of a launch at `launch`:
/// the thread with a runtime call starting there.
fn launched_from(
    t: &crate::model::RankTimeline,
    launch: Ns,
) -> Option<(&crate::model::CpuThread, Vec<&crate::model::CpuOp>)> {
    t.cpu.iter().find_map(|th| {
        let stack = th.stack_at(launch);
        let call = stack.last()?;
        (call.kind == crate::model::CpuKind::Runtime && call.start == launch).then_some((th, stack))
    })
}

/// `aten::linear › aten::addmm › cudaLaunchKernel`, the step range left out.
fn stack_text(t: &crate::model::RankTimeline, stack: &[&crate::model::CpuOp]) -> String {
    let names: Vec<String> = stack
        .iter()
        .map(|o| crate::safe::text(t.name(o.name)).into_owned())
        .filter(|n| !n.starts_with("ProfilerStep#"))
        .collect();
    names.join(" › ")
}

/// The CPU call stack under the cursor on a CPU lane, innermost last.
fn cpu_details(
    data: &Data,
    t: &crate::model::RankTimeline,
    th: &crate::model::CpuThread,
    at: Ns,
    shift: Ns,
) -> Vec<Line<'static>> {
    let stack = th.stack_at(at);
    if stack.is_empty() {
        return vec![Line::raw(format!(
            "details: thread {} runs nothing the profiler recorded here",
            th.tid
        ))];
    }
    let origin = data.span.start;
    let mut out = vec![Line::raw(format!(
        "rank {} · thread {} ({} kernel launches) · call stack at the cursor, outermost first:",
        t.rank, th.tid, th.launches
    ))];
    // The innermost ranges matter most: with a deep stack the outer ones
    // share one line.
    let room = usize::from(DETAIL_ROWS) - 2;
    let skip = stack.len().saturating_sub(room);
    if skip > 0 {
        out.push(Line::raw(format!("… {}", stack_text(t, &stack[..=skip]))));
    }
    for (k, op) in stack.iter().enumerate().skip(skip + usize::from(skip > 0)) {
        out.push(Line::raw(format!(
            "{}{} · {:?} · start {} · {}",
            "  ".repeat(k.min(8)),
            crate::safe::text(t.name(op.name)),
            op.kind,
            human(op.start - shift - origin),
            human(op.dur)
        )));
    }
    out
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
            let shifted = o.iter().filter(|o| o.offset != Ns::ZERO).count();
            format!(
                " · raw clocks, {shifted} rank(s) off by up to {} (a: aligned)",
                { human(o.iter().map(|o| o.offset.abs()).max().unwrap_or(Ns::ZERO)) }
            )
        }
    };
    // Times as precise as a column is wide, so zoomed views read distinctly.
    let col = (state.view.len() / i64::from(width.max(1))).max(Ns(1));
    lines.push(Line::from(vec![
        Span::styled("cursor ", theme.dim()),
        Span::styled(human_tick(state.cursor - origin, col), theme.cursor()),
        Span::raw(format!(
            "{step} · view {} – {} ({} wide) · {}{clocks}",
            human_tick(state.view.start - origin, col),
            human_tick(state.view.end - origin, col),
            human(state.view.len()),
            crate::human::plural(lanes.len(), "lane", "lanes")
        )),
    ]));
    let under = lanes.get(state.lane).map(|lane| {
        let shift = clock_shift(state, data, lane.rank_index);
        if lane.queue {
            let shown = Interval::new(state.view.start + shift, state.view.end + shift);
            let w = time_col(state.view, width, state.cursor).and_then(|c| {
                queue_waits(data, lane.rank_index, shown, width)[usize::from(c)]
            });
            return match w {
                Some(w) => Line::raw(format!(
                    "{}: the ops starting in the cursor's column waited up to {} after their launch: the CPU ran that far ahead (bars: 1 µs to 10 ms, log scale)",
                    lane.label(),
                    human(w)
                )),
                None => Line::styled(
                    format!(
                        "{}: no op with a known launch starts in the cursor's column",
                        lane.label()
                    ),
                    theme.dim(),
                ),
            };
        }
        // How busy the column under the cursor is, as drawn.
        let column = match time_col(state.view, width, state.cursor) {
            Some(c) => {
                let lo = col_time(state.view, width, c) + shift;
                let hi = (col_time(state.view, width, c + 1) + shift).max(lo + Ns(1));
                let shown = Interval::new(state.view.start + shift, state.view.end + shift);
                let cell = shades(&data.shown(lane, shown, width), &[(lo, hi)])[0];
                format!(" · column {:.0} % busy", cell.busy * 100.0)
            }
            None => String::new(),
        };
        let t = &data.trace.ranks[lane.rank_index];
        if let Some(th) = lane.thread(&data.trace) {
            let stack = th.stack_at(state.cursor + shift);
            return match stack.last() {
                None => Line::styled(
                    format!(
                        "{} (thread {}): idle at the cursor{column}",
                        lane.label(),
                        th.tid
                    ),
                    theme.dim(),
                ),
                Some(op) => Line::raw(format!(
                    "{}{column} · thread {}: {} · start {} · {} · depth {} (d: call stack)",
                    lane.label(),
                    th.tid,
                    crate::safe::text(t.name(op.name)),
                    human(op.start - shift - origin),
                    human(op.dur),
                    op.depth
                )),
            };
        }
        let ops = data.ops_at(lane.rank_index, lane.stream, state.cursor + shift);
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
                        s += &format!(" {}", crate::human::bytes(b));
                    }
                    if let Some(g) = m.group_size {
                        s += &format!(" group {g}");
                    }
                } else if let Some(b) = op.bytes() {
                    s += &format!(" {}", crate::human::bytes(b));
                }
                if ops.len() > 1 {
                    s += &format!("  (+{} more on other streams)", ops.len() - 1);
                }
                Line::raw(s)
            }
        }
    });
    lines.push(under.unwrap_or_default());
    if let Some(range) = &state.range {
        let shown = usize::from(r.height.saturating_sub(3));
        let mut d = range_lines(range, state.cursor, origin, theme);
        d.truncate(shown);
        d.resize(shown, Line::default());
        lines.extend(d);
    } else if state.details {
        let d = lanes.get(state.lane).map_or_else(Vec::new, |lane| {
            let shift = clock_shift(state, data, lane.rank_index);
            details(data, lane, state.cursor + shift, shift, width)
        });
        let shown = usize::from(r.height.saturating_sub(3));
        let mut d: Vec<Line> = d.into_iter().take(shown).collect();
        d.resize(shown, Line::default());
        lines.extend(d);
    }
    lines.push(if let Some(q) = &state.query {
        Line::styled(
            format!(
                "find: {}▏ (name, substring or regex; Enter finds, Esc cancels)",
                crate::safe::text(q)
            ),
            theme.key(),
        )
    } else if let Some(p) = &state.prompt {
        Line::styled(
            format!("go to step: {p}▏ (Enter jumps, Esc cancels)"),
            theme.key(),
        )
    } else if let Some(e) = data.page_error() {
        Line::styled(format!("cannot read the summary: {e}"), theme.error())
    } else if let Some(m) = &state.message {
        Line::styled(m.clone(), theme.key())
    } else {
        let mut spans = Vec::new();
        let cpu = [Shade::CpuOp, Shade::Runtime];
        for s in [
            Shade::Compute,
            Shade::Comm,
            Shade::Wait,
            Shade::Overlap,
            Shade::Memory,
        ]
        .into_iter()
        .chain(cpu.into_iter().filter(|_| state.cpu))
        {
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

pub(crate) const TAB: TabSpec = TabSpec {
    tab: super::Tab::Timeline,
    needs: Needs::Nothing,
    make: |data| Box::new(TimelineState::new(data)),
    per_run: true,
};

impl TabView for TimelineState {
    fn update(&mut self, action: Action, view: &TabCtx) {
        TimelineState::update(self, action, view.data, view.area);
    }

    fn render(&self, view: &TabCtx, theme: Theme, buf: &mut Buffer) {
        render(self, view.data, theme, view.area, buf);
    }

    fn clock(&self, _data: &Data) -> Option<(Interval, Ns)> {
        // Raw clocks are each file's own, not the one other tabs share.
        (!self.raw).then_some((self.view, self.cursor))
    }

    fn follow(&mut self, view: Interval, cursor: Ns, data: &Data, area: Rect) {
        if self.raw {
            return;
        }
        let before = self.view;
        let width = areas(area, self.pane_rows(data)).lanes.width;
        self.set_view(data, view.start, view.len(), width);
        self.cursor = cursor.clamp(data.span.start, data.span.end - Ns(1));
        self.step = None;
        self.remember(before);
    }

    fn typing(&self) -> bool {
        TimelineState::typing(self)
    }
}
