//! `ccl-bench ops DIR --rank N`: one rank's device ops in a step or a time
//! window, capped, as text or JSON. An op's fields are the `ops` table's
//! (docs/schema.md), so a script reads both alike.

use std::io::{self, Write};

use serde_json::{json, Value};

use crate::model::time::{human, Ns};
use crate::model::{DeviceOp, RankTimeline};

/// Which ops: launched during step `step` (its number), overlapping
/// `[from, to)` (absolute ns, on the run's aligned clock), or both.
#[derive(Debug, Clone, Copy, Default)]
pub struct Window {
    pub step: Option<i64>,
    pub from: Option<Ns>,
    pub to: Option<Ns>,
}

/// The op's row, named as the `ops` table's columns.
fn row(t: &RankTimeline, o: &DeviceOp) -> Value {
    let meta = t.coll_meta(o);
    json!({
        "start_ns": o.start.get(),
        "dur_ns": o.dur.get(),
        "name": t.name(o.name),
        "activity": o.activity.name(),
        "class": o.class.name(),
        "collective": o.coll.map(|c| c.name()),
        "stream": o.stream,
        "device": o.device,
        "step": o.step.get().map(|i| t.steps[i as usize].number),
        "measured": t.counts(o.step),
        "bytes": o.bytes(),
        "message_bytes": meta.and_then(|m| m.in_bytes()),
        "process_group": meta.and_then(|m| m.pg_name).map(|id| t.name(id)),
        "group_size": meta.and_then(|m| m.group_size),
        "launch_ns": o.launch.get(),
    })
}

/// The ops of rank `t` of the run at `source` in `w`, in start order, at
/// most `limit` of them; `Err`: a step the rank does not have, or an empty
/// window.
pub fn to_json(t: &RankTimeline, source: &str, w: Window, limit: usize) -> Result<Value, String> {
    let step_index = match w.step {
        Some(k) => Some(t.steps.iter().position(|s| s.number == k).ok_or_else(|| {
            match (t.steps.first(), t.steps.last()) {
                (Some(a), Some(b)) => format!(
                    "rank {} has no step {k} (its steps are {}..={})",
                    t.rank, a.number, b.number
                ),
                _ => format!("rank {} has no steps (no ProfilerStep ranges)", t.rank),
            }
        })?),
        None => None,
    };
    if let (Some(a), Some(b)) = (w.from, w.to) {
        if b <= a {
            return Err(format!("the window ends ({b}) before it starts ({a})"));
        }
    }
    let keep = |o: &DeviceOp| {
        step_index.is_none_or(|i| o.step.get() == Some(i as u32))
            && w.from.is_none_or(|a| o.end() > a)
            && w.to.is_none_or(|b| o.start < b)
    };
    let mut picked: Vec<&DeviceOp> = t.ops.iter().filter(|o| keep(o)).collect();
    picked.sort_by_key(|o| (o.start, o.stream));
    let extent = picked
        .iter()
        .fold(None, |acc: Option<(Ns, Ns)>, o| match acc {
            None => Some((o.start, o.end())),
            Some((a, b)) => Some((a.min(o.start), b.max(o.end()))),
        });
    let steps = json!({
        "first": t.steps.first().map(|s| s.number),
        "last": t.steps.last().map(|s| s.number),
        "count": t.steps.len(),
        "measured": t.measured().len(),
    });
    Ok(json!({
        "schema_version": super::json::SCHEMA_VERSION,
        "trace": source,
        "rank": t.rank,
        "step": w.step,
        "from_ns": w.from.map(Ns::get),
        "to_ns": w.to.map(Ns::get),
        "rank_steps": steps,
        "rank_window": t.device_window().map(|d| json!({"start_ns": d.start.get(), "end_ns": d.end.get()})),
        "count": picked.len(),
        "extent": extent.map(|(a, b)| json!({"start_ns": a.get(), "end_ns": b.get()})),
        "ops": picked.iter().take(limit).map(|o| row(t, o)).collect::<Vec<_>>(),
        "left_out": picked.len().saturating_sub(limit),
    }))
}

/// The same as text: one line per op, times from the first op shown.
pub fn write_text(doc: &Value, out: &mut dyn Write) -> io::Result<()> {
    let ops = doc["ops"].as_array().map_or(&[][..], |o| o.as_slice());
    writeln!(
        out,
        "rank {} · {} ops in the window{}",
        doc["rank"],
        doc["count"],
        match doc["left_out"].as_u64() {
            Some(n) if n > 0 => format!(", the first {} shown", ops.len()),
            _ => String::new(),
        }
    )?;
    let Some(t0) = ops.first().and_then(|o| o["start_ns"].as_i64()) else {
        return Ok(());
    };
    writeln!(
        out,
        "{:>10} {:>10} {:>6} {:>5}  {:<14} {:<12} name",
        "at", "dur", "stream", "step", "class", "collective"
    )?;
    for o in ops {
        let at = o["start_ns"].as_i64().unwrap_or(t0) - t0;
        writeln!(
            out,
            "{:>10} {:>10} {:>6} {:>5}  {:<14} {:<12} {}",
            human(Ns(at)),
            human(Ns(o["dur_ns"].as_i64().unwrap_or(0))),
            o["stream"].to_string(),
            o["step"].as_i64().map_or("-".into(), |s| s.to_string()),
            o["class"].as_str().unwrap_or(""),
            o["collective"].as_str().unwrap_or("-"),
            o["name"].as_str().unwrap_or(""),
        )?;
    }
    Ok(())
}
