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

/// Per matched collective, the members waited for are at most this many,
/// the latest to start: a waiter's charge to a member grows with how late
/// that member starts, so they hold each waiter's largest charges.
const WAITED_FOR: usize = 16;

/// Who waits for whom, split as `model::collectives::Blame` splits it (the
/// split behind each rank's `caused`): each member waits from its start
/// until the last member starts, and over each stretch of that wait the
/// members still absent share it equally. Summed per (waiter, absentee)
/// over the waiter's measured steps; the most wait first. Two ranks late
/// together are each charged half, not one of them all by a tie-break.
pub fn pairs(ctx: &Ctx) -> Vec<Pair> {
    let mut sums: HashMap<(u32, u32), (f64, usize)> = HashMap::new();
    let trace = ctx.trace;
    ctx.each_with_members(|_, members| {
        charge(members, &mut |w, a, c| {
            let waiter = &members[w];
            if trace.ranks[waiter.index as usize].counts(waiter.step) {
                let e = sums.entry((waiter.rank, members[a].rank)).or_default();
                e.0 += c;
                e.1 += 1;
            }
        });
    });
    let mut out: Vec<Pair> = sums
        .into_iter()
        .map(|((waiter, late), (wait, collectives))| Pair {
            waiter,
            late,
            wait: Ns::rounded(wait),
            collectives,
        })
        .filter(|p| p.wait > Ns::ZERO)
        .collect();
    out.sort_by_key(|p| (std::cmp::Reverse(p.wait), p.waiter, p.late));
    out
}

/// Calls `f(waiter, absentee, ns)` for each member index pair of one
/// collective with a charge: the integral, over the waiter's wait before
/// the absentee starts, of 1 / the members absent at each instant.
fn charge(members: &[crate::derive::instances::Member], f: &mut dyn FnMut(usize, usize, f64)) {
    let n = members.len();
    let mut starts: Vec<Ns> = members.iter().map(|m| m.start).collect();
    starts.sort_unstable();
    let mut points: Vec<Ns> = starts
        .iter()
        .copied()
        .chain(members.iter().map(|m| m.start + m.wait))
        .collect();
    points.sort_unstable();
    points.dedup();
    // at[k]: the integral of 1 / absent from points[0] to points[k].
    let mut at = Vec::with_capacity(points.len());
    let mut sum = 0.0;
    at.push(0.0);
    for w in points.windows(2) {
        let absent = n - starts.partition_point(|&s| s <= w[0]);
        if absent > 0 {
            sum += (w[1] - w[0]).as_f64() / absent as f64;
        }
        at.push(sum);
    }
    let integral = |t: Ns| at[points.partition_point(|&p| p < t)];
    let mut latest: Vec<usize> = (0..n).collect();
    latest.sort_by_key(|&i| std::cmp::Reverse(members[i].start));
    latest.truncate(WAITED_FOR);
    for (w, m) in members.iter().enumerate() {
        if m.wait <= Ns::ZERO {
            continue;
        }
        for &a in &latest {
            let start = members[a].start;
            if start <= m.start {
                continue;
            }
            let c = integral((m.start + m.wait).min(start)) - integral(m.start);
            if c > 0.0 {
                f(w, a, c);
            }
        }
    }
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
                        collective waits from its start until the last member starts, and the \
                        members still absent share each instant of that wait equally",
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
