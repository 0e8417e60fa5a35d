//! Memory tab (with CUDA memory snapshots): one rank's allocated and reserved
//! device memory over the allocator history, its peaks, fragmentation at the
//! allocation peak and allocation counts.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Paragraph, Widget};

use crate::model::memory::MemoryTimeline;
use crate::tui::action::Action;
use crate::tui::data::Data;
use crate::tui::tabs::{Needs, TabCtx, TabSpec, TabView};
use crate::tui::theme::{Shade, Theme};
use crate::tui::widgets::fit;

#[derive(Debug, Clone, Default)]
pub(crate) struct MemoryState {
    /// Index into the trace's memory timelines.
    pub index: usize,
}

impl MemoryState {
    pub(crate) fn update(&mut self, action: Action, data: &Data) {
        let n = data.trace.memory.len().max(1);
        match action {
            Action::NextRank | Action::Down => self.index = (self.index + 1) % n,
            Action::PrevRank | Action::Up => self.index = (self.index + n - 1) % n,
            _ => {}
        }
    }
}

const GB: f64 = 1e9;

fn gb(bytes: i64) -> String {
    format!("{:.3} GB", bytes as f64 / GB)
}

pub(crate) fn render(state: &MemoryState, data: &Data, theme: Theme, area: Rect, buf: &mut Buffer) {
    if area.width == 0 || area.height == 0 {
        return;
    }
    let Some(m) = data.trace.memory.get(state.index) else {
        Line::styled("no memory snapshot", theme.dim()).render(area, buf);
        return;
    };
    let head = header(m, (state.index, data.trace.memory.len()), theme, area.width);
    let head_h = (head.len() as u16).min(area.height);
    Paragraph::new(head).render(Rect::new(area.x, area.y, area.width, head_h), buf);
    let chart_area = Rect::new(area.x, area.y + head_h, area.width, area.height - head_h);
    if chart_area.height < 4 || chart_area.width < 20 {
        return;
    }
    let [allocated, reserved] = &data.memory[state.index];
    let x_max = allocated.last().map_or(1.0, |p| p.0).max(1e-3);
    let y_max = reserved
        .iter()
        .chain(allocated)
        .map(|p| p.1)
        .fold(0.0, f64::max)
        .max(1e-9)
        * 1.05;
    let label = |v: f64, unit: &str| Span::raw(format!("{v:.2}{unit}"));
    Chart::new(vec![
        Dataset::default()
            .name("reserved")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.shade(Shade::Memory))
            .data(reserved),
        Dataset::default()
            .name("allocated")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.shade(Shade::Compute))
            .data(allocated),
    ])
    .x_axis(
        Axis::default()
            .title("ms since the first allocator event")
            .style(theme.dim())
            .bounds([0.0, x_max])
            .labels(vec![
                label(0.0, ""),
                label(x_max / 2.0, ""),
                label(x_max, " ms"),
            ]),
    )
    .y_axis(
        Axis::default()
            .title("GB")
            .style(theme.dim())
            .bounds([0.0, y_max])
            .labels(vec![
                label(0.0, ""),
                label(y_max / 2.0, ""),
                label(y_max, ""),
            ]),
    )
    .render(chart_area, buf);
}

/// `which`: (index, count) of this rank's snapshot among the trace's.
fn header(
    m: &MemoryTimeline,
    which: (usize, usize),
    theme: Theme,
    width: u16,
) -> Vec<Line<'static>> {
    let w = usize::from(width);
    let mut out = vec![Line::from(vec![
        Span::styled(format!("Rank {} ", m.rank), theme.title()),
        Span::styled(
            fit(
                &format!(
                    "({} of {} with snapshots, r/R) {}",
                    which.0 + 1,
                    which.1,
                    m.source.display()
                ),
                w.saturating_sub(8),
            ),
            theme.dim(),
        ),
    ])];
    let peak = m.peak_allocated();
    let mut facts = Vec::new();
    if let Some(p) = peak {
        let frag = if p.reserved > 0 {
            format!(
                " ({:.1} % of the reservation unusable then)",
                (1.0 - p.allocated as f64 / p.reserved as f64) * 100.0
            )
        } else {
            String::new()
        };
        let t0 = m.samples.first().map_or(0, |s| s.time_us);
        facts.push(format!(
            "peak allocated {} at {:.1} ms, reserved {} then{frag}",
            gb(p.allocated),
            (p.time_us - t0) as f64 / 1e3,
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
    make: |_| Box::new(MemoryState::default()),
    per_run: true,
};

impl TabView for MemoryState {
    fn update(&mut self, action: Action, view: &TabCtx) {
        MemoryState::update(self, action, view.data);
    }

    fn render(&self, view: &TabCtx, theme: Theme, buf: &mut Buffer) {
        render(self, view.data, theme, view.area, buf);
    }
}
