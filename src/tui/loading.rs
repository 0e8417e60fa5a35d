//! The screens before the app: loading progress, and a load error.

use std::sync::atomic::Ordering;

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Gauge, Paragraph, Widget, Wrap};

use super::theme::Theme;
use crate::session::load::Progress;

pub(crate) struct Loading<'a> {
    pub source: &'a str,
    pub progress: &'a Progress,
    pub theme: Theme,
}

impl Widget for Loading<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        if area.height == 0 || area.width == 0 {
            return;
        }
        let total = self.progress.files_total.load(Ordering::Relaxed);
        let done = self.progress.files_done.load(Ordering::Relaxed);
        let mb = self.progress.bytes.load(Ordering::Relaxed) as f64 / 1e6;
        let lines = vec![
            Line::styled(
                format!("Loading {}", crate::safe::text(self.source)),
                self.theme.title(),
            ),
            Line::raw(if total > 0 && done == total {
                // Metrics and timeline indexes come after the last file: on
                // large traces, a fifth of the loading time.
                format!(
                    "{total} rank files parsed · {mb:.1} MB read · computing metrics and timeline"
                )
            } else {
                format!("{done} of {total} rank files parsed · {mb:.1} MB read")
            }),
            Line::from(vec![
                Span::styled("q", self.theme.key()),
                Span::raw(" quits"),
            ]),
        ];
        let text_h = 3.min(area.height);
        Paragraph::new(lines).render(Rect::new(area.x, area.y, area.width, text_h), buf);
        if area.height > 4 {
            let ratio = if total > 0 {
                done as f64 / total as f64
            } else {
                0.0
            };
            Gauge::default()
                .ratio(ratio.clamp(0.0, 1.0))
                .gauge_style(self.theme.bar())
                .render(Rect::new(area.x, area.y + 4, area.width, 1), buf);
        }
    }
}

pub struct Failed<'a> {
    pub message: &'a str,
    pub theme: Theme,
}

impl Widget for Failed<'_> {
    fn render(self, area: Rect, buf: &mut Buffer) {
        Paragraph::new(vec![
            Line::styled("Cannot open the trace", self.theme.error()),
            Line::raw(""),
            Line::raw(crate::safe::text(self.message).into_owned()),
            Line::raw(""),
            Line::from(vec![
                Span::styled("q", self.theme.key()),
                Span::raw(" quits (the message is printed again on exit)"),
            ]),
        ])
        .wrap(Wrap { trim: false })
        .render(area, buf);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shown(done: usize, total: usize) -> String {
        let progress = Progress::default();
        progress.files_total.store(total, Ordering::Relaxed);
        progress.files_done.store(done, Ordering::Relaxed);
        progress.bytes.store(12_500_000, Ordering::Relaxed);
        let area = Rect::new(0, 0, 90, 6);
        let mut buf = Buffer::empty(area);
        Loading {
            source: "run/",
            progress: &progress,
            theme: Theme::default(),
        }
        .render(area, &mut buf);
        (0..area.height)
            .map(|y| {
                (0..area.width)
                    .map(|x| buf[(x, y)].symbol())
                    .collect::<String>()
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    #[test]
    fn progress_names_files_then_the_indexing() {
        let s = shown(3, 8);
        assert!(s.contains("3 of 8 rank files parsed · 12.5 MB read"), "{s}");
        let s = shown(8, 8);
        assert!(
            s.contains("8 rank files parsed · 12.5 MB read · computing metrics"),
            "{s}"
        );
    }
}
