//! Output of `ccl-bench compare`: a table, JSON or CSV.

use std::io::{self, Write};

use serde_json::{json, Value};

use super::Format;
use crate::compare::{Comparison, MetricDiff, TimeDiff, Verdict};
use crate::metrics::Better;
use crate::model::time::{human, Ns};

pub struct Sides<'a> {
    pub a: &'a str,
    pub b: &'a str,
    pub threshold: f64,
    pub top: usize,
}

pub(crate) fn write(
    format: Format,
    s: &Sides,
    c: &Comparison,
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Table => table(s, c, out),
        Format::Json => {
            serde_json::to_writer_pretty(&mut *out, &to_json(s, c))?;
            writeln!(out)
        }
        Format::Csv => csv(c, out),
    }
}

fn value(d: &MetricDiff, side: &crate::metrics::Outcome) -> String {
    side.as_value()
        .map_or("n/a".to_owned(), |v| d.metric.unit.people(v))
}

fn table(s: &Sides, c: &Comparison, out: &mut dyn Write) -> io::Result<()> {
    writeln!(out, "A: {}\nB: {}", s.a, s.b)?;
    writeln!(
        out,
        "changes beyond {:.1}% are marked; better/WORSE by each metric's direction\n",
        s.threshold * 100.0
    )?;
    let w = c
        .metrics
        .iter()
        .map(|d| d.metric.name.len())
        .max()
        .unwrap_or(6);
    writeln!(
        out,
        "{:<w$}  {:>12}  {:>12}  {:>12}  {:>8}  {:<10}  ",
        "metric", "A", "B", "B - A", "change", "unit"
    )?;
    for d in &c.metrics {
        if d.a.as_value().is_none() && d.b.as_value().is_none() {
            continue;
        }
        let delta = d.delta().map_or(String::new(), |v| d.metric.unit.people(v));
        let rel = d.change_text();
        writeln!(
            out,
            "{:<w$}  {:>12}  {:>12}  {:>12}  {:>8}  {:<10}  {}",
            d.metric.name,
            value(d, &d.a),
            value(d, &d.b),
            delta,
            rel,
            d.metric.unit.people_unit(),
            d.verdict.label()
        )?;
    }
    let sections = [
        ("kernels (templates and arguments stripped)", &c.kernels),
        ("kernel classes", &c.classes),
        ("collectives", &c.collectives),
    ];
    // Against a baseline's values there are none to list.
    for (title, rows) in sections.into_iter().filter(|_| c.detailed) {
        writeln!(
            out,
            "\n{title}: largest change in device time first, all ranks"
        )?;
        if rows.is_empty() {
            writeln!(out, "(none in either run)")?;
            continue;
        }
        let nw = rows
            .iter()
            .take(s.top)
            .map(|r| r.name.chars().count())
            .max()
            .unwrap_or(4)
            .min(60);
        writeln!(
            out,
            "{:<nw$}  {:>8}  {:>10}  {:>8}  {:>10}  {:>11}",
            "name", "A count", "A time", "B count", "B time", "B - A"
        )?;
        for r in rows.iter().take(s.top) {
            writeln!(
                out,
                "{:<nw$}  {:>8}  {:>10}  {:>8}  {:>10}  {:>11}",
                crate::human::fit(&r.name, nw),
                r.a_count,
                secs(r.a),
                r.b_count,
                secs(r.b),
                signed(r.delta())
            )?;
        }
    }
    writeln!(out)?;
    match &c.ranks {
        Ok(ranks) => {
            writeln!(out, "per rank, per step (A -> B): step time, work (busy - exposed comm), exposed communication")?;
            for r in ranks {
                let step = match r.step {
                    (Some(x), Some(y)) => format!("{} -> {}", secs(x), secs(y)),
                    _ => "-".to_owned(),
                };
                writeln!(
                    out,
                    "rank {:<4}  step {:<22}  work {} -> {:<10}  exposed {} -> {}",
                    r.rank,
                    step,
                    secs(r.work.0),
                    secs(r.work.1),
                    secs(r.exposed.0),
                    secs(r.exposed.1)
                )?;
            }
        }
        Err(why) => writeln!(out, "per rank: {why}")?,
    }
    Ok(())
}

fn secs(s: f64) -> String {
    human(Ns::rounded(s * 1e9))
}

fn signed(s: f64) -> String {
    if s >= 0.0 {
        format!("+{}", secs(s))
    } else {
        secs(s)
    }
}

fn time_rows(rows: &[TimeDiff]) -> Vec<Value> {
    rows.iter()
        .map(|r| {
            json!({"name": r.name, "a_count": r.a_count, "b_count": r.b_count,
                   "a_s": r.a, "b_s": r.b, "delta_s": r.delta()})
        })
        .collect()
}

pub fn to_json(s: &Sides, c: &Comparison) -> Value {
    let metrics: Vec<Value> = c
        .metrics
        .iter()
        .map(|d| {
            json!({
                "metric": d.metric.name,
                "unit": d.metric.unit.symbol(),
                "a": d.a.as_value(),
                "b": d.b.as_value(),
                "delta": d.delta(),
                "relative": d.relative(),
                "better": match d.metric.better {
                    Better::Higher => "higher",
                    Better::Lower => "lower",
                    Better::Neither => "neither",
                },
                "verdict": verdict(d.verdict),
            })
        })
        .collect();
    let ranks = match &c.ranks {
        Ok(r) => json!(r
            .iter()
            .map(|r| json!({"rank": r.rank, "step_s": [r.step.0, r.step.1],
                            "work_s": [r.work.0, r.work.1], "exposed_comm_s": [r.exposed.0, r.exposed.1]}))
            .collect::<Vec<_>>()),
        Err(why) => json!({ "not_compared": why }),
    };
    json!({
        "schema_version": super::json::SCHEMA_VERSION,
        "a": s.a, "b": s.b, "threshold": s.threshold,
        "metrics": metrics,
        "kernels": time_rows(&c.kernels),
        "classes": time_rows(&c.classes),
        "collectives": time_rows(&c.collectives),
        "ranks": ranks,
    })
}

fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Same => "same",
        Verdict::Changed => "changed",
        Verdict::Better => "better",
        Verdict::Worse => "worse",
        Verdict::OneSided => "one_sided",
    }
}

fn csv(c: &Comparison, out: &mut dyn Write) -> io::Result<()> {
    let mut w = ::csv::Writer::from_writer(out);
    let num = |v: Option<f64>| v.map_or(String::new(), |v| v.to_string());
    w.write_record(["metric", "unit", "a", "b", "delta", "relative", "verdict"])?;
    for d in &c.metrics {
        w.write_record([
            d.metric.name.to_owned(),
            d.metric.unit.symbol().to_owned(),
            num(d.a.as_value()),
            num(d.b.as_value()),
            num(d.delta()),
            num(d.relative()),
            verdict(d.verdict).to_owned(),
        ])?;
    }
    w.flush()
}
