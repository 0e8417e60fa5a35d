//! Chrome-trace JSON written by the JAX/TensorFlow profiler (`*.trace.json.gz`,
//! `perfetto_trace.json.gz`): processes named `/device:TPU:N` or
//! `/device:GPU:N` (from `process_name` metadata events) become ranks; complete
//! events on their `XLA Ops` or `Stream #N(...)` threads are the ops. The HLO
//! text, when the profiler recorded it (`args.long_name`), names collectives
//! as in the XSpace reader, which this one shares its op handling with.

use crate::model::Warning;
use std::collections::{HashMap, HashSet};
use std::io::Read;
use std::path::Path;

use serde::Deserialize;
use serde_json::Value;

use super::events::{again_warning, serde_message, walk, Sink};
use super::split::Pos;
use super::xplane::{device_number, op_stream, DeviceOps, MODULES};
use super::RankFile;
use crate::error::Error;
use crate::model::time::Micros;
use crate::model::{Interner, Ns, StrId};

#[derive(Deserialize)]
struct Event {
    #[serde(default)]
    ph: String,
    #[serde(default)]
    pid: Value,
    #[serde(default)]
    tid: Value,
    #[serde(default)]
    name: String,
    ts: Option<super::chrome::TimeText>,
    dur: Option<super::chrome::TimeText>,
    #[serde(default)]
    args: Args,
}

#[derive(Deserialize, Default)]
struct Args {
    /// `process_name` / `thread_name` metadata.
    name: Option<String>,
    /// The HLO instruction text.
    long_name: Option<String>,
}

/// Process and thread ids are numbers or strings depending on the writer.
fn id(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// A complete event as kept until every name is known: its ids and names
/// interned (an HLO instruction's text repeats every step), its times in
/// ns. A tenth of the bytes the event takes in the file, or less.
struct Kept {
    pid: StrId,
    tid: StrId,
    name: StrId,
    /// The HLO text, when recorded.
    long: Option<StrId>,
    start: Ns,
    dur: Ns,
}

/// The events of one file as they stream by: device and thread names from
/// metadata events, the complete events kept until every name is known
/// (the profiler may write metadata after the events), except those of a
/// process or thread already named as no device or no op line.
#[derive(Default)]
struct Collect {
    path: std::path::PathBuf,
    /// The ops of each device, pushed as they come once their process and
    /// thread are named (metadata usually comes first).
    by_device: HashMap<u32, DeviceOps>,
    strings: Interner,
    /// Device number and process name, by process id.
    devices: HashMap<StrId, (u32, String)>,
    /// Processes named, but not as a device (the host).
    not_devices: HashSet<StrId>,
    threads: HashMap<(StrId, StrId), String>,
    /// Complete events that came before their process's or thread's name,
    /// and the threads they are of.
    complete: Vec<Kept>,
    waiting: HashSet<(StrId, StrId)>,
    events: u64,
    skipped: u64,
    first_skip: Option<(Pos, String)>,
    saw_events: bool,
    /// A second event array: where, and the events of the first dropped.
    again: Option<(Pos, u64)>,
}

impl Collect {
    /// Whether the events of `pid`'s thread `tid` are already known to
    /// be of no use: a process named as no device, or a thread named as
    /// neither an op line nor the modules' line.
    fn unused(&self, pid: StrId, tid: StrId) -> bool {
        self.not_devices.contains(&pid)
            || self
                .threads
                .get(&(pid, tid))
                .is_some_and(|line| op_stream(line).is_none() && line != MODULES)
    }
}

impl Sink for Collect {
    type Event = Event;

    fn parse(&mut self, raw: &[u8]) -> Result<Option<Event>, serde_json::Error> {
        serde_json::from_slice(raw).map(Some)
    }

    fn take(
        &mut self,
        parsed: Result<Option<Event>, serde_json::Error>,
        start: impl FnOnce() -> Pos,
    ) {
        let e = match parsed {
            Ok(Some(e)) => e,
            Ok(None) => return,
            Err(err) => {
                self.skipped += 1;
                if self.first_skip.is_none() {
                    self.first_skip = Some((start().advanced_to(&err), serde_message(&err)));
                }
                return;
            }
        };
        self.events += 1;
        let pid = self.strings.intern(&id(&e.pid));
        let tid = self.strings.intern(&id(&e.tid));
        match e.ph.as_str() {
            "X" => {
                let Some(ts) = e.ts.as_ref().and_then(|t| t.0) else {
                    return;
                };
                if self.unused(pid, tid) {
                    return;
                }
                // Beyond the model's range: the builder skips and counts it.
                let start = ts.ns().unwrap_or(Ns::MAX);
                let dur = (e.dur.as_ref().and_then(|d| d.0))
                    .unwrap_or(Micros::Whole(0))
                    .ns()
                    .unwrap_or(Ns::MAX);
                // Process and thread named already, and none of the thread's
                // events kept waiting (its order is kept): straight to the
                // device.
                if let (Some(&(device, ref device_name)), Some(line), false) = (
                    self.devices.get(&pid),
                    self.threads.get(&(pid, tid)),
                    self.waiting.contains(&(pid, tid)),
                ) {
                    let full = e.args.long_name.as_deref().unwrap_or(&e.name);
                    let ops = self
                        .by_device
                        .entry(device)
                        .or_insert_with(|| DeviceOps::new(device, device_name, &self.path));
                    place(ops, line, (&e.name, full), start, dur);
                    return;
                }
                self.waiting.insert((pid, tid));
                let name = self.strings.intern(&e.name);
                let long = e.args.long_name.as_deref().map(|l| self.strings.intern(l));
                self.complete.push(Kept {
                    pid,
                    tid,
                    name,
                    long,
                    start,
                    dur,
                });
            }
            "M" => {
                let Some(label) = &e.args.name else { return };
                match e.name.as_str() {
                    "process_name" => match device_number(label) {
                        Some(d) => {
                            self.devices.insert(pid, (d, label.clone()));
                        }
                        None => {
                            self.not_devices.insert(pid);
                        }
                    },
                    "thread_name" => {
                        self.threads.insert((pid, tid), label.clone());
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }

    fn saw_events(&mut self) {
        self.saw_events = true;
    }

    fn events_again(&mut self, at: Pos) {
        let dropped = self.events;
        *self = Collect {
            path: std::mem::take(&mut self.path),
            again: Some((at, dropped)),
            ..Collect::default()
        };
    }
}

/// An op of thread `line` (`XLA Ops`, `Stream #N(…)`, `XLA Modules`) on
/// its device; `names`: its short name and its HLO text (or the name
/// again). Other threads' events are not ops.
fn place(ops: &mut DeviceOps, line: &str, (name, full): (&str, &str), start: Ns, dur: Ns) {
    let end = start.saturating_add(dur.max(Ns::ZERO));
    match op_stream(line) {
        Some(stream) => ops.push(full, start, end, stream, line.contains("Memcpy")),
        None if line == MODULES => ops.module(name, start, end),
        None => {}
    }
}

/// Reads one XLA profiler trace from `reader` (already decompressed),
/// streaming its events; one `RankFile` per device with ops. A damaged file
/// is read as far as it is valid, with a warning.
pub fn read(reader: impl Read, path: &Path) -> Result<Vec<(Option<u32>, RankFile)>, Error> {
    let mut c = Collect {
        path: path.to_owned(),
        ..Collect::default()
    };
    let mut warnings = walk(reader, &mut c, path, "an XLA profiler trace", |c| c.events)?;
    if let Some((at, dropped)) = c.again {
        warnings.push(again_warning(path, at, dropped));
    }
    if let Some((at, msg)) = &c.first_skip {
        warnings.push(Warning::damaged(format!(
            "{}: skipped {} event(s) that are not valid trace events; the first at {at}: {msg}",
            path.display(),
            c.skipped
        )));
    }
    let Collect {
        strings,
        devices,
        threads,
        complete,
        mut by_device,
        ..
    } = c;
    // The events that came before their process's or thread's name.
    for e in &complete {
        let Some((device, device_name)) = devices.get(&e.pid) else {
            continue;
        };
        let line = threads.get(&(e.pid, e.tid)).map_or("", String::as_str);
        let name = strings.get(e.name);
        let full = e.long.map_or(name, |l| strings.get(l));
        let ops = by_device
            .entry(*device)
            .or_insert_with(|| DeviceOps::new(*device, device_name, path));
        place(ops, line, (name, full), e.start, e.dur);
    }
    let mut out: Vec<_> = by_device
        .into_values()
        .filter_map(DeviceOps::finish)
        .collect();
    out.sort_by_key(|(rank, _)| *rank);
    if let Some((_, first)) = out.first_mut() {
        first.warnings.splice(0..0, warnings);
    }
    if out.is_empty() {
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: "an XLA profiler trace without device ops (no `/device:TPU:N` or `/device:GPU:N` process with an `XLA Ops` or `Stream #N` thread)".into(),
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::CollKind;

    /// A JAX TPU trace as the profile plugin writes it (structure as in its
    /// GPU traces): two devices, a fusion and an all-reduce on each, an async
    /// all-gather pair on device 1, a host process that is not a device.
    const TRACE: &str = r#"{"displayTimeUnit": "ns", "traceEvents": [
        {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:TPU:0"}},
        {"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:TPU:1"}},
        {"ph": "M", "pid": 9, "name": "process_name", "args": {"name": "/host:CPU"}},
        {"ph": "M", "pid": 1, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}},
        {"ph": "M", "pid": 1, "tid": 4, "name": "thread_name", "args": {"name": "XLA Modules"}},
        {"ph": "M", "pid": 2, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}},
        {"ph": "X", "pid": 1, "tid": 4, "name": "jit_step", "ts": 0, "dur": 100},
        {"ph": "X", "pid": 1, "tid": 3, "name": "fusion.1", "ts": 1, "dur": 10,
         "args": {"long_name": "%fusion.1 = f32[8] fusion(f32[8] %p), kind=kLoop"}},
        {"ph": "X", "pid": 1, "tid": 3, "name": "all-reduce.2", "ts": 11, "dur": 4,
         "args": {"long_name": "%all-reduce.2 = f32[8] all-reduce(f32[8] %fusion.1), to_apply=%add"}},
        {"ph": "X", "pid": 2, "tid": 3, "name": "all-gather-start", "ts": 2, "dur": 0.5,
         "args": {"long_name": "%all-gather-start = (f32[2], f32[8]) all-gather-start(f32[2] %p)"}},
        {"ph": "X", "pid": 2, "tid": 3, "name": "fusion.3", "ts": 3, "dur": 5},
        {"ph": "X", "pid": 2, "tid": 3, "name": "all-gather-done", "ts": 9, "dur": 1,
         "args": {"long_name": "%all-gather-done = f32[8] all-gather-done((f32[2], f32[8]) %all-gather-start)"}},
        {"ph": "X", "pid": 9, "tid": 1, "name": "host op", "ts": 0, "dur": 50}
    ]}"#;

    /// A training loop: `jit_train_step` (its fingerprint in the name) run
    /// three times on the device, a one-off `jit_init` before; from one run
    /// to the next is a step, and each op is in the step it started in.
    #[test]
    fn repeated_program_runs_are_the_steps() {
        let trace = r#"{"traceEvents": [
            {"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:TPU:0"}},
            {"ph": "M", "pid": 1, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}},
            {"ph": "M", "pid": 1, "tid": 4, "name": "thread_name", "args": {"name": "XLA Modules"}},
            {"ph": "X", "pid": 1, "tid": 4, "name": "jit_init(77)", "ts": 0, "dur": 5},
            {"ph": "X", "pid": 1, "tid": 3, "name": "fusion.0", "ts": 1, "dur": 3},
            {"ph": "X", "pid": 1, "tid": 4, "name": "jit_train_step(12190760917235803885)", "ts": 10, "dur": 20},
            {"ph": "X", "pid": 1, "tid": 3, "name": "fusion.1", "ts": 11, "dur": 10},
            {"ph": "X", "pid": 1, "tid": 4, "name": "jit_train_step(12190760917235803885)", "ts": 40, "dur": 25},
            {"ph": "X", "pid": 1, "tid": 3, "name": "fusion.1", "ts": 41, "dur": 10},
            {"ph": "X", "pid": 1, "tid": 4, "name": "jit_train_step(12190760917235803885)", "ts": 70, "dur": 20},
            {"ph": "X", "pid": 1, "tid": 3, "name": "fusion.1", "ts": 71, "dur": 10}
        ]}"#;
        let files = read(trace.as_bytes(), Path::new("t.trace.json")).unwrap();
        let t = &files[0].1.timeline;
        let steps: Vec<(i64, i64, i64)> = (t.steps.iter())
            .map(|s| (s.number, s.start.get(), s.end.get()))
            .collect();
        assert_eq!(
            steps,
            [
                (0, 10_000, 40_000),
                (1, 40_000, 70_000),
                (2, 70_000, 90_000)
            ]
        );
        let in_step: Vec<Option<u32>> = t.ops.iter().map(|o| o.step.get()).collect();
        assert_eq!(in_step, [None, Some(0), Some(1), Some(2)]);
        assert_eq!(
            t.steps_used(),
            "step 1 of steps 0-2 (first and last left out; --all-steps keeps them) \
             (runs of the XLA program jit_train_step: no step markers in the trace)"
        );
    }

    #[test]
    fn devices_become_ranks_with_hlo_collectives() {
        let files = read(TRACE.as_bytes(), Path::new("t.trace.json")).unwrap();
        let ops = |i: usize| {
            let t = &files[i].1.timeline;
            t.ops
                .iter()
                .map(|o| {
                    (
                        t.strings.get(o.name).to_owned(),
                        o.start.get(),
                        o.dur.get(),
                        o.coll,
                    )
                })
                .collect::<Vec<_>>()
        };
        assert_eq!(
            files.iter().map(|f| f.0).collect::<Vec<_>>(),
            vec![Some(0), Some(1)]
        );
        // Device 0: the fusion and a 4 µs all-reduce; `XLA Modules` is not ops.
        assert_eq!(
            ops(0),
            vec![
                ("fusion.1".into(), 1000, 10_000, None),
                (
                    "all-reduce.2".into(),
                    11_000,
                    4000,
                    Some(CollKind::AllReduce)
                ),
            ]
        );
        // Device 1: the all-gather in flight from 2 µs to 10 µs, over the fusion.
        assert_eq!(
            ops(1),
            vec![
                (
                    "all-gather-start".into(),
                    2000,
                    8000,
                    Some(CollKind::AllGather)
                ),
                ("fusion.3".into(), 3000, 5000, None),
            ]
        );
        let none = read(&br#"{"traceEvents": []}"#[..], Path::new("t.json")).unwrap_err();
        assert!(none.to_string().contains("without device ops"), "{none}");

        // The profiler may name processes and threads after their events:
        // the same ops whether every name comes first, last, or device 1's
        // op thread is named mid-way (its async pair then kept in order).
        let meta = [
            r#"{"ph": "M", "pid": 1, "name": "process_name", "args": {"name": "/device:TPU:0"}}"#,
            r#"{"ph": "M", "pid": 2, "name": "process_name", "args": {"name": "/device:TPU:1"}}"#,
            r#"{"ph": "M", "pid": 1, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}}"#,
        ];
        let late_thread = r#"{"ph": "M", "pid": 2, "tid": 3, "name": "thread_name", "args": {"name": "XLA Ops"}}"#;
        let events = [
            r#"{"ph": "X", "pid": 1, "tid": 3, "name": "fusion.1", "ts": 1, "dur": 10}"#,
            r#"{"ph": "X", "pid": 2, "tid": 3, "name": "all-gather-start", "ts": 2, "dur": 0.5, "args": {"long_name": "%all-gather-start = (f32[2], f32[8]) all-gather-start(f32[2] %p)"}}"#,
            r#"{"ph": "X", "pid": 2, "tid": 3, "name": "fusion.3", "ts": 3, "dur": 5}"#,
            r#"{"ph": "X", "pid": 2, "tid": 3, "name": "all-gather-done", "ts": 9, "dur": 1, "args": {"long_name": "%all-gather-done = f32[8] all-gather-done((f32[2], f32[8]) %all-gather-start)"}}"#,
        ];
        let doc = |lines: Vec<&str>| format!("{{\"traceEvents\": [{}]}}", lines.join(",\n"));
        let key = |files: &[(Option<u32>, RankFile)]| -> Vec<(u32, String, i64, i64)> {
            files
                .iter()
                .flat_map(|(_, f)| {
                    let t = &f.timeline;
                    t.ops.iter().map(move |o| {
                        (
                            t.rank,
                            t.strings.get(o.name).to_owned(),
                            o.start.get(),
                            o.dur.get(),
                        )
                    })
                })
                .collect()
        };
        let first: Vec<&str> = meta
            .iter()
            .chain([&late_thread])
            .chain(&events)
            .copied()
            .collect();
        let want = key(&read(doc(first).as_bytes(), Path::new("t.json")).unwrap());
        assert_eq!(want.len(), 3, "{want:?}");
        assert_eq!(want[1], (1, "all-gather-start".into(), 2000, 8000));
        let last: Vec<&str> = events
            .iter()
            .chain(&meta)
            .chain([&late_thread])
            .copied()
            .collect();
        let mid: Vec<&str> = meta
            .iter()
            .chain(&events[..2])
            .chain([&late_thread])
            .chain(&events[2..])
            .copied()
            .collect();
        for lines in [last, mid] {
            let text = doc(lines);
            assert_eq!(
                key(&read(text.as_bytes(), Path::new("t.json")).unwrap()),
                want,
                "{text}"
            );
        }
    }

    #[test]
    fn damaged_events_are_skipped_and_a_cut_file_read_as_far_as_it_goes() {
        // An event with a bad value is skipped and counted, with its place.
        let damaged = TRACE.replacen(r#""ts": 3, "dur": 5"#, r#""ts": 3, "dur": 5x"#, 1);
        let files = read(damaged.as_bytes(), Path::new("t.json")).unwrap();
        let warnings = &files[0].1.warnings;
        assert!(
            warnings[0].text.starts_with("t.json: skipped 1 event(s) that are not valid trace events; the first at line 15, column 78: expected `,` or `}`"),
            "{warnings:?}"
        );
        assert_eq!(files[1].1.timeline.ops.len(), 1, "the all-gather is kept");
        // Cut after device 0's all-reduce: device 0 is whole, device 1 is not there.
        let cut = &TRACE[..TRACE.find("all-gather-start\", \"ts\"").unwrap()];
        let files = read(cut.as_bytes(), Path::new("t.json")).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].1.timeline.ops.len(), 2);
        assert!(
            files[0].1.warnings[0].text.contains("an XLA profiler trace cut off or damaged at line 13, column 9 (unexpected end of file); read the 9 complete events"),
            "{:?}",
            files[0].1.warnings
        );
    }
}
