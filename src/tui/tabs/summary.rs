//! Summary tab: answers "where did the time go?" first. The run in two lines,
//! the headline verdicts, a per-step time budget per rank that sums to the
//! step, then the metrics that apply, by family (`a` unfolds the others).
//! A metric row is selectable; the panel at the bottom gives its full meaning
//! and terms at any width.

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Paragraph, Widget, Wrap};

use crate::derive::RankRow;
use crate::human;
use crate::metrics::pace::Pace;
use crate::metrics::{Group, Metric, Outcome};
use crate::model::time::human;
use crate::model::warning::Kind;
use crate::model::Ns;
use crate::tui::action::Action;
use crate::tui::data::Data;
use crate::tui::tabs::{Needs, TabCtx, TabSpec, TabView};
use crate::tui::theme::{Shade, Theme};
use crate::tui::widgets::fit;
use crate::tui::widgets::table::moved;

#[derive(Debug, Default, Clone)]
pub(crate) struct SummaryState {
    pub scroll: u16,
    /// Index into the metric rows shown (see [`shown`]).
    pub selected: usize,
    /// Show the metrics that do not apply instead of folding them.
    pub show_na: bool,
}

/// Height of the panel that explains the selected metric.
const DETAIL: u16 = 4;
/// Rank rows in the budget before the rest is left to the Stragglers tab.
const BUDGET_RANKS: usize = 8;

impl SummaryState {
    pub(crate) fn update(&mut self, action: Action, data: &Data, area: Rect) {
        let n = shown(data, self.show_na).len();
        let page = usize::from(area.height.saturating_sub(DETAIL).max(1));
        let last = n.saturating_sub(1);
        let was_last = self.selected == last;
        if let Some(to) = moved(self.selected, &action, page, last) {
            self.selected = to;
            if action == Action::Home {
                self.scroll = 0;
                return;
            }
        } else if action == Action::ToggleNotApplicable {
            // Keep the same metric selected across the fold.
            let metric = shown(data, self.show_na).get(self.selected).copied();
            self.show_na = !self.show_na;
            self.selected = metric
                .and_then(|m| shown(data, self.show_na).iter().position(|&i| i == m))
                .unwrap_or(0);
        } else {
            return;
        }
        // Keep the selected row on screen.
        let (text, rows) = lines(data, Theme::mono(), area.width, self);
        let body = body_height(area);
        if let Some(&line) = rows.get(self.selected) {
            let line = line as u16;
            if line < self.scroll {
                self.scroll = line;
            } else if line >= self.scroll + body {
                self.scroll = line + 1 - body;
            }
        }
        // Below the last metric are the warnings and the inputs: End shows
        // them, and moving on past the last metric scrolls to them.
        let bottom = u16::try_from(text.len())
            .unwrap_or(u16::MAX)
            .saturating_sub(body);
        let further = match action {
            Action::End => Some(bottom),
            Action::Down | Action::ScrollDown { .. } if was_last => Some(self.scroll + 1),
            Action::PageDown if was_last => Some(self.scroll.saturating_add(body)),
            _ => None,
        };
        if let Some(to) = further {
            self.scroll = to.min(bottom).max(self.scroll);
        }
    }
}

fn body_height(area: Rect) -> u16 {
    if area.height > 3 * DETAIL {
        area.height - DETAIL
    } else {
        area.height
    }
}

pub(crate) fn render(
    state: &SummaryState,
    data: &Data,
    theme: Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    let (text, _) = lines(data, theme, area.width, state);
    let body = body_height(area);
    Paragraph::new(text)
        .scroll((state.scroll, 0))
        .render(Rect::new(area.x, area.y, area.width, body), buf);
    if body < area.height {
        let panel = Rect::new(area.x, area.y + body, area.width, area.height - body);
        Paragraph::new(detail(data, state, theme, area.width))
            .wrap(Wrap { trim: true })
            .render(panel, buf);
    }
}

/// Indexes into `data.summary` of the metric rows shown, in display order.
fn shown(data: &Data, show_na: bool) -> Vec<usize> {
    Group::ALL
        .iter()
        .flat_map(|&g| {
            data.summary
                .iter()
                .enumerate()
                .filter(move |(_, (m, o))| {
                    m.group == g && (show_na || matches!(o, Outcome::Value(_)))
                })
                .map(|(i, _)| i)
        })
        .collect()
}

/// The selected metric in full: name, unit, value, meaning, terms, note.
fn detail(data: &Data, state: &SummaryState, theme: Theme, width: u16) -> Vec<Line<'static>> {
    let rule = Line::styled("─".repeat(usize::from(width)), theme.dim());
    let Some(&i) = shown(data, state.show_na).get(state.selected) else {
        return vec![rule];
    };
    let (m, outcome) = &data.summary[i];
    let mut spans = vec![Span::styled(format!("{} ", m.name), theme.key())];
    match outcome {
        Outcome::Value(v) => {
            let (value, unit) = value_text(m, v.value);
            spans.push(Span::raw(format!("= {value} {unit}  ")));
            let mut text = m.about.to_owned();
            if let Some(f) = &v.fraction {
                text = format!("{f}. {text}");
            }
            if let Some(note) = &v.note {
                text = format!("{text}. {note}");
            }
            spans.push(Span::styled(text, theme.dim()));
        }
        Outcome::NotApplicable(why) => {
            spans.push(Span::styled(format!("n/a: {why}. "), theme.alert()));
            spans.push(Span::styled(m.about.to_owned(), theme.dim()));
        }
    }
    vec![rule, Line::from(spans)]
}

/// A value in the unit a person reads (see `Unit::people`), and the unit
/// column's text: empty where the value carries its own unit.
fn value_text(m: &Metric, v: f64) -> (String, &'static str) {
    (m.unit.people(v), m.unit.people_unit())
}

/// The lines of the tab, and the line index of each metric row shown.
fn lines(
    data: &Data,
    theme: Theme,
    width: u16,
    state: &SummaryState,
) -> (Vec<Line<'static>>, Vec<usize>) {
    let width = usize::from(width);
    let mut out = Vec::new();
    run_header(data, theme, width, &mut out);
    verdicts(data, theme, width, &mut out);
    budget(data, theme, width, &mut out);
    let rows = metric_rows(data, theme, width, state, &mut out);
    (out, rows)
}

fn run_header(data: &Data, theme: Theme, width: usize, out: &mut Vec<Line<'static>>) {
    let t = &data.trace;
    // Without timelines, what was read instead: snapshots, execution traces.
    let what = if t.ranks.is_empty() {
        let mut parts = vec!["no device timeline".to_owned()];
        if !t.memory.is_empty() {
            parts.push(human::plural(
                t.memory.len(),
                "memory snapshot",
                "memory snapshots",
            ));
        }
        if !t.et.is_empty() {
            parts.push(human::plural(
                t.et.len(),
                "execution trace",
                "execution traces",
            ));
        }
        parts.join(" · ")
    } else {
        format!(
            "{} · {}",
            human::plural(t.ranks.len(), "rank", "ranks"),
            human::plural(data.events as usize, "event", "events"),
        )
    };
    let mut run = format!(
        "{} · {what} · {} · {}",
        t.source.display(),
        human::plural(data.files, "file", "files"),
        human::bytes(data.bytes)
    );
    if let Some(i) = t.iteration {
        run += &format!(" · iteration {i}");
    }
    if let Some(card) = &t.card {
        if let Some((_, model)) = card.describe().into_iter().next() {
            run += &format!(" · {model}");
        }
    }
    out.push(Line::from(vec![
        Span::styled("Run ", theme.title()),
        Span::raw(fit(&run, width.saturating_sub(4))),
    ]));
    let ranks: Vec<&crate::model::RankTimeline> = t.ranks.iter().collect();
    if !ranks.is_empty() {
        out.push(Line::styled(
            fit(
                &format!(
                    "    per-step values use: {}",
                    crate::model::timeline::steps_used(&ranks)
                ),
                width,
            ),
            theme.dim(),
        ));
    }
    match data.warnings.len() {
        0 => {}
        1 => out.push(Line::styled(
            fit(&format!("    warning: {}", data.warnings[0]), width),
            theme.alert(),
        )),
        n => out.push(Line::styled(
            fit(
                &format!(
                    "    {n} warnings (all of them under the metrics, end of this tab): {}",
                    data.warnings[0]
                ),
                width,
            ),
            theme.alert(),
        )),
    }
}

const BUDGET: [&str; 5] = ["compute", "overlap", "exp. comm", "copies", "idle"];
/// Width of a budget column.
const COL: usize = 10;
const BUDGET_GLYPHS: [char; 5] = ['█', '▓', '░', '▪', '·'];
/// The Timeline's colours for the same kinds.
const BUDGET_SHADES: [Shade; 5] = [
    Shade::Compute,
    Shade::Overlap,
    Shade::Comm,
    Shade::Memory,
    Shade::Idle,
];

/// Where each rank's step went, summing to the step (device side).
fn budget(data: &Data, theme: Theme, width: usize, out: &mut Vec<Line<'static>>) {
    let rows = &data.ranks;
    if rows.is_empty() || rows.iter().all(|r| r.span == Ns::ZERO) {
        return;
    }
    out.push(Line::raw(""));
    out.push(Line::from(vec![
        Span::styled("Where the time went ", theme.title()),
        Span::styled(
            fit(
                "per step, device side: compute only │ compute overlapped with communication │ \
                 exposed communication (waiting: for a late rank) │ copies under neither │ idle",
                width.saturating_sub(20),
            ),
            theme.dim(),
        ),
    ]));
    let mut head = format!("{:<6}{:>9}", "rank", "dev step");
    for label in BUDGET {
        head += &format!("{label:>COL$}");
    }
    head += &format!("{:>COL$}  ", "waiting");
    out.push(Line::styled(fit(&head, width), theme.header()));
    let bar_w = width.saturating_sub(head.chars().count());
    let mean = crate::report::overview::mean_row(rows);
    out.push(budget_line("mean", &mean, bar_w, width, theme, false));
    out.push(budget_line("share", &mean, bar_w, width, theme, true));
    if rows.len() > 1 {
        for r in rows.iter().take(BUDGET_RANKS) {
            out.push(budget_line(
                &r.rank.to_string(),
                r,
                bar_w,
                width,
                theme,
                false,
            ));
        }
        if rows.len() > BUDGET_RANKS {
            out.push(Line::styled(
                format!(
                    "      … {} more ranks on the Stragglers tab (4)",
                    rows.len() - BUDGET_RANKS
                ),
                theme.dim(),
            ));
        }
    }
}

fn budget_line(
    label: &str,
    r: &RankRow,
    bar_w: usize,
    width: usize,
    theme: Theme,
    shares: bool,
) -> Line<'static> {
    let parts = r.budget();
    let pct = |v: Ns| {
        if r.span > Ns::ZERO {
            v.as_f64() / r.span.as_f64() * 100.0
        } else {
            0.0
        }
    };
    let cell = |v: Ns| {
        if shares {
            format!("{:.1} %", pct(v))
        } else {
            human(v)
        }
    };
    let mut text = format!("{label:<6}{:>9}", cell(r.span));
    for v in parts {
        text += &format!("{:>COL$}", cell(v));
    }
    text += &format!("{:>COL$}  ", cell(r.waiting));
    // The bar: each part's share of the step, in its glyph (the share row
    // carries the legend instead).
    if shares {
        let mut spans = vec![Span::styled(fit(&text, width), theme.key())];
        for ((l, g), shade) in BUDGET.iter().zip(BUDGET_GLYPHS).zip(BUDGET_SHADES) {
            spans.push(Span::styled(g.to_string(), theme.shade(shade)));
            spans.push(Span::styled(format!(" {l}  "), theme.dim()));
        }
        return Line::from(spans);
    }
    let mut spans = vec![Span::raw(fit(&text, width))];
    let (mut used, mut drawn) = (0.0, 0usize);
    for ((v, g), shade) in parts.iter().zip(BUDGET_GLYPHS).zip(BUDGET_SHADES) {
        used += pct(*v) / 100.0 * bar_w as f64;
        let upto = (used.round() as usize).min(bar_w);
        if upto > drawn {
            spans.push(Span::styled(
                g.to_string().repeat(upto - drawn),
                theme.shade(shade),
            ));
            drawn = upto;
        }
    }
    Line::from(spans)
}

/// The headline verdicts: step time, communication share, overlap,
/// utilization, straggler.
fn verdicts(data: &Data, theme: Theme, width: usize, out: &mut Vec<Line<'static>>) {
    let get = |name: &str| data.summary.iter().find(|(m, _)| m.name == name);
    // The value as a person reads it, or why there is none.
    let value = |name: &str| -> Result<String, String> {
        match get(name) {
            Some((m, Outcome::Value(v))) => {
                let (value, unit) = value_text(m, v.value);
                Ok(format!(
                    "{value}{}{unit}",
                    if unit.is_empty() { "" } else { " " }
                ))
            }
            Some((_, Outcome::NotApplicable(why))) => Err(why.to_string()),
            None => Err("not computed".into()),
        }
    };
    out.push(Line::raw(""));
    out.push(Line::styled("Verdicts", theme.title()));
    let xpu = data.trace.accelerator();
    let comm = match (
        value("communication_fraction"),
        value("exposed_comm_time_s"),
    ) {
        (Ok(share), Ok(exposed)) => format!("{share} of {xpu} time; {exposed} exposed per step"),
        (Ok(share), Err(_)) => format!("{share} of {xpu} time"),
        (Err(why), _) => format!("n/a: {why}"),
    };
    // Waiting for late ranks is communication time spent on nothing: say
    // how much of it that is.
    let comm = match value("comm_wait_fraction") {
        Ok(wait) if !comm.starts_with("n/a") => {
            format!("{comm}; {wait} of it waiting for late ranks")
        }
        _ => comm,
    };
    let items = [
        ("step time", step_time(data, &value)),
        ("communication", comm),
        (
            "overlap",
            value("compute_comm_overlap")
                .map(|v| format!("{v} of communication hidden under compute"))
                .unwrap_or_else(|why| format!("n/a: {why}")),
        ),
        (
            "utilization",
            match value("aggregate_gpu_utilization") {
                Ok(v) => utilization(data, v),
                Err(why) => format!("n/a: {why}"),
            },
        ),
        (
            "straggler",
            match data.trace.ranks.is_empty() {
                true => "n/a: no device timeline".to_owned(),
                false => data.verdict.sentence(),
            },
        ),
    ];
    let classes = unclassified(data).map(|v| ("classes", v));
    for (k, v) in items.into_iter().chain(classes) {
        out.push(Line::from(vec![
            Span::styled(format!("  {k:<14}"), theme.key()),
            Span::raw(fit(&v, width.saturating_sub(16))),
        ]));
        // A warning that puts this verdict in doubt is said under it, not
        // only at the end of the tab: a file read in part doubts every
        // figure (said under the first), missing or guessed ranks the
        // straggler.
        let doubt = match k {
            "step time" => Some(Kind::Damaged),
            "straggler" => Some(Kind::Ranks),
            _ => None,
        };
        let said: Vec<&str> = (data.warnings.iter())
            .filter(|w| Some(w.kind) == doubt)
            .map(|w| w.text.as_str())
            .collect();
        if let Some(first) = said.first() {
            let more = match said.len() {
                1 => String::new(),
                n => format!("1 of {n} (End lists them): "),
            };
            let whom = match doubt {
                Some(Kind::Damaged) => "every figure: ",
                _ => "",
            };
            out.push(Line::styled(
                fit(&format!("{:16}⚠ {more}{whom}{first}", ""), width),
                theme.alert(),
            ));
        }
    }
}

/// The step the run sustains and which side sets its pace: the device's
/// step when the device lags and the CPU runs ahead, the CPU's otherwise.
fn step_time(data: &Data, value: &dyn Fn(&str) -> Result<String, String>) -> String {
    let xpu = data.trace.accelerator();
    let Ok(step) = value("iteration_time_s") else {
        return value("avg_step_time").unwrap_or_else(|why| format!("n/a: {why}"));
    };
    match Pace::of(&data.ranks) {
        Some(p @ (Pace::DeviceBound { .. } | Pace::HostBound { .. })) => {
            format!("{step} · {}", p.sentence(xpu))
        }
        _ => step,
    }
}

/// Above this share of device time in unrecognised kernels, the Summary says
/// so: the class metrics (communication first) are then missing something.
const UNCLASSIFIED_SAYS: f64 = 10.0;

/// "unclassified: 31 % of device time (most: …)", when that share is large.
fn unclassified(data: &Data) -> Option<String> {
    let (_, Outcome::Value(m)) = data
        .summary
        .iter()
        .find(|(m, _)| m.name == "unclassified_fraction")?
    else {
        return None;
    };
    if m.value < UNCLASSIFIED_SAYS {
        return None;
    }
    let most = m
        .note
        .as_deref()
        .and_then(|n| n.strip_prefix("most time unclassified: "))
        .map(|n| format!(", most in {}", crate::model::classify::bare_name(n)))
        .unwrap_or_default();
    Some(format!(
        "unclassified: {:.0} % of device time{most}; add a rule with --classes FILE (see --list-classes)",
        m.value
    ))
}

/// Device busy share of the step (the budget's terms), and of the whole
/// device window (`aggregate_gpu_utilization`), which includes the time
/// between steps.
fn utilization(data: &Data, window: String) -> String {
    let mean = crate::report::overview::mean_row(&data.ranks);
    let xpu = data.trace.accelerator();
    if mean.span <= Ns::ZERO {
        return format!("{xpu} busy {window} of its window");
    }
    format!(
        "{xpu} busy {:.1} % of the step; {window} of the whole device window",
        mean.busy.as_f64() / mean.span.as_f64() * 100.0
    )
}

/// The metric families; returns the line index of each metric row.
fn metric_rows(
    data: &Data,
    theme: Theme,
    width: usize,
    state: &SummaryState,
    out: &mut Vec<Line<'static>>,
) -> Vec<usize> {
    let name_w = data
        .summary
        .iter()
        .map(|(m, _)| m.name.len())
        .max()
        .unwrap_or(0);
    let mut rows = Vec::new();
    let selected = shown(data, state.show_na).get(state.selected).copied();
    for group in Group::ALL {
        let metrics: Vec<(usize, &(&Metric, Outcome))> = data
            .summary
            .iter()
            .enumerate()
            .filter(|(_, (m, _))| m.group == group)
            .collect();
        if metrics.is_empty() {
            continue;
        }
        out.push(Line::raw(""));
        out.push(Line::styled(capitalize(group.name()), theme.title()));
        let mut folded = 0;
        for (i, (m, outcome)) in metrics {
            if !state.show_na && matches!(outcome, Outcome::NotApplicable(_)) {
                folded += 1;
                continue;
            }
            rows.push(out.len());
            let name = format!("  {:<name_w$}  ", m.name);
            let room = width.saturating_sub(name.chars().count() + 24);
            let mut line = match outcome {
                Outcome::Value(v) => {
                    // A share shows its terms, else the note, else the meaning.
                    let about = v
                        .fraction
                        .as_deref()
                        .or(v.note.as_deref())
                        .unwrap_or(m.about);
                    let (value, unit) = value_text(m, v.value);
                    Line::from(vec![
                        Span::styled(name, theme.key()),
                        Span::raw(format!("{value:>12} {unit:<10} ")),
                        Span::styled(fit(about, room), theme.dim()),
                    ])
                }
                Outcome::NotApplicable(why) => Line::from(vec![
                    Span::styled(name, theme.dim()),
                    Span::styled(format!("{:>12} {:<10} ", "n/a", ""), theme.dim()),
                    Span::styled(fit(why, room), theme.dim()),
                ]),
            };
            if Some(i) == selected {
                line = line.style(theme.selected());
            }
            out.push(line);
        }
        if folded > 0 {
            out.push(Line::styled(
                format!(
                    "  {} not applicable to this trace (a shows them)",
                    human::plural(folded, "metric", "metrics")
                ),
                theme.dim(),
            ));
        }
    }
    if data.warnings.len() > 1 {
        out.push(Line::raw(""));
        out.push(Line::styled("Warnings", theme.title()));
        for w in &data.warnings {
            out.push(Line::styled(fit(&format!("  {w}"), width), theme.alert()));
        }
    }
    out.push(Line::raw(""));
    out.push(Line::styled(
        fit(
            &format!(
                "Inputs: {} (ccl-bench --inputs DIR lists them)",
                inputs_by_kind(data)
            ),
            width,
        ),
        theme.dim(),
    ));
    for n in &data.notes {
        out.push(Line::styled(fit(&format!("  {n}"), width), theme.dim()));
    }
    rows
}

/// "8 × PyTorch profiler trace, 1 × workload card".
fn inputs_by_kind(data: &Data) -> String {
    let mut kinds: Vec<(&str, usize)> = Vec::new();
    for i in &data.inputs {
        let kind = i.split(':').next().unwrap_or("");
        let kind = kind.split(" rank ").next().unwrap_or(kind);
        match kinds.iter_mut().find(|(k, _)| *k == kind) {
            Some((_, n)) => *n += 1,
            None => kinds.push((kind, 1)),
        }
    }
    kinds
        .iter()
        .map(|(k, n)| format!("{n} × {k}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn capitalize(s: &str) -> String {
    let mut c = s.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

pub(crate) const TAB: TabSpec = TabSpec {
    tab: super::Tab::Summary,
    needs: Needs::Nothing,
    make: |_| Box::new(SummaryState::default()),
    per_run: true,
};

impl TabView for SummaryState {
    fn update(&mut self, action: Action, view: &TabCtx) {
        SummaryState::update(self, action, view.data, view.area);
    }

    fn render(&self, view: &TabCtx, theme: Theme, buf: &mut Buffer) {
        render(self, view.data, theme, view.area, buf);
    }

    fn status(&self) -> String {
        "↑↓ a metric's meaning".to_owned()
    }
}
