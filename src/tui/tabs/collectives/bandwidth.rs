//! Transfer time against message size, per collective kind and group role:
//! the instances of one series as points, its Hockney fit (transfer = α +
//! β·S, the `hockney_*_by_role` metrics' fit) as a line, and the instances
//! the fit does not explain marked (Enter opens the worst on the Timeline).

use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::symbols::Marker;
use ratatui::text::{Line, Span};
use ratatui::widgets::{Axis, Chart, Dataset, GraphType, Widget};

use crate::derive::fit::Line as Fit;
use crate::derive::instances::{fits, InstanceRow, Rows};
use crate::model::time::{human, Ns};
use crate::model::CollKind;
use crate::tui::theme::Theme;

/// One series: a collective kind in the groups of one role and size.
pub(crate) type Key = (CollKind, String, usize);

/// An instance more than this many rms residuals off its series' fit is
/// one the fit does not explain.
const OUTLIER_RMS: f64 = 3.0;

/// The series with sized, timed instances, most instances first.
pub(crate) fn series(rows: &Rows) -> Vec<(Key, usize)> {
    let mut by: std::collections::BTreeMap<Key, usize> = Default::default();
    for r in (0..rows.len()).map(|i| rows.get(i)) {
        if let Some(k) = key(&r) {
            *by.entry(k).or_default() += 1;
        }
    }
    let mut out: Vec<(Key, usize)> = by.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

fn key(r: &InstanceRow) -> Option<Key> {
    match (r.kind, r.data_bytes, r.transfer > Ns::ZERO) {
        (Some(kind), Some(_), true) => Some((kind, r.label(), r.size as usize)),
        _ => None,
    }
}

/// The instances of one series, its fit and the ones far off it.
#[derive(Debug, Clone)]
pub(crate) struct Plot {
    pub key: Key,
    /// (row index, S bytes, transfer).
    pub points: Vec<(usize, u64, Ns)>,
    /// `None` with fewer than two distinct sizes.
    pub fit: Option<Fit>,
    /// Row indexes of the points beyond `OUTLIER_RMS` residuals, the worst
    /// first.
    pub outliers: Vec<usize>,
}

impl Plot {
    pub(crate) fn of(rows: &Rows, key: &Key) -> Self {
        let mine: Vec<usize> = (0..rows.len())
            .filter(|&i| key_of(rows, i).as_ref() == Some(key))
            .collect();
        let points: Vec<(usize, u64, Ns)> = mine
            .iter()
            .map(|&i| {
                let r = rows.get(i);
                (i, r.data_bytes.unwrap_or(0), r.transfer)
            })
            .collect();
        let fit = fits(mine.iter().map(|&i| rows.get(i)))
            .into_iter()
            .next()
            .map(|f| f.line);
        let mut off: Vec<(f64, usize)> = match fit {
            Some(f) if f.residual > 0.0 => points
                .iter()
                .map(|&(i, s, t)| ((t.as_f64() / 1e9 - f.alpha - f.beta * s as f64).abs(), i))
                .filter(|&(d, _)| d > OUTLIER_RMS * f.residual)
                .collect(),
            _ => Vec::new(),
        };
        off.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
        Self {
            key: key.clone(),
            points,
            fit,
            outliers: off.into_iter().map(|(_, i)| i).collect(),
        }
    }

    /// How many distinct sizes the series has.
    fn sizes(&self) -> usize {
        let mut s: Vec<u64> = self.points.iter().map(|p| p.1).collect();
        s.sort_unstable();
        s.dedup();
        s.len()
    }
}

fn key_of(rows: &Rows, i: usize) -> Option<Key> {
    key(&rows.get(i))
}

/// The series' name as the metrics' parts give it (`all_reduce dp n8`).
pub(crate) fn name(k: &Key) -> String {
    format!("{} {} n{}", k.0.name(), k.1, k.2)
}

/// Draws `plot` (series `at` of `count`) into `area`.
pub(crate) fn render(
    plot: &Plot,
    at: usize,
    count: usize,
    theme: Theme,
    area: Rect,
    buf: &mut Buffer,
) {
    if area.height < 3 {
        return;
    }
    let head = format!(
        "Transfer time × message size · {} (series {} of {count}, ↑↓ another) · {} · {}",
        name(&plot.key),
        at + 1,
        crate::human::plural(plot.points.len(), "instance", "instances"),
        crate::human::plural(plot.sizes(), "size", "sizes")
    );
    Line::styled(head, theme.title()).render(Rect::new(area.x, area.y, area.width, 1), buf);
    let fit = match plot.fit {
        Some(f) => format!(
            "Hockney fit t = α + β·S: α {} · 1/β {} · rms {} · {} beyond {OUTLIER_RMS} rms (!){} · v: back to the table",
            human(Ns((f.alpha * 1e9).round() as i64)),
            if f.beta > 0.0 {
                format!("{:.1} GB/s", 1.0 / f.beta / 1e9)
            } else {
                "n/a (time does not grow with size)".into()
            },
            human(Ns((f.residual * 1e9).round() as i64)),
            plot.outliers.len(),
            if plot.outliers.is_empty() { "" } else { ", Enter opens the worst" },
        ),
        None => "no fit: it needs two or more distinct sizes · v: back to the table".into(),
    };
    Line::styled(fit, theme.dim()).render(Rect::new(area.x, area.y + 1, area.width, 1), buf);
    // Sizes and times span decades: both axes are log10.
    let log = |v: f64| v.max(1.0).log10();
    let outlier: std::collections::HashSet<usize> = plot.outliers.iter().copied().collect();
    let (mut fine, mut off) = (Vec::new(), Vec::new());
    for &(i, s, t) in &plot.points {
        let p = (log(s as f64), log(t.as_f64()));
        if outlier.contains(&i) {
            off.push(p);
        } else {
            fine.push(p);
        }
    }
    let xs = plot.points.iter().map(|p| log(p.1 as f64));
    let ys = plot.points.iter().map(|p| log(p.2.as_f64()));
    let bounds = |v: Vec<f64>| {
        let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if lo.is_finite() && hi.is_finite() {
            [lo - 0.1, hi + 0.1]
        } else {
            [0.0, 1.0]
        }
    };
    let (xb, yb) = (bounds(xs.collect()), bounds(ys.collect()));
    // The fit as a curve in log space: t = α + β·S at 64 sizes.
    let line: Vec<(f64, f64)> = plot
        .fit
        .map(|f| {
            (0..64)
                .map(|k| xb[0] + (xb[1] - xb[0]) * f64::from(k) / 63.0)
                .filter_map(|x| {
                    let t = (f.alpha + f.beta * 10f64.powf(x)) * 1e9;
                    (t > 0.0).then(|| (x, log(t)))
                })
                .filter(|&(_, y)| y >= yb[0] && y <= yb[1])
                .collect()
        })
        .unwrap_or_default();
    let bytes = |x: f64| Span::raw(crate::human::bytes(10f64.powf(x) as u64));
    let time = |y: f64| Span::raw(human(Ns(10f64.powf(y) as i64)));
    Chart::new(vec![
        Dataset::default()
            .name("Hockney fit")
            .marker(Marker::Braille)
            .graph_type(GraphType::Line)
            .style(theme.key())
            .data(&line),
        Dataset::default()
            .name("instances")
            .marker(Marker::Braille)
            .graph_type(GraphType::Scatter)
            .style(theme.bar())
            .data(&fine),
        Dataset::default()
            .name("beyond 3 rms")
            .marker(Marker::Dot)
            .graph_type(GraphType::Scatter)
            .style(theme.alert())
            .data(&off),
    ])
    .x_axis(
        Axis::default()
            .title("message size S (log)")
            .style(theme.dim())
            .bounds(xb)
            .labels(vec![
                bytes(xb[0]),
                bytes((xb[0] + xb[1]) / 2.0),
                bytes(xb[1]),
            ]),
    )
    .y_axis(
        Axis::default()
            .title("transfer (log)")
            .style(theme.dim())
            .bounds(yb)
            .labels(vec![time(yb[0]), time((yb[0] + yb[1]) / 2.0), time(yb[1])]),
    )
    .render(
        Rect::new(area.x, area.y + 2, area.width, area.height - 2),
        buf,
    );
}
