//! `--format csv`: one row per metric (breakdown parts as `metric.part` rows).

use std::io::{self, Write};

use super::Row;
use crate::metrics::Outcome;

pub(crate) fn write(rows: &[Row], out: &mut dyn Write) -> io::Result<()> {
    let mut w = csv::Writer::from_writer(out);
    let num = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    w.write_record([
        "metric", "value", "unit", "min", "min_rank", "max", "max_rank", "status", "about",
    ])?;
    for r in rows {
        let spread = r.spread();
        let (value, status) = match &r.outcome {
            Outcome::Value(m) => (Some(m.value), "ok".to_owned()),
            Outcome::NotApplicable(why) => (None, format!("not applicable: {why}")),
        };
        w.write_record([
            r.metric.name.to_owned(),
            num(value),
            r.metric.unit.symbol().to_owned(),
            num(spread.map(|s| s.0 .1)),
            spread.map_or(String::new(), |s| s.0 .0.to_string()),
            num(spread.map(|s| s.1 .1)),
            spread.map_or(String::new(), |s| s.1 .0.to_string()),
            status,
            r.metric.about.to_owned(),
        ])?;
        if let Outcome::Value(m) = &r.outcome {
            for (label, v) in &m.parts {
                w.write_record([
                    format!("{}.{}", r.metric.name, label.replace(' ', "_")),
                    v.to_string(),
                    r.metric.unit.symbol().to_owned(),
                    String::new(),
                    String::new(),
                    String::new(),
                    String::new(),
                    "ok".to_owned(),
                    format!("{} share", label),
                ])?;
            }
        }
    }
    w.flush()
}
