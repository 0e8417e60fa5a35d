//! The human-readable table printed by `--metrics`.

use std::io::{self, Write};

use super::{About, Row};
use crate::metrics::Outcome;

pub(crate) fn write(about: &About, rows: &[Row], out: &mut dyn Write) -> io::Result<()> {
    if about.ranks.is_empty() {
        writeln!(out, "{}: no device timeline", about.source)?;
    } else {
        writeln!(
            out,
            "{}: {} rank{} ({}), {} {} ops",
            about.source,
            about.ranks.len(),
            if about.ranks.len() == 1 { "" } else { "s" },
            rank_list(&about.ranks),
            about.ops,
            about.accelerator,
        )?;
    }
    if !about.memory.is_empty() {
        writeln!(out, "memory snapshots: {}", rank_list(&about.memory))?;
    }
    if !about.et.is_empty() {
        writeln!(out, "execution traces: {}", rank_list(&about.et))?;
    }
    if !about.steps.is_empty() {
        writeln!(out, "per-step metrics use: {}", about.steps)?;
    }
    if let Some(line) = about.offsets_line() {
        writeln!(out, "{line}")?;
    }
    let width = rows.iter().map(|r| r.metric.name.len()).max().unwrap_or(6);
    let spread = |r: &Row| {
        r.spread().map_or(String::new(), |((rn, vn), (rx, vx))| {
            let unit = r.metric.unit;
            format!("{} (r{rn}) .. {} (r{rx})", unit.human(vn), unit.human(vx))
        })
    };
    let sw = rows
        .iter()
        .map(|r| spread(r).len())
        .max()
        .unwrap_or(0)
        .max(17);
    writeln!(
        out,
        "{:<width$}  {:>14}  {:<6}  {:<sw$}  meaning",
        "metric", "value", "unit", "min .. max (rank)"
    )?;
    for r in rows {
        let unit = r.metric.unit;
        match &r.outcome {
            Outcome::Value(m) => {
                writeln!(
                    out,
                    "{:<width$}  {:>14}  {:<6}  {:<sw$}  {}",
                    r.metric.name,
                    unit.human(m.value),
                    unit.symbol(),
                    spread(r),
                    r.metric.about
                )?;
                for (label, v) in &m.parts {
                    writeln!(
                        out,
                        "{:<width$}  {:>14}  {:<6}",
                        format!("  {label}"),
                        unit.human(*v),
                        unit.symbol()
                    )?;
                }
                if let Some(f) = &m.fraction {
                    writeln!(out, "{:<width$}  {f}", "")?;
                }
                if let Some(note) = &m.note {
                    writeln!(out, "{:<width$}  {note}", "")?;
                }
            }
            Outcome::NotApplicable(why) => writeln!(
                out,
                "{:<width$}  {:>14}  {:<6}  {:<sw$}  not applicable: {why}",
                r.metric.name,
                "n/a",
                unit.symbol(),
                ""
            )?,
        }
    }
    Ok(())
}

/// `ranks 0-7`, `ranks 0, 2`, `rank 3` (see [`super::human::ranks`]).
fn rank_list(ranks: &[u32]) -> String {
    match ranks {
        [] => "none".into(),
        [a] => format!("rank {a}"),
        _ => format!("ranks {}", super::human::ranks(ranks)),
    }
}

#[cfg(test)]
mod tests {
    use super::rank_list;

    #[test]
    fn rank_lists() {
        assert_eq!(rank_list(&[0, 1, 2, 3]), "ranks 0-3");
        assert_eq!(rank_list(&[0, 1]), "ranks 0-1");
        assert_eq!(rank_list(&[0, 2]), "ranks 0, 2");
        assert_eq!(rank_list(&[34]), "rank 34");
    }
}
