//! The application state and its one way of changing: `App::update(Action)`.
//! Rendering (`impl Widget for &App`) only reads it.

use std::sync::Arc;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::Widget;

use super::action::Action;
use super::data::Data;
use super::keymap::Mode;
use super::pair::Pair;
use super::tabs::compare::{self, CompareState};
use super::tabs::kernels::{self, KernelsState};
use super::tabs::memory::{self, MemoryState};
use super::tabs::stragglers::{self, StragglersState};
use super::tabs::summary::{self, SummaryState};
use super::tabs::timeline::{self, TimelineState};
use super::tabs::Tab;
use super::theme::Theme;
use super::widgets::help::{self, Help};

pub struct App {
    /// The run the single-run tabs show (run A or B when two are open).
    pub data: Arc<Data>,
    /// Two runs open: both, their comparison, and the Compare tab's state.
    pub pair: Option<Arc<Pair>>,
    pub compare: CompareState,
    pub theme: Theme,
    pub tab: Tab,
    /// Help is open, scrolled by this many lines.
    pub help: Option<u16>,
    pub quit: bool,
    /// Terminal size: layout (and so mouse hits) depends on it.
    pub size: (u16, u16),
    pub summary: SummaryState,
    pub kernels: KernelsState,
    pub timeline: TimelineState,
    pub stragglers: StragglersState,
    pub memory: MemoryState,
}

/// Tab bar, tab body, status line.
pub fn layout(area: Rect) -> (Rect, Rect, Rect) {
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

/// The tab whose label is at column `col` of the tab bar showing `tabs`.
pub fn tab_at(col: u16, tabs: &[Tab]) -> Option<Tab> {
    let mut x = BRAND.chars().count() as u16;
    for &t in tabs {
        let w = t.label().chars().count() as u16;
        if col >= x && col < x + w {
            return Some(t);
        }
        x += w + 1;
    }
    None
}

impl App {
    pub fn new(data: Arc<Data>, theme: Theme, size: (u16, u16)) -> Self {
        Self {
            summary: SummaryState::default(),
            kernels: KernelsState::new(&data),
            timeline: TimelineState::new(&data),
            stragglers: StragglersState::new(&data),
            memory: MemoryState::default(),
            data,
            pair: None,
            compare: CompareState::default(),
            theme,
            tab: Tab::Summary,
            help: None,
            quit: false,
            size,
        }
    }

    /// Two runs: opens on the Compare tab; the other tabs show run A.
    pub fn with_pair(pair: Pair, theme: Theme, size: (u16, u16)) -> Self {
        let mut app = Self::new(Arc::clone(&pair.a), theme, size);
        app.pair = Some(Arc::new(pair));
        app.tab = Tab::Compare;
        app
    }

    pub fn tabs(&self) -> Vec<Tab> {
        Tab::available(!self.data.trace.memory.is_empty(), self.pair.is_some())
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
        // Each tab's state indexes into its run's data: start them afresh.
        self.kernels = KernelsState::new(&other);
        self.timeline = TimelineState::new(&other);
        self.stragglers = StragglersState::new(&other);
        self.summary = SummaryState::default();
        self.memory = MemoryState::default();
        self.data = other;
        if !self.tabs().contains(&self.tab) {
            self.tab = Tab::Summary;
        }
    }

    pub fn mode(&self) -> Mode {
        let typing = match self.tab {
            Tab::Kernels => self.kernels.typing,
            Tab::Timeline => self.timeline.typing(),
            _ => false,
        };
        if typing && self.help.is_none() {
            Mode::Typing
        } else {
            Mode::Normal
        }
    }

    fn body(&self) -> Rect {
        layout(Rect::new(0, 0, self.size.0, self.size.1)).1
    }

    pub fn update(&mut self, action: Action) {
        match action {
            Action::Quit => return self.quit = true,
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
                Action::NextTab => return self.tab = self.tab.next(&self.tabs()),
                Action::PrevTab => return self.tab = self.tab.prev(&self.tabs()),
                Action::SelectTab(t) => {
                    if self.tabs().contains(&t) {
                        self.tab = t;
                    }
                    return;
                }
                Action::SwitchRun => return self.switch_run(),
                Action::Click { col, row: 0 } => {
                    if let Some(t) = tab_at(col, &self.tabs()) {
                        self.tab = t;
                    }
                    return;
                }
                _ => {}
            }
        }
        let body = self.body();
        let data = &self.data;
        match self.tab {
            Tab::Summary => self.summary.update(action, data, body),
            Tab::Kernels => self.kernels.update(action, data, body),
            Tab::Timeline => self.timeline.update(action, data, body),
            Tab::Stragglers => self.stragglers.update(action, data, body),
            Tab::Memory => self.memory.update(action, data),
            Tab::Compare => {
                if let Some(p) = &self.pair {
                    self.compare.update(action, p, body);
                }
            }
        }
    }

    fn hint(&self) -> String {
        match self.tab {
            Tab::Summary => self.summary.hint(),
            Tab::Kernels => self.kernels.hint(),
            Tab::Timeline => {
                "+/- zoom  ←→ pan  ,/. cursor  n/p step  : go to step  t streams  0 all".to_owned()
            }
            Tab::Stragglers => "s sort  S reverse  ↑↓ select".to_owned(),
            Tab::Memory => "r/R rank".to_owned(),
            Tab::Compare => self.compare.hint(),
        }
    }
}

impl Widget for &App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.width == 0 || area.height == 0 {
            return;
        }
        let (bar, body, status) = layout(area);
        let t = self.theme;
        let mut spans = vec![Span::styled(BRAND, t.title())];
        for tab in self.tabs() {
            let style = if tab == self.tab {
                t.tab_active()
            } else {
                t.dim()
            };
            spans.push(Span::styled(tab.label(), style));
            spans.push(Span::raw(" "));
        }
        if let Some(run) = self.shown_run() {
            spans.push(Span::styled(
                format!(" other tabs show run {run} (b)"),
                t.dim(),
            ));
        }
        Line::from(spans).render(bar, buf);
        let data = &self.data;
        match self.tab {
            Tab::Summary => summary::render(&self.summary, data, t, body, buf),
            Tab::Kernels => kernels::render(&self.kernels, data, t, body, buf),
            Tab::Timeline => timeline::render(&self.timeline, data, t, body, buf),
            Tab::Stragglers => stragglers::render(&self.stragglers, data, t, body, buf),
            Tab::Memory => memory::render(&self.memory, data, t, body, buf),
            Tab::Compare => {
                if let Some(p) = &self.pair {
                    compare::render(&self.compare, p, t, body, buf);
                }
            }
        }
        if status.height > 0 {
            Line::from(vec![
                Span::styled(" ? ", t.key()),
                Span::raw("help  "),
                Span::styled("q ", t.key()),
                Span::raw("quit  │ "),
                Span::styled(self.hint(), t.dim()),
            ])
            .render(status, buf);
        }
        if let Some(scroll) = self.help {
            Help { theme: t, scroll }.render(area, buf);
        }
    }
}
