//! `export --to perfetto`: the run as one Chrome trace JSON file (gzipped
//! when the name ends in `.gz`) that Perfetto UI and chrome://tracing open.
//! Every rank is a process on the aligned clock with a thread per stream,
//! plus what ccl-bench found: a `steps` track, a `waiting in collectives`
//! track (each wait names the rank waited for), and the straggler's label.
//!
//! Times are written relative to the earliest op of the run (`ts_origin_ns`
//! in `otherData`) as exact decimal microseconds: absolute epoch times in µs
//! do not fit a double to the nanosecond.

use std::io::{BufWriter, Write};
use std::path::Path;

use crate::error::Result;
use crate::metrics::{Ctx, Outcome};
use crate::model::{Ns, RankTimeline};

/// Thread ids of the tracks that are not streams (streams are offset past them).
const STEPS_TID: u64 = 1;
const WAIT_TID: u64 = 2;
const STREAM_TID0: u64 = 10;

/// Writes the run to `path`, each rank's ops read from `ops` when its turn
/// comes; returns the number of events written.
pub fn write(ctx: &Ctx, ops: super::Ops, path: &Path) -> Result<usize> {
    let gz = path
        .file_name()
        .is_some_and(|n| n.to_string_lossy().ends_with(".gz"));
    let mut n = 0;
    crate::atomic::with(path, |file| {
        let written = if gz {
            let enc = flate2::write::GzEncoder::new(file, flate2::Compression::fast());
            let mut w = BufWriter::with_capacity(1 << 20, enc);
            write_to(ctx, ops, &mut w).and_then(|n| {
                w.into_inner()
                    .map_err(|e| e.into_error())?
                    .finish()
                    .map(|_| n)
            })
        } else {
            let mut w = BufWriter::with_capacity(1 << 20, file);
            write_to(ctx, ops, &mut w).and_then(|n| w.flush().map(|_| n))
        };
        n = written.map_err(|e| e.to_string())?;
        Ok(())
    })?;
    Ok(n)
}

/// µs with three decimals, exactly, from a non-negative ns count.
struct Micros(Ns);

impl std::fmt::Display for Micros {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns = self.0.max(Ns::ZERO);
        write!(f, "{}.{:03}", ns / 1000, ns % Ns(1000))
    }
}

struct Events<'w, W: Write> {
    w: &'w mut W,
    n: usize,
    origin: Ns,
}

impl<W: Write> Events<'_, W> {
    fn sep(&mut self) -> std::io::Result<()> {
        if self.n > 0 {
            self.w.write_all(b",\n")?;
        }
        self.n += 1;
        Ok(())
    }

    fn meta(&mut self, pid: u32, tid: Option<u64>, what: &str, args: &str) -> std::io::Result<()> {
        self.sep()?;
        write!(self.w, "{{\"ph\":\"M\",\"pid\":{pid},")?;
        if let Some(tid) = tid {
            write!(self.w, "\"tid\":{tid},")?;
        }
        write!(self.w, "\"name\":\"{what}\",\"args\":{args}}}")
    }

    /// A complete slice on track (pid, tid) over (start, dur).
    fn slice(
        &mut self,
        (pid, tid): (u32, u64),
        name: &str,
        cat: &str,
        (start, dur): (Ns, Ns),
        args: &str,
    ) -> std::io::Result<()> {
        self.sep()?;
        write!(
            self.w,
            "{{\"ph\":\"X\",\"pid\":{pid},\"tid\":{tid},\"name\":"
        )?;
        serde_json::to_writer(&mut *self.w, name)?;
        write!(
            self.w,
            ",\"cat\":\"{cat}\",\"ts\":{},\"dur\":{},\"args\":{args}}}",
            Micros(start - self.origin),
            Micros(dur)
        )
    }
}

fn json(v: impl serde::Serialize) -> String {
    serde_json::to_string(&v).unwrap_or_else(|_| "null".to_owned())
}

fn write_to<W: Write>(ctx: &Ctx, ops: super::Ops, w: &mut W) -> std::io::Result<usize> {
    let trace = ctx.trace;
    // The first op's start, from the stats: a rank opened lean holds only
    // its collectives.
    let origin = ctx
        .stats()
        .iter()
        .flat_map(|s| s.device_window.map(|w| w.start))
        .chain(
            ctx.ranks
                .iter()
                .flat_map(|t| t.steps.first().map(|s| s.start)),
        )
        .min()
        .unwrap_or(Ns::ZERO);
    let straggler = match crate::metrics::find("slowest_rank").map(|m| m.eval(ctx)) {
        Some(Outcome::Value(v)) => Some(v.value as u32),
        _ => None,
    };
    let offsets: serde_json::Map<String, serde_json::Value> = trace
        .offsets
        .iter()
        .flatten()
        .map(|o| (o.rank.to_string(), o.offset.get().into()))
        .collect();
    let other = serde_json::json!({
        "ccl_bench_schema_version": super::SCHEMA_VERSION,
        "trace": trace.source.display().to_string(),
        "ts_origin_ns": origin,
        "clock_aligned": trace.offsets.is_some(),
        "clock_offsets_ns": offsets,
        "straggler_rank": straggler,
    });
    writeln!(
        w,
        "{{\"displayTimeUnit\":\"ns\",\"otherData\":{other},\"traceEvents\":["
    )?;
    let mut ev = Events { w, n: 0, origin };
    ops.each_rank(ctx, &mut |t| {
        rank_events(t, straggler, &mut ev).map_err(|e| e.to_string())
    })
    .map_err(std::io::Error::other)?;
    waits(ctx, &mut ev)?;
    let n = ev.n;
    w.write_all(b"\n]}\n")?;
    Ok(n)
}

fn rank_events<W: Write>(
    t: &RankTimeline,
    straggler: Option<u32>,
    ev: &mut Events<W>,
) -> std::io::Result<()> {
    let pid = t.rank;
    let late = straggler == Some(t.rank);
    let title = if late {
        format!("rank {} (straggler)", t.rank)
    } else {
        format!("rank {}", t.rank)
    };
    ev.meta(
        pid,
        None,
        "process_name",
        &json(serde_json::json!({ "name": title })),
    )?;
    ev.meta(
        pid,
        None,
        "process_sort_index",
        &format!("{{\"sort_index\":{pid}}}"),
    )?;
    if late {
        ev.meta(pid, None, "process_labels", "{\"labels\":\"straggler\"}")?;
    }
    let measured = t.measured();
    if !t.steps.is_empty() {
        ev.meta(pid, Some(STEPS_TID), "thread_name", "{\"name\":\"steps\"}")?;
        ev.meta(
            pid,
            Some(STEPS_TID),
            "thread_sort_index",
            "{\"sort_index\":0}",
        )?;
    }
    for (i, s) in t.steps.iter().enumerate() {
        let args = format!("{{\"measured\":{}}}", measured.contains(&i));
        let name = format!("step {}", s.number);
        ev.slice((pid, STEPS_TID), &name, "step", (s.start, s.dur()), &args)?;
    }
    let mut streams: Vec<u32> = t.ops.iter().map(|o| o.stream).collect();
    streams.sort_unstable();
    streams.dedup();
    for s in &streams {
        let tid = STREAM_TID0 + u64::from(*s);
        ev.meta(
            pid,
            Some(tid),
            "thread_name",
            &format!("{{\"name\":\"stream {s}\"}}"),
        )?;
        ev.meta(
            pid,
            Some(tid),
            "thread_sort_index",
            &format!("{{\"sort_index\":{tid}}}"),
        )?;
    }
    for o in &t.ops {
        let mut args = serde_json::Map::new();
        args.insert("class".into(), o.class.name().into());
        if let Some(k) = o.coll {
            args.insert("collective".into(), k.name().into());
        }
        if let Some(b) = o
            .bytes()
            .or_else(|| t.coll_meta(o).and_then(|m| m.in_bytes()))
        {
            args.insert("bytes".into(), b.into());
        }
        if let Some(s) = o.step.get() {
            args.insert("step".into(), t.steps[s as usize].number.into());
        }
        let track = (pid, STREAM_TID0 + u64::from(o.stream));
        let class = o.class.name();
        ev.slice(track, t.name(o.name), class, (o.start, o.dur), &json(&args))?;
    }
    Ok(())
}

/// The waiting part of each matched collective, on each member's rank,
/// named after the member that arrived last.
fn waits<W: Write>(ctx: &Ctx, ev: &mut Events<W>) -> std::io::Result<()> {
    let mut named = std::collections::HashSet::new();
    let mut failed = None;
    // One pass over the run's collectives (see `Ctx::each_with_members`).
    ctx.each_with_members(|c, members| {
        for m in members
            .iter()
            .filter(|m| m.wait > Ns::ZERO && m.rank != c.last_rank)
        {
            if failed.is_none() {
                if let Err(e) = wait_of(ev, &mut named, c, m) {
                    failed = Some(e);
                }
            }
        }
    });
    failed.map_or(Ok(()), Err)
}

/// The wait of member `m` of collective `c` (and its rank's wait track's
/// name, the first time).
fn wait_of<W: Write>(
    ev: &mut Events<W>,
    named: &mut std::collections::HashSet<u32>,
    c: &crate::derive::instances::InstanceRow,
    m: &crate::derive::instances::Member,
) -> std::io::Result<()> {
    if named.insert(m.rank) {
        ev.meta(
            m.rank,
            Some(WAIT_TID),
            "thread_name",
            "{\"name\":\"waiting in collectives\"}",
        )?;
        ev.meta(
            m.rank,
            Some(WAIT_TID),
            "thread_sort_index",
            "{\"sort_index\":1}",
        )?;
    }
    let args = json(serde_json::json!({
        "collective_id": c.id,
        "group": c.group,
        "kind": c.kind.map(|k| k.name()),
        "waited_for": c.last_rank,
    }));
    let name = format!("wait for rank {}", c.last_rank);
    ev.slice((m.rank, WAIT_TID), &name, "wait", (m.start, m.wait), &args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::trace;

    #[test]
    fn ranks_are_processes_and_waits_name_the_late_rank() {
        let t = trace(&crate::synth::late_pair());
        let ctx = Ctx::new(&t, None).unwrap();
        let mut out = Vec::new();
        let n = write_to(&ctx, crate::export::Ops::Loaded, &mut out).unwrap();
        let doc: serde_json::Value = serde_json::from_slice(&out).unwrap();
        let events = doc["traceEvents"].as_array().unwrap();
        assert_eq!(events.len(), n);
        let names: Vec<&str> = events
            .iter()
            .filter(|e| e["name"] == "process_name")
            .map(|e| e["args"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["rank 0", "rank 1 (straggler)"]);
        assert_eq!(doc["otherData"]["straggler_rank"], 1);
        // Rank 0 waits from 10 µs to 40 µs for rank 1 (times from the first
        // event, the steps' start at 0).
        let waits: Vec<_> = events.iter().filter(|e| e["cat"] == "wait").collect();
        assert_eq!(waits.len(), 1);
        assert_eq!(waits[0]["pid"], 0);
        assert_eq!(waits[0]["name"], "wait for rank 1");
        assert_eq!(waits[0]["ts"].as_f64(), Some(10.0));
        assert_eq!(waits[0]["dur"].as_f64(), Some(30.0));
        assert_eq!(doc["otherData"]["ts_origin_ns"], 0);
    }

    #[test]
    fn micros_are_exact() {
        assert_eq!(
            Micros(Ns(1_694_128_201_421_205_501)).to_string(),
            "1694128201421205.501"
        );
        assert_eq!(Micros(Ns(7)).to_string(), "0.007");
    }
}
