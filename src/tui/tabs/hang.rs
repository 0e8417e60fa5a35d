//! Hang tab (with NCCL Flight Recorder dumps): the verdict, then per process
//! group the call not every member completed, who never scheduled it, who
//! waits, where in the code each side is, and each rank's idle time. The
//! same lines `ccl-bench hang` prints, scrolled with ↑/↓, PgUp/PgDn, g/G.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::style::Style;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};

use crate::metrics::hang::analyze;
use crate::report::hang::{lines, Kind};
use crate::tui::action::Action;
use crate::tui::data::Data;
use crate::tui::tabs::{Needs, TabCtx, TabSpec, TabView};
use crate::tui::theme::Theme;
use crate::tui::widgets::fit;

pub(crate) struct HangState {
    lines: Vec<(Kind, String)>,
    /// The first line shown.
    top: usize,
}

impl HangState {
    pub(crate) fn new(data: &Data) -> Self {
        let lines = if data.trace.flight.is_empty() {
            vec![(Kind::Dim, "no Flight Recorder dumps in this run".into())]
        } else {
            lines(&analyze(&data.trace.flight))
        };
        Self { lines, top: 0 }
    }

    fn update(&mut self, action: Action, height: usize) {
        let last = self.lines.len().saturating_sub(height.max(1));
        let page = height.saturating_sub(1).max(1);
        self.top = match action {
            Action::Down => self.top + 1,
            Action::Up => self.top.saturating_sub(1),
            Action::PageDown => self.top + page,
            Action::PageUp => self.top.saturating_sub(page),
            Action::Home => 0,
            Action::End => last,
            _ => self.top,
        }
        .min(last);
    }
}

fn style(kind: Kind, theme: Theme) -> Style {
    match kind {
        Kind::Verdict => theme.title(),
        Kind::Heading => theme.header(),
        Kind::Culprit | Kind::Warning => theme.alert(),
        Kind::Plain => Style::default(),
        Kind::Dim => theme.dim(),
    }
}

pub(crate) const TAB: TabSpec = TabSpec {
    tab: super::Tab::Hang,
    needs: Needs::FlightDumps,
    make: |d| Box::new(HangState::new(d)),
    per_run: true,
};

impl TabView for HangState {
    fn update(&mut self, action: Action, view: &TabCtx) {
        HangState::update(self, action, usize::from(view.area.height));
    }

    fn render(&self, view: &TabCtx, theme: Theme, buf: &mut Buffer) {
        let area: Rect = view.area;
        if area.width == 0 || area.height == 0 {
            return;
        }
        let w = usize::from(area.width);
        let shown: Vec<Line> = self
            .lines
            .iter()
            .skip(self.top)
            .take(usize::from(area.height))
            .map(|(k, s)| Line::styled(fit(s, w), style(*k, theme)))
            .collect();
        Paragraph::new(shown).render(area, buf);
    }

    fn status(&self) -> String {
        format!("line {} of {}", self.top + 1, self.lines.len())
    }
}
