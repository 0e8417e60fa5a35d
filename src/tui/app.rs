//! The application state and its one way of changing: `App::update(Action)`.
//! Rendering (`impl Widget for &App`) only reads it.

use std::sync::Arc;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::action::Action;
use super::data::Data;
use super::keymap::{status_hints, Mode};
use super::pair::Pair;
use super::registry::TABS;
use super::tabs::timeline::TimelineState;
use super::tabs::{Jump, Tab, TabCtx, TabView};
use super::theme::Theme;
use super::widgets::help::{self, Help};

pub struct App {
    /// The run the single-run tabs show (run A or B when two are open).
    pub data: Arc<Data>,
    /// Two runs open: both and their comparison.
    pub pair: Option<Arc<Pair>>,
    pub theme: Theme,
    pub tab: Tab,
    /// Help is open, scrolled by this many lines.
    pub help: Option<u16>,
    pub quit: bool,
    /// Terminal size: layout (and so mouse hits) depends on it.
    pub size: (u16, u16),
    /// Where `w` writes the screen (default: the current folder).
    pub save_dir: std::path::PathBuf,
    /// What the last key did that the status line says instead of the hints
    /// (where the screen was written).
    pub notice: Option<String>,
    /// Where Backspace returns to: the tab left by Enter and the Timeline's
    /// state before it moved.
    back: Vec<(Tab, Option<TimelineState>)>,
    /// Each registered tab's state, indexed like `TABS`.
    views: Vec<Box<dyn TabView>>,
    /// The view and cursor last moved on a tab on the Timeline's clock, for
    /// the next such tab opened; and the open tab's when it was opened (to
    /// tell whether it moved).
    shared: Option<(crate::model::Interval, crate::model::Ns)>,
    entered: Option<(crate::model::Interval, crate::model::Ns)>,
}

/// Tab bar, tab body, status line.
pub(crate) fn layout(area: Rect) -> (Rect, Rect, Rect) {
    let bar = Rect::new(area.x, area.y, area.width, 1.min(area.height));
    let status_h = 1.min(area.height - bar.height);
    let body = Rect::new(
        area.x,
        area.y + bar.height,
        area.width,
        area.height - bar.height - status_h,
    );
    let status = Rect::new(area.x, body.bottom(), area.width, status_h);
    (bar, body, status)
}

const BRAND: &str = " ccl-bench ";

/// The tab bar in `width` cells: the brand and each tab's label, as many
/// as fit. Too narrow for all, the brand goes, then the other tabs show
/// their number only, so the active tab is always named.
pub fn bar(tabs: &[Tab], active: Tab, width: u16) -> (bool, Vec<(Tab, String)>) {
    let full: Vec<(Tab, String)> = tabs.iter().map(|&t| (t, t.label())).collect();
    let len = |labels: &[(Tab, String)]| -> usize {
        labels.iter().map(|(_, l)| l.chars().count() + 1).sum()
    };
    let width = usize::from(width);
    if BRAND.chars().count() + len(&full) <= width {
        return (true, full);
    }
    if len(&full) <= width {
        return (false, full);
    }
    let short = tabs
        .iter()
        .map(|&t| {
            let l = if t == active {
                t.label()
            } else {
                format!(" {} ", t.index() + 1)
            };
            (t, l)
        })
        .collect();
    (false, short)
}

/// The tab whose label is at column `col` of the tab bar (see [`bar`]).
pub fn tab_at(col: u16, tabs: &[Tab], active: Tab, width: u16) -> Option<Tab> {
    let (brand, labels) = bar(tabs, active, width);
    let mut x = if brand {
        BRAND.chars().count() as u16
    } else {
        0
    };
    for (t, l) in labels {
        let w = l.chars().count() as u16;
        if col >= x && col < x + w {
            return Some(t);
        }
        x += w + 1;
    }
    None
}

impl App {
    pub fn new(data: Arc<Data>, theme: Theme, size: (u16, u16)) -> Self {
        // Dumps alone: their verdict is all there is to show. Beside
        // profiler traces: say where it is. Memory snapshots alone: their
        // chart, not a Summary of no device timeline.
        let dumps = !data.trace.flight.is_empty();
        let snapshots = !data.trace.memory.is_empty();
        let (tab, notice) = match (dumps, data.trace.ranks.is_empty()) {
            (true, true) => (Tab::Hang, None),
            (false, true) if snapshots => (Tab::Memory, None),
            (true, false) => (
                Tab::default(),
                Some(format!(
                    "NCCL Flight Recorder dumps here: {} shows why the run hung",
                    Tab::Hang.label().trim()
                )),
            ),
            _ => (Tab::default(), None),
        };
        Self {
            views: TABS.iter().map(|spec| (spec.make)(&data)).collect(),
            data,
            pair: None,
            theme,
            tab,
            help: None,
            quit: false,
            size,
            save_dir: std::path::PathBuf::from("."),
            back: Vec::new(),
            notice,
            shared: None,
            entered: None,
        }
    }

    /// Two runs: opens on the Compare tab; the other tabs show run A.
    pub fn with_pair(pair: Pair, theme: Theme, size: (u16, u16)) -> Self {
        let mut app = Self::new(Arc::clone(&pair.a), theme, size);
        app.pair = Some(Arc::new(pair));
        app.tab = Tab::for_two_runs();
        app
    }

    /// The state of the registered tab of type `T` (for tests and tools
    /// that inspect the UI).
    pub fn state<T: TabView>(&self) -> Option<&T> {
        self.views
            .iter()
            .find_map(|v| (v.as_ref() as &dyn std::any::Any).downcast_ref::<T>())
    }

    /// The state of the tab of type `T`, to change (tests set a cursor).
    pub fn state_mut<T: TabView>(&mut self) -> Option<&mut T> {
        self.views
            .iter_mut()
            .find_map(|v| (v.as_mut() as &mut dyn std::any::Any).downcast_mut::<T>())
    }

    /// Opens tab `t`. A tab on the Timeline's clock (Timeline, Memory)
    /// shows the view and cursor last moved on another such tab.
    fn set_tab(&mut self, t: Tab) {
        if t == self.tab {
            return;
        }
        let data = Arc::clone(&self.data);
        let left = self.views[self.tab.index()].clock(&data);
        if left.is_some() && left != self.entered {
            self.shared = left;
        }
        self.tab = t;
        let area = self.body();
        if let Some((view, cursor)) = self.shared {
            self.views[t.index()].follow(view, cursor, &data, area);
        }
        self.entered = self.views[t.index()].clock(&data);
    }

    /// Shows `j` on the Timeline, remembering where it came from.
    fn open(&mut self, j: &Jump) {
        let before = self.state::<TimelineState>().cloned();
        self.back.push((self.tab, before));
        self.tab = Tab::Timeline;
        let data = Arc::clone(&self.data);
        let area = self.body();
        if let Some(t) = self.state_mut::<TimelineState>() {
            t.show(&data, j, area);
        }
        self.entered = None;
    }

    /// Back to the tab and Timeline view the last `open` left.
    fn go_back(&mut self) {
        match self.back.pop() {
            Some((tab, timeline)) => {
                if let (Some(old), Some(t)) = (timeline, self.state_mut::<TimelineState>()) {
                    *t = old;
                }
                self.tab = tab;
                self.entered = self.views[tab.index()].clock(&Arc::clone(&self.data));
            }
            None => {
                self.notice = Some(
                    "nothing to go back to (Enter on a Kernels or Stragglers row jumps)".into(),
                )
            }
        }
    }

    pub fn tabs(&self) -> Vec<Tab> {
        Tab::available(super::registry::Has {
            memory: !self.data.trace.memory.is_empty(),
            flight: !self.data.trace.flight.is_empty(),
            two_runs: self.pair.is_some(),
        })
    }

    /// "A" or "B" when two runs are open: which one the single-run tabs show.
    pub fn shown_run(&self) -> Option<&'static str> {
        let p = self.pair.as_ref()?;
        Some(if Arc::ptr_eq(&self.data, &p.a) {
            "A"
        } else {
            "B"
        })
    }

    fn switch_run(&mut self) {
        let Some(p) = &self.pair else { return };
        let other = if Arc::ptr_eq(&self.data, &p.a) {
            Arc::clone(&p.b)
        } else {
            Arc::clone(&p.a)
        };
        // A tab whose state indexes into its run's data starts afresh.
        for (spec, view) in TABS.iter().zip(&mut self.views) {
            if spec.per_run {
                *view = (spec.make)(&other);
            }
        }
        self.data = other;
        // The other run has its own clock.
        self.shared = None;
        self.entered = None;
        if !self.tabs().contains(&self.tab) {
            self.tab = Tab::default();
        }
    }

    pub fn mode(&self) -> Mode {
        if self.views[self.tab.index()].typing() && self.help.is_none() {
            Mode::Typing
        } else {
            Mode::Normal
        }
    }

    fn body(&self) -> Rect {
        layout(Rect::new(0, 0, self.size.0, self.size.1)).1
    }

    /// Writes the screen as it is drawn now (see `svg::save`).
    fn save_view(&self) -> std::io::Result<(std::path::PathBuf, std::path::PathBuf)> {
        use ratatui::widgets::Widget;
        let (w, h) = self.size;
        let mut buf = ratatui::buffer::Buffer::empty(Rect::new(0, 0, w, h));
        self.render(buf.area, &mut buf);
        super::svg::save(&buf, self.tab.title(), &self.save_dir)
    }

    pub fn update(&mut self, action: Action) {
        self.notice = None;
        match action {
            Action::Quit => return self.quit = true,
            Action::SaveView => {
                let said = match self.save_view() {
                    Ok((svg, txt)) => {
                        format!("screen written to {} and {}", svg.display(), txt.display())
                    }
                    Err(e) => format!("screen not written: {e}"),
                };
                return self.notice = Some(said);
            }
            Action::Resize { width, height } => return self.size = (width, height),
            Action::ToggleHelp => {
                self.help = if self.help.is_some() { None } else { Some(0) };
                return;
            }
            _ => {}
        }
        if let Some(scroll) = &mut self.help {
            match action {
                Action::Back => self.help = None,
                Action::Down | Action::ScrollDown { .. } => {
                    let max = help::lines(self.theme).len() as u16;
                    *scroll = (*scroll + 1).min(max);
                }
                Action::Up | Action::ScrollUp { .. } => *scroll = scroll.saturating_sub(1),
                _ => {}
            }
            return;
        }
        if self.mode() == Mode::Normal {
            match action {
                Action::NextTab => return self.set_tab(self.tab.next(&self.tabs())),
                Action::PrevTab => return self.set_tab(self.tab.prev(&self.tabs())),
                Action::SelectTab(t) => {
                    if self.tabs().contains(&t) {
                        self.set_tab(t);
                    } else {
                        // Say why the key did nothing rather than ignore it.
                        self.notice = Some(format!(
                            "no {} tab: it needs {}",
                            t.title(),
                            t.spec().needs.describe()
                        ));
                    }
                    return;
                }
                Action::SwitchRun => return self.switch_run(),
                Action::GoBack => return self.go_back(),
                Action::Click { col, row: 0 } => {
                    if let Some(t) = tab_at(col, &self.tabs(), self.tab, self.size.0) {
                        self.set_tab(t);
                    }
                    return;
                }
                _ => {}
            }
        }
        let view = TabCtx {
            data: &self.data,
            pair: self.pair.as_deref(),
            area: self.body(),
        };
        self.views[self.tab.index()].update(action, &view);
        if let Some(j) = self.views[self.tab.index()].take_jump() {
            self.open(&j);
        }
    }

    /// The status line after `? help  q quit`: the tab's state, then its keys.
    fn hint(&self) -> String {
        let state = self.views[self.tab.index()].status();
        let keys = status_hints(self.tab);
        match (state.is_empty(), keys.is_empty()) {
            (false, false) => format!("{state} · {keys}"),
            (true, _) => keys,
            (_, true) => state,
        }
    }
}

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        let (bar_area, body, status) = layout(area);
        let t = self.theme;
        let (brand, labels) = bar(&self.tabs(), self.tab, bar_area.width);
        let mut spans = Vec::new();
        if brand {
            spans.push(Span::styled(BRAND, t.title()));
        }
        for (tab, label) in labels {
            let style = if tab == self.tab {
                t.tab_active()
            } else {
                t.dim()
            };
            spans.push(Span::styled(label, style));
            spans.push(Span::raw(" "));
        }
        if let Some(run) = self.shown_run() {
            spans.push(Span::styled(
                format!(" other tabs show run {run} (b)"),
                t.dim(),
            ));
        }
        Line::from(spans).render(bar_area, buf);
        let view = TabCtx {
            data: &self.data,
            pair: self.pair.as_deref(),
            area: body,
        };
        self.views[self.tab.index()].render(&view, t, buf);
        if status.height > 0 {
            Line::from(vec![
                Span::styled(" ? ", t.key()),
                Span::raw("help  "),
                Span::styled("q ", t.key()),
                Span::raw("quit  │ "),
                match &self.notice {
                    Some(n) => Span::styled(crate::safe::text(n), t.key()),
                    None => Span::styled(self.hint(), t.dim()),
                },
            ])
            .render(status, buf);
        }
        if let Some(scroll) = self.help {
            Help { theme: t, scroll }.render(area, buf);
        }
    }
}
