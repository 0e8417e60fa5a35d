//! `ccl-bench overview DIR`: what the Summary tab says first, as text or
//! JSON. The run, the headline verdicts (step time, communication, overlap,
//! utilization, straggler) and where the mean rank's step went (device
//! side, per measured step, summing to the step).

use crate::model::Warning;
use std::io::{self, Write};

use serde_json::{json, Value};

use super::{About, Row};
use crate::derive::RankRow;
use crate::metrics::pace::Pace;
use crate::metrics::ranks::{Basis, Verdict};
use crate::metrics::Ctx;
use crate::model::time::{human, Ns};

/// The metrics the headline verdicts are made of, in the Summary's order.
pub(crate) const HEADLINE: [&str; 8] = [
    "iteration_time_s",
    "avg_step_time",
    "communication_fraction",
    "exposed_comm_time_s",
    "comm_wait_fraction",
    "compute_comm_overlap",
    "aggregate_gpu_utilization",
    "unclassified_fraction",
];

/// The budget's parts, in the order `RankRow::budget` gives them.
const BUDGET: [&str; 5] = ["compute_only", "overlap", "exposed_comm", "copies", "idle"];

/// At most this many load warnings are listed; the count says the rest.
const WARNINGS: usize = 20;

/// The straggler verdict as data: its kind, the late ranks and the
/// evidence, with the sentence every view shows.
pub(crate) fn straggler(v: &Verdict) -> Value {
    let sentence = v.sentence();
    match v {
        Verdict::OneRank => json!({"verdict": "one_rank", "sentence": sentence}),
        Verdict::NoStraggler(_) => json!({"verdict": "no_straggler", "sentence": sentence}),
        Verdict::Unknown { why, work } => json!({
            "verdict": "unknown",
            "why": why,
            "by_work": work,
            "sentence": sentence,
        }),
        Verdict::Straggler { rank, basis, .. } => match basis {
            Basis::Arrival {
                set,
                caused,
                waiting,
                last,
                matched,
                step,
            } => json!({
                "verdict": "straggler",
                "basis": "arrival",
                "rank": rank,
                "late_ranks": set,
                "caused_ns_per_step": caused.get(),
                "others_wait_ns_per_step": waiting.get(),
                "started_last": last,
                "matched": matched,
                "median_step_ns": step.get(),
                "sentence": sentence,
            }),
            Basis::Work { work, median } => json!({
                "verdict": "straggler",
                "basis": "work",
                "rank": rank,
                "late_ranks": [rank],
                "work_ns_per_step": work.get(),
                "median_work_ns_per_step": median.get(),
                "sentence": sentence,
            }),
        },
    }
}

/// Which side sets the pace of the steps, as data and as the sentence the
/// Summary shows; null without steps.
fn pace(rows: &[RankRow], xpu: &str) -> Value {
    let Some(p) = Pace::of(rows) else {
        return Value::Null;
    };
    let sentence = p.sentence(xpu);
    match p {
        Pace::DeviceBound {
            ranks,
            device,
            cpu,
            ahead,
            ..
        } => json!({
            "bound": "device",
            "ranks": ranks,
            "device_step_ns": device.get(),
            "cpu_step_ns": cpu.get(),
            "cpu_ahead_ns": ahead.get(),
            "sentence": sentence,
        }),
        Pace::HostBound { idle } => {
            json!({"bound": "host", "device_idle_share": idle, "sentence": sentence})
        }
        Pace::Even { busy } => {
            json!({"bound": "neither", "device_busy_share": busy, "sentence": sentence})
        }
    }
}

/// The mean of the ranks' rows (its `rank` unused), as the Summary's
/// budget shows it.
pub(crate) fn mean_row(rows: &[RankRow]) -> RankRow {
    let n = rows.len().max(1) as i64;
    let avg = |f: fn(&RankRow) -> Ns| rows.iter().map(f).sum::<Ns>() / n;
    RankRow {
        rank: 0,
        steps: rows.iter().map(|r| r.steps).max().unwrap_or(0),
        step_time: None,
        span: avg(|r| r.span),
        busy: avg(|r| r.busy),
        compute: avg(|r| r.compute),
        comm: avg(|r| r.comm),
        exposed_comm: avg(|r| r.exposed_comm),
        idle: avg(|r| r.idle),
        waiting: avg(|r| r.waiting),
        wait: avg(|r| r.wait),
        caused: avg(|r| r.caused),
        last: 0,
        matched: 0,
        ahead: None,
    }
}

/// A rank's step budget: each part in ns per measured step, and its share
/// of the step in %.
pub(crate) fn budget(r: &RankRow) -> Value {
    let pct = |v: Ns| (r.span > Ns::ZERO).then(|| v.as_f64() / r.span.as_f64() * 100.0);
    let mut ns = serde_json::Map::new();
    let mut share = serde_json::Map::new();
    let parts = r.budget();
    for (name, v) in BUDGET.iter().zip(parts).chain([(&"waiting", r.waiting)]) {
        ns.insert(format!("{name}_ns"), json!(v.get()));
        share.insert(format!("{name}_pct"), json!(pct(v)));
    }
    json!({"step_ns": r.span.get(), "ns": ns, "share": share})
}

/// The overview document of `ctx` (every rank of the run), whose metrics
/// are `rows` and straggler verdict `verdict`; `warnings`: the load's.
pub fn to_json(ctx: &Ctx, rows: &[Row], verdict: &Verdict, warnings: &[Warning]) -> Value {
    let about = About::of(ctx);
    let headline: Vec<Value> = HEADLINE
        .iter()
        .filter_map(|name| rows.iter().find(|r| r.metric.name == *name))
        .map(|r| {
            // The figure and its reason; per-rank values are the metric
            // tool's (a 1,024-rank run would fill the page).
            let mut m = serde_json::to_value(super::json::metric(r)).unwrap_or(Value::Null);
            if let Some(o) = m.as_object_mut() {
                o.remove("per_rank");
                o.remove("about");
            }
            m
        })
        .collect();
    let ranks = ctx.rank_rows();
    let mean = mean_row(ranks);
    json!({
        "schema_version": super::json::SCHEMA_VERSION,
        "trace": about.source,
        "ranks": about.ranks.len(),
        "rank_ids": about.ranks,
        "gpu_ops": about.ops,
        "accelerator": about.accelerator,
        "steps_used": about.steps,
        "clocks": about.offsets_line(),
        "warnings": warnings.iter().take(WARNINGS).map(|w| &w.text).collect::<Vec<_>>(),
        "warning_kinds": warnings.iter().take(WARNINGS).map(|w| w.kind.name()).collect::<Vec<_>>(),
        "warnings_left_out": warnings.len().saturating_sub(WARNINGS),
        "headline": headline,
        "pace": pace(ranks, about.accelerator),
        "straggler": straggler(verdict),
        "budget": {
            "covers": "per measured step, device side, mean over the ranks",
            "mean": budget(&mean),
        },
    })
}

/// The same as text: the lines a person reads.
pub fn write_text(doc: &Value, out: &mut dyn Write) -> io::Result<()> {
    let s = |v: &Value| v.as_str().unwrap_or("").to_owned();
    writeln!(
        out,
        "Run        {} · {} · {} {} ops",
        s(&doc["trace"]),
        crate::human::plural(doc["ranks"].as_u64().unwrap_or(0) as usize, "rank", "ranks"),
        doc["gpu_ops"],
        doc["accelerator"].as_str().unwrap_or("GPU")
    )?;
    writeln!(
        out,
        "           per-step values use: {}",
        s(&doc["steps_used"])
    )?;
    if let Some(c) = doc["clocks"].as_str() {
        writeln!(out, "           {c}")?;
    }
    for w in doc["warnings"].as_array().into_iter().flatten() {
        writeln!(out, "warning    {}", s(w))?;
    }
    if let Some(n) = doc["warnings_left_out"].as_u64().filter(|n| *n > 0) {
        writeln!(out, "warning    ... {n} more")?;
    }
    writeln!(out)?;
    for m in doc["headline"].as_array().into_iter().flatten() {
        let value = match (&m["value"], m["not_applicable"].as_str()) {
            (_, Some(why)) => format!("n/a: {why}"),
            (v, None) => match (v.as_f64(), crate::metrics::lookup(&s(&m["name"]))) {
                (Some(v), Ok(metric)) => {
                    format!("{} {}", metric.unit.people(v), metric.unit.people_unit())
                        .trim_end()
                        .to_owned()
                }
                _ => "?".into(),
            },
        };
        writeln!(out, "{:<27} {value}", s(&m["name"]))?;
    }
    if let Some(p) = doc["pace"]["sentence"].as_str() {
        writeln!(out, "{:<27} {p}", "pace")?;
    }
    writeln!(
        out,
        "{:<27} {}",
        "straggler",
        s(&doc["straggler"]["sentence"])
    )?;
    if let Some(h) = doc.get("hang") {
        writeln!(
            out,
            "{:<27} {}: {} ({} Flight Recorder dumps; ccl-bench hang gives every finding)",
            "hang",
            s(&h["verdict"]),
            s(&h["headline"]),
            h["dumps"]
        )?;
    }
    let mean = &doc["budget"]["mean"];
    if let Some(step) = mean["step_ns"].as_i64().filter(|v| *v > 0) {
        writeln!(out)?;
        writeln!(
            out,
            "Where the mean rank's step went (device side): {} per step",
            human(Ns(step))
        )?;
        for name in BUDGET.iter().chain(&["waiting"]) {
            let ns = mean["ns"][format!("{name}_ns")].as_i64().unwrap_or(0);
            let pct = mean["share"][format!("{name}_pct")].as_f64().unwrap_or(0.0);
            let label = if *name == "waiting" {
                "  of which waiting"
            } else {
                name
            };
            writeln!(out, "  {label:<20} {:>10}  {pct:5.1} %", human(Ns(ns)))?;
        }
    }
    Ok(())
}

/// What the overview's rows are made of, `rows` of `ctx` (every metric).
pub fn headline_rows(ctx: &Ctx) -> Vec<Row> {
    HEADLINE
        .iter()
        .filter_map(|n| crate::metrics::lookup(n).ok())
        .map(|metric| Row {
            metric,
            outcome: metric.eval(ctx),
        })
        .collect()
}
