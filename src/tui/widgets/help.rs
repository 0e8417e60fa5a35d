//! The `?` screen: every key binding, generated from the keymap table.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Widget, Wrap};

use crate::tui::keymap::{Scope, BINDINGS};
use crate::tui::tabs::Tab;
use crate::tui::theme::Theme;

pub(crate) struct Help {
    pub theme: Theme,
    pub scroll: u16,
}

pub(crate) fn lines(theme: Theme) -> Vec<Line<'static>> {
    let mut out = Vec::new();
    let scopes = std::iter::once(Scope::Global).chain(Tab::all().map(Scope::Tab));
    for scope in scopes {
        let entries: Vec<_> = BINDINGS.iter().filter(|b| b.scope == scope).collect();
        if entries.is_empty() {
            continue;
        }
        let title = match scope {
            Scope::Global => "Everywhere".to_owned(),
            Scope::Tab(t) => t.title().to_owned(),
        };
        if !out.is_empty() {
            out.push(Line::raw(""));
        }
        out.push(Line::styled(title, theme.title()));
        for b in entries {
            out.push(Line::from(vec![
                Span::styled(format!("  {:<10}", b.label), theme.key()),
                Span::raw(b.help),
            ]));
        }
    }
    out.push(Line::raw(""));
    out.push(Line::styled("Mouse", theme.title()));
    for (k, what) in [
        (
            "click",
            "tab, table header (sort), row, timeline position (cursor)",
        ),
        ("wheel", "zoom the timeline at the pointer; scroll tables"),
        ("drag", "pan the timeline"),
    ] {
        out.push(Line::from(vec![
            Span::styled(format!("  {k:<10}"), theme.key()),
            Span::raw(what),
        ]));
    }
    out
}

impl Widget for Help {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let w = area.width.min(76);
        let h = area.height.min(lines(self.theme).len() as u16 + 2);
        let popup = Rect::new(
            area.x + (area.width - w) / 2,
            area.y + (area.height - h) / 2,
            w,
            h,
        );
        Clear.render(popup, buf);
        Paragraph::new(lines(self.theme))
            .wrap(Wrap { trim: false })
            .scroll((self.scroll, 0))
            .block(
                Block::default()
                    .borders(Borders::ALL)
                    .title(" Keys (? or Esc closes, j/k scroll) "),
            )
            .render(popup, buf);
    }
}
