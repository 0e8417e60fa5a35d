//! Summary tab: the run (source, ranks, workload card, load warnings) and every
//! metric grouped by family; metrics that do not apply are dimmed with the reason.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget};

use crate::metrics::{Group, Outcome, Unit};
use crate::model::time::human;
use crate::report::human;
use crate::tui::action::Action;
use crate::tui::data::Data;
use crate::tui::theme::Theme;
use crate::tui::widgets::fit;

#[derive(Debug, Default, Clone)]
pub struct SummaryState {
    pub scroll: u16,
}

impl SummaryState {
    pub fn update(&mut self, action: Action, data: &Data, area: Rect) {
        let total = lines(data, Theme::mono(), area.width).len() as u16;
        let max = total.saturating_sub(area.height);
        let page = area.height.max(1);
        self.scroll = match action {
            Action::Up | Action::ScrollUp { .. } => self.scroll.saturating_sub(1),
            Action::Down | Action::ScrollDown { .. } => self.scroll + 1,
            Action::PageUp => self.scroll.saturating_sub(page),
            Action::PageDown => self.scroll + page,
            Action::Home => 0,
            Action::End => max,
            _ => self.scroll,
        }
        .min(max);
    }
}

pub fn render(state: &SummaryState, data: &Data, theme: Theme, area: Rect, buf: &mut Buffer) {
    Paragraph::new(lines(data, theme, area.width))
        .scroll((state.scroll, 0))
        .render(area, buf);
}

fn lines(data: &Data, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let width = usize::from(width);
    let mut out = Vec::new();
    let t = &data.trace;
    out.push(Line::styled("Run", theme.title()));
    let mut run = format!(
        "{} · {} · {} · {} · {}",
        t.source.display(),
        human::plural(t.ranks.len(), "rank", "ranks"),
        human::plural(data.events as usize, "event", "events"),
        human::plural(data.files, "file", "files"),
        human::bytes(data.bytes)
    );
    if let Some(i) = t.iteration {
        run += &format!(" · iteration {i}");
    }
    out.push(Line::raw(fit(&format!("  {run}"), width)));
    let ranks: Vec<&crate::model::RankTimeline> = t.ranks.iter().collect();
    out.push(Line::styled(
        fit(
            &format!(
                "  per-step values use: {}",
                crate::model::timeline::steps_used(&ranks)
            ),
            width,
        ),
        theme.dim(),
    ));
    if let Some(card) = &t.card {
        for (k, v) in card.describe() {
            out.push(Line::from(vec![
                Span::styled(format!("  {k:<12}"), theme.dim()),
                Span::raw(fit(&v, width.saturating_sub(14))),
            ]));
        }
    } else {
        out.push(Line::styled(
            "  no workload card (*.yaml) beside the traces",
            theme.dim(),
        ));
    }
    for w in &data.warnings {
        out.push(Line::styled(
            fit(&format!("  warning: {w}"), width),
            theme.alert(),
        ));
    }
    // Inputs: the list when it is short, else a count by kind.
    const LISTED: usize = 6;
    if data.inputs.len() <= LISTED {
        for i in &data.inputs {
            out.push(Line::styled(fit(&format!("  {i}"), width), theme.dim()));
        }
    } else {
        let mut kinds: Vec<(&str, usize)> = Vec::new();
        for i in &data.inputs {
            let kind = i.split([':']).next().unwrap_or("");
            let kind = kind.split(" rank ").next().unwrap_or(kind);
            match kinds.iter_mut().find(|(k, _)| *k == kind) {
                Some((_, n)) => *n += 1,
                None => kinds.push((kind, 1)),
            }
        }
        let list: Vec<String> = kinds.iter().map(|(k, n)| format!("{n} × {k}")).collect();
        out.push(Line::styled(
            fit(
                &format!("  inputs: {} (--inputs lists them)", list.join(", ")),
                width,
            ),
            theme.dim(),
        ));
    }
    let name_w = data
        .summary
        .iter()
        .map(|(m, _)| m.name.len())
        .max()
        .unwrap_or(0);
    for group in Group::ALL {
        let metrics: Vec<_> = data
            .summary
            .iter()
            .filter(|(m, _)| m.group == group)
            .collect();
        if metrics.is_empty() {
            continue;
        }
        out.push(Line::raw(""));
        out.push(Line::styled(capitalize(group.name()), theme.title()));
        for (m, outcome) in metrics {
            let name = format!("  {:<name_w$}  ", m.name);
            let room = width.saturating_sub(name.chars().count() + 20);
            out.push(match outcome {
                Outcome::Value(v) => {
                    let mut about = m.about.to_owned();
                    if let Some(note) = &v.note {
                        about = format!("{note}; {about}");
                    }
                    // A share shows its terms first, so it can be checked at a glance.
                    if let Some(f) = &v.fraction {
                        about = format!("{f}; {about}");
                    }
                    // Seconds read better as 29.3 ms than 0.029257 s.
                    let (value, unit) = match m.unit {
                        Unit::Seconds => (human((v.value * 1e9).round() as i64), ""),
                        u => (u.human(v.value), u.symbol()),
                    };
                    Line::from(vec![
                        Span::styled(name, theme.key()),
                        Span::raw(format!("{value:>12} {unit:<10} ")),
                        Span::styled(fit(&about, room), theme.dim()),
                    ])
                }
                Outcome::NotApplicable(why) => Line::from(vec![
                    Span::styled(name, theme.dim()),
                    Span::styled(format!("{:>12} {:<10} ", "n/a", ""), theme.dim()),
                    Span::styled(fit(why, room), theme.dim()),
                ]),
            });
        }
    }
    out
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}
