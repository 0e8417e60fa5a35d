//! `ccl-bench stragglers DIR`: who holds the others up and why, as text or
//! JSON. The straggler verdict; the ranks, the one charged most wait first,
//! with where each one's step went; and who waits for whom at the
//! collectives matched across ranks.

use std::collections::HashMap;
use std::io::{self, Write};

use serde_json::{json, Value};

use super::overview;
use crate::metrics::ranks::Verdict;
use crate::metrics::Ctx;
use crate::model::time::{human, Ns};

/// One pair of who waits for whom: `waiter` waited `wait` in `collectives`
/// matched collectives for `late`, the last of their members to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pair {
    pub waiter: u32,
    pub late: u32,
    pub wait: Ns,
    pub collectives: usize,
}

/// Who waits for whom: each member of a matched collective waits from its
/// start until the last member starts (`Member::wait`), and that wait is
/// the last starter's doing. Summed per (waiter, last starter) over the
/// waiter's measured steps; the most wait first.
pub fn pairs(ctx: &Ctx) -> Vec<Pair> {
    let mut sums: HashMap<(u32, u32), (Ns, usize)> = HashMap::new();
    let trace = ctx.trace;
    ctx.each_with_members(|row, members| {
        for m in members {
            let t = &trace.ranks[m.index as usize];
            if m.rank == row.last_rank || m.wait <= Ns::ZERO || !t.counts(m.step) {
                continue;
            }
            let e = sums.entry((m.rank, row.last_rank)).or_default();
            e.0 += m.wait;
            e.1 += 1;
        }
    });
    let mut out: Vec<Pair> = sums
        .into_iter()
        .map(|((waiter, late), (wait, collectives))| Pair {
            waiter,
            late,
            wait,
            collectives,
        })
        .collect();
    out.sort_by_key(|p| (std::cmp::Reverse(p.wait), p.waiter, p.late));
    out
}

/// The stragglers document: the verdict, the `top` ranks that cause the
/// most wait (then the most work), and the `top` pairs of who waits for
/// whom, each list with how many it left out.
pub fn to_json(ctx: &Ctx, verdict: &Verdict, top: usize) -> Value {
    let mut rows: Vec<_> = ctx.rank_rows().iter().collect();
    rows.sort_by_key(|r| {
        (
            std::cmp::Reverse(r.caused),
            std::cmp::Reverse(r.work()),
            r.rank,
        )
    });
    let ranks: Vec<Value> = rows
        .iter()
        .take(top)
        .map(|r| {
            json!({
                "rank": r.rank,
                "steps": r.steps,
                "step_time_ns": r.step_time.map(Ns::get),
                "caused_ns": r.caused.get(),
                "wait_ns": r.wait.get(),
                "work_ns": r.work().get(),
                "started_last": r.last,
                "matched": r.matched,
                "budget": overview::budget(r),
            })
        })
        .collect();
    let all = pairs(ctx);
    let waits: Vec<Value> = all
        .iter()
        .take(top)
        .map(|p| {
            json!({
                "waiter": p.waiter,
                "waited_for": p.late,
                "wait_ns": p.wait.get(),
                "collectives": p.collectives,
            })
        })
        .collect();
    json!({
        "schema_version": super::json::SCHEMA_VERSION,
        "trace": ctx.trace.source.display().to_string(),
        "straggler": overview::straggler(verdict),
        "ranks_cover": "per measured step: caused_ns is the wait this rank made the others spend, \
                        wait_ns its own wait inside matched collectives",
        "ranks": ranks,
        "ranks_left_out": rows.len().saturating_sub(top),
        "waits_cover": "summed over the waiter's measured steps: each member of a matched \
                        collective waits from its start until the last member starts",
        "waits": waits,
        "waits_left_out": all.len().saturating_sub(top),
    })
}

/// The same as text.
pub fn write_text(doc: &Value, out: &mut dyn Write) -> io::Result<()> {
    let ns = |v: &Value| v.as_i64().map_or("-".to_owned(), |v| human(Ns(v)));
    writeln!(
        out,
        "straggler  {}",
        doc["straggler"]["sentence"].as_str().unwrap_or("")
    )?;
    writeln!(out)?;
    writeln!(
        out,
        "{:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
        "rank", "step", "holds up", "waits", "work", "exp. comm", "last/of"
    )?;
    for r in doc["ranks"].as_array().into_iter().flatten() {
        writeln!(
            out,
            "{:>6} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10}",
            r["rank"].to_string(),
            ns(&r["budget"]["step_ns"]),
            ns(&r["caused_ns"]),
            ns(&r["wait_ns"]),
            ns(&r["work_ns"]),
            ns(&r["budget"]["ns"]["exposed_comm_ns"]),
            format!("{}/{}", r["started_last"], r["matched"]),
        )?;
    }
    if let Some(n) = doc["ranks_left_out"].as_u64().filter(|n| *n > 0) {
        writeln!(out, "{:>6} ... {n} more ranks", "")?;
    }
    let waits = doc["waits"].as_array().map_or(&[][..], |w| w.as_slice());
    if waits.is_empty() {
        return writeln!(out, "\nno rank waited for another at a matched collective");
    }
    writeln!(out, "\nwho waits for whom (measured steps)")?;
    writeln!(
        out,
        "{:>6} {:>10} {:>12} {:>11}",
        "waiter", "for rank", "wait", "collectives"
    )?;
    for w in waits {
        writeln!(
            out,
            "{:>6} {:>10} {:>12} {:>11}",
            w["waiter"].to_string(),
            w["waited_for"].to_string(),
            ns(&w["wait_ns"]),
            w["collectives"].to_string()
        )?;
    }
    if let Some(n) = doc["waits_left_out"].as_u64().filter(|n| *n > 0) {
        writeln!(out, "{:>6} ... {n} more pairs", "")?;
    }
    Ok(())
}
