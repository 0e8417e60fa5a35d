//! CUDA memory snapshots (`torch.cuda.memory._dump_snapshot`): a pickled dict
//! with `segments` (the allocator's state) and `device_traces` (its recent
//! history). Read with the project's data-only pickle decoder (`pickle_tree`):
//! no pickle code runs, class references are refused, and a frame dict the
//! pickle shares between events (PyTorch writes each once) is read where it
//! is named rather than copied.

use crate::model::Warning;
use std::collections::HashMap;
use std::io::Read;
use std::path::Path;
use std::sync::Arc;

use super::pickle_tree::{Tree, V};
use crate::error::Error;
use crate::model::memory::{MemSample, MemState, MemoryTimeline, Phase, Samples, PEAK_SITES};
use crate::model::strings::StrId;

struct Segment {
    device: i64,
    total_size: i64,
    allocated_size: i64,
    active_size: i64,
    requested_size: i64,
}

/// The snapshot's fields from its decoded pickle (the history taken out):
/// a dict with `segments` (a list) and, when history was recorded,
/// `device_traces`, a list per device (its index in the tree, or none where
/// it is not a list).
fn parts(t: &Tree) -> Result<(Vec<Segment>, Vec<Option<u32>>), String> {
    let root = t.root.ok_or("an empty pickle")?;
    let Some(segs @ V::List(_)) = t.get(root, "segments") else {
        return Err("no `segments` list".into());
    };
    let int = |v: V, key: &str| t.get(v, key).and_then(V::int).unwrap_or(0);
    let segments = t
        .list(segs)
        .iter()
        .map(|&g| Segment {
            device: int(g, "device"),
            total_size: int(g, "total_size"),
            allocated_size: int(g, "allocated_size"),
            active_size: int(g, "active_size"),
            requested_size: int(g, "requested_size"),
        })
        .collect();
    let traces = t
        .get(root, "device_traces")
        .map(|d| t.list(d))
        .unwrap_or_default()
        .iter()
        .map(|d| match d {
            V::List(i) => Some(*i),
            _ => None,
        })
        .collect();
    Ok((segments, traces))
}

/// One device's history as it is read (`device_traces[i]`), made into
/// samples as it comes: each entry that changes a byte count is a sample,
/// its bytes counted from zero until the end says what the history began
/// from ([`History::finish`]); the blocks live at the allocation peak are
/// followed by site as the entries come, so that no entry is kept.
#[derive(Default)]
struct History {
    /// Entries of any action (the busiest device is the rank's).
    entries: usize,
    /// The last time seen: an entry without one happened then.
    last_t: i64,
    /// A sample after each entry that changes a byte count, the first
    /// before them; bytes from zero.
    samples: Samples,
    /// The bytes after the last entry, from zero.
    allocated: i64,
    reserved: i64,
    /// The most allocated so far (the first sample of it is the peak).
    most: i64,
    /// Each block allocated in the history and not freed yet: its size,
    /// site and phase (a block from before the history is freed from
    /// `Phase::Before`).
    live: foldhash::HashMap<u64, (i64, u32, Phase)>,
    /// By site, the bytes and blocks live at the peak so far, and what
    /// changed since then (added to them when a new peak comes).
    at_peak: foldhash::HashMap<u32, (i64, i64)>,
    since_peak: foldhash::HashMap<u32, (i64, i64)>,
    /// Allocation sites, each named once.
    sites: crate::model::strings::Interner,
    allocs: u64,
    frees: u64,
}

impl History {
    fn add(&mut self, action: &str, time_us: Option<i64>, size: i64, addr: Option<u64>, at: Site) {
        self.entries += 1;
        let t = time_us.unwrap_or(self.last_t);
        self.last_t = t;
        // A free counts when the block is back in the allocator, which is
        // when `free_completed` comes (after streams using it are done).
        let (da, dr, phase) = match action {
            "alloc" => {
                self.allocs += 1;
                let (site, phase) = at();
                let site = self.sites.intern(&site).0;
                if let Some(a) = addr {
                    if let Some((size, site, _)) = self.live.insert(a, (size, site, phase)) {
                        self.changed(site, size.wrapping_neg(), -1);
                    }
                    self.changed(site, size, 1);
                }
                (size, 0, phase)
            }
            "free_completed" => {
                self.frees += 1;
                let phase = match addr.and_then(|a| self.live.remove(&a)) {
                    Some((size, site, phase)) => {
                        self.changed(site, size.wrapping_neg(), -1);
                        phase
                    }
                    None => Phase::Before,
                };
                (size.wrapping_neg(), 0, phase)
            }
            "segment_alloc" | "segment_map" => (0, size, Phase::Before),
            "segment_free" | "segment_unmap" => (0, size.wrapping_neg(), Phase::Before),
            _ => return,
        };
        if self.samples.is_empty() {
            self.samples.push(MemSample {
                time_us: t,
                allocated: 0,
                reserved: 0,
                phase: Phase::Before,
            });
        }
        self.allocated = self.allocated.wrapping_add(da);
        self.reserved = self.reserved.wrapping_add(dr);
        self.samples.push(MemSample {
            time_us: t,
            allocated: self.allocated,
            reserved: self.reserved,
            phase,
        });
        if self.allocated > self.most {
            self.most = self.allocated;
            for (site, (bytes, blocks)) in self.since_peak.drain() {
                let p = self.at_peak.entry(site).or_default();
                *p = (p.0.wrapping_add(bytes), p.1 + blocks);
            }
        }
    }

    /// A block of `site` allocated (`blocks` 1) or freed (-1).
    fn changed(&mut self, site: u32, bytes: i64, blocks: i64) {
        let c = self.since_peak.entry(site).or_default();
        *c = (c.0.wrapping_add(bytes), c.1 + blocks);
    }

    /// The samples of a history that ends in `end` (as
    /// [`replay`](crate::model::memory::replay) makes
    /// them) and the bytes live at the allocation peak by site, largest
    /// first.
    fn finish(self, end: MemState) -> (Samples, Vec<(String, i64)>) {
        let mut samples = self.samples;
        if samples.is_empty() {
            samples.push(MemSample {
                time_us: 0,
                allocated: 0,
                reserved: 0,
                phase: Phase::Before,
            });
        }
        samples.add(
            end.allocated.wrapping_sub(self.allocated),
            end.reserved.wrapping_sub(self.reserved),
        );
        let mut by_site: Vec<(u32, i64)> = (self.at_peak.into_iter())
            .filter(|(_, (_, blocks))| *blocks > 0)
            .map(|(site, (bytes, _))| (site, bytes))
            .collect();
        by_site.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        let sites = self.sites;
        let peak_sites = (by_site.into_iter().take(PEAK_SITES))
            .map(|(id, bytes)| (sites.get(StrId(id)).to_owned(), bytes))
            .collect();
        (samples, peak_sites)
    }
}

/// An allocation's site and phase, worked out when asked.
type Site<'s> = &'s mut dyn FnMut() -> (Arc<str>, Phase);

struct Frame {
    name: String,
    filename: String,
    line: i64,
}

/// Site and phase by stack: PyTorch writes each frame dict once and names
/// it again, and most allocations repeat one of a few thousand stacks. A
/// frame is numbered by its text, found once per frame dict; the decoder
/// renumbers dicts as it lets others go, so the dicts' numbers are
/// forgotten when it does ([`Stacks::forget_dicts`]), the frames' are kept.
#[derive(Default)]
struct Stacks {
    frame_of_dict: foldhash::HashMap<u32, u32>,
    /// Frame numbers by a hash of their text (the next slot on a clash).
    by_hash: foldhash::HashMap<u64, u32>,
    frames: Vec<Frame>,
    by_stack: foldhash::HashMap<Vec<u32>, (Arc<str>, Phase)>,
    key: Vec<u32>,
}

impl Stacks {
    fn forget_dicts(&mut self) {
        self.frame_of_dict.clear();
    }

    /// The number of the frame written as frame dict `f`.
    fn frame(&mut self, t: &Tree, f: V) -> u32 {
        let text = |key: &str| t.get(f, key).and_then(|v| t.str(v)).unwrap_or_default();
        let (name, filename) = (text("name"), text("filename"));
        let line = t.get(f, "line").and_then(V::int).unwrap_or(0);
        let mut h = {
            use std::hash::BuildHasher;
            foldhash::fast::FixedState::with_seed(0).hash_one((filename, name, line))
        };
        loop {
            match self.by_hash.get(&h) {
                Some(&id) => {
                    let g = &self.frames[id as usize];
                    if (g.filename.as_str(), g.name.as_str(), g.line) == (filename, name, line) {
                        return id;
                    }
                    h = h.wrapping_add(1);
                }
                None => {
                    let id = self.frames.len() as u32;
                    self.frames.push(Frame {
                        name: name.to_owned(),
                        filename: filename.to_owned(),
                        line,
                    });
                    self.by_hash.insert(h, id);
                    return id;
                }
            }
        }
    }

    fn site(&mut self, t: &Tree, frames: &[V]) -> (Arc<str>, Phase) {
        let mut key = std::mem::take(&mut self.key);
        key.clear();
        for &f in frames {
            let known = match f {
                V::Dict(i) => self.frame_of_dict.get(&i).copied(),
                _ => None,
            };
            let id = known.unwrap_or_else(|| {
                let id = self.frame(t, f);
                if let V::Dict(i) = f {
                    self.frame_of_dict.insert(i, id);
                }
                id
            });
            key.push(id);
        }
        let found = match self.by_stack.get(&key) {
            Some(hit) => hit.clone(),
            None => {
                let stack: Vec<&Frame> = key.iter().map(|&i| &self.frames[i as usize]).collect();
                let phase =
                    Phase::of_stack(stack.iter().map(|f| (f.filename.as_str(), f.name.as_str())));
                let found = (Arc::from(site(&stack)), phase);
                self.by_stack.insert(key.clone(), found.clone());
                found
            }
        };
        self.key = key;
        found
    }
}

/// What the reader keeps as the stream goes.
#[derive(Default)]
struct Reading {
    /// Each `device_traces` list's history, by the list's container.
    histories: HashMap<u32, History>,
    stacks: Stacks,
    /// Dicts seen not to be history entries (frames, offered each time a
    /// stack names them), by container, until the decoder renumbers them.
    not_entries: Vec<u64>,
    generation: u32,
}

impl Reading {
    /// Takes a `device_traces` entry (a dict with an `action`) into the
    /// history of the list it is added to.
    fn take(&mut self, t: &Tree, list: u32, e: V) -> bool {
        let V::Dict(i) = e else {
            return false;
        };
        if t.generation() != self.generation {
            self.generation = t.generation();
            self.not_entries.clear();
            self.stacks.forget_dicts();
        }
        let (w, b) = (i as usize / 64, i % 64);
        if self
            .not_entries
            .get(w)
            .is_some_and(|bits| bits >> b & 1 == 1)
        {
            return false;
        }
        let Some(action) = t.get(e, "action").and_then(|v| t.str(v)) else {
            if self.not_entries.len() <= w {
                self.not_entries.resize(w + 1, 0);
            }
            self.not_entries[w] |= 1 << b;
            return false;
        };
        let size = t.get(e, "size").and_then(V::int).unwrap_or(0);
        let addr = t
            .get(e, "addr")
            .and_then(V::int)
            .and_then(|a| u64::try_from(a).ok());
        let time_us = t.get(e, "time_us").and_then(V::int);
        let stacks = &mut self.stacks;
        let mut at = || {
            let frames = t.get(e, "frames").map(|f| t.list(f)).unwrap_or_default();
            stacks.site(t, frames)
        };
        self.histories
            .entry(list)
            .or_default()
            .add(action, time_us, size, addr, &mut at);
        true
    }
}

/// Where an allocation was made, as a person looks for it: the innermost
/// Python frame outside PyTorch itself (`model.py:45 forward`), else the
/// innermost Python frame, else (the autograd engine's C++-only stacks) the
/// innermost C++ function past the allocator's own (`C++
/// at::native::structured_sum_out::impl`).
fn site(frames: &[&Frame]) -> String {
    let py = |f: &&&Frame| f.filename.ends_with(".py");
    let own = |f: &&&Frame| !f.filename.contains("/torch/") && !f.filename.contains("\\torch\\");
    let f = frames
        .iter()
        .filter(py)
        .find(own)
        .or_else(|| frames.iter().find(py));
    if let Some(f) = f {
        let file = f.filename.rsplit(['/', '\\']).next().unwrap_or(&f.filename);
        return format!("{file}:{} {}", f.line, f.name);
    }
    // The stack capture and the caching allocator come first in every stack.
    const ALLOCATOR: [&str; 5] = [
        "unwind",
        "CapturedTraceback",
        "gather_with_cpp",
        "Allocator",
        "empty",
    ];
    frames
        .iter()
        .find(|f| !ALLOCATOR.iter().any(|a| f.name.contains(a)))
        .map_or_else(
            || "no stack recorded".to_owned(),
            |f| format!("C++ {}", crate::model::classify::bare_name(&f.name)),
        )
}

/// Reads one snapshot, from `open`, which gives its bytes from the start
/// (`true`: the reading to count as the load's progress). It is read twice,
/// a buffer at a time and never held whole: for the bounds and the memo's
/// keys read back, then to take each history entry as it comes. The device
/// with the most history is the rank's (a process normally uses one);
/// `rank` is assigned by the caller.
pub fn read<R: Read>(
    open: impl Fn(bool) -> Result<R, Error>,
    path: &Path,
) -> Result<(MemoryTimeline, Vec<Warning>), Error> {
    let not = |why: String| Error::NotATrace {
        path: path.to_owned(),
        why,
    };
    // Bounded before decoding: reading walks a reused value each time it is
    // named, and nesting a million deep is refused here rather than walked.
    let gets = super::pickle_budget::check_gets(open(false)?).map_err(|why| {
        not(if why.starts_with("it ends") {
            format!("a pickle cut off before its end ({why}): written only in part?")
        } else {
            format!("a pickle that cannot be decoded within bounds: {why}")
        })
    })?;
    // What the bounds pass held is let go before the history is taken
    // (mimalloc would keep it resident a second: 11 of a 71 MB snapshot's
    // 44 MB).
    crate::memory::let_go();
    // The history is taken entry by entry as the stream goes (a snapshot is
    // mostly history, each entry with its stack): only the replay's figures
    // are kept of it, never the decoded entries.
    let mut reading = Reading::default();
    let mut take = |t: &Tree, list: u32, v: V| reading.take(t, list, v);
    let notes = |e: String| {
        not(format!(
            "not a CUDA memory snapshot (torch.cuda.memory._dump_snapshot pickle with `segments`): {e}"
        ))
    };
    let tree = super::pickle_tree::decode_taking(open(true)?, gets, &mut take).map_err(notes)?;
    let (segments, traces) = parts(&tree).map_err(notes)?;
    drop(tree);
    crate::memory::let_go();
    // Each device's history, in `device_traces` order (empty where none).
    let mut history: Vec<History> = traces
        .iter()
        .map(|id| {
            id.and_then(|i| reading.histories.remove(&i))
                .unwrap_or_default()
        })
        .collect();
    let mut warnings = Vec::new();
    let device = history
        .iter()
        .enumerate()
        .max_by_key(|(i, h)| (h.entries, std::cmp::Reverse(*i)))
        .filter(|(_, h)| h.entries > 0)
        .map(|(i, _)| i as i64)
        .or_else(|| segments.first().map(|s| s.device))
        .unwrap_or(0);
    let busy = history.iter().filter(|h| h.entries > 0).count();
    if busy > 1 {
        warnings.push(Warning::reading(format!(
            "{}: allocator history on {busy} devices; showing device {device}, the busiest",
            path.display()
        )));
    }
    let mut end = MemState::default();
    for s in segments.iter().filter(|s| s.device == device) {
        end.allocated += s.allocated_size;
        end.reserved += s.total_size;
        end.active += s.active_size;
        end.requested += s.requested_size;
    }
    let h = usize::try_from(device)
        .ok()
        .and_then(|d| history.get_mut(d))
        .map(std::mem::take)
        .unwrap_or_default();
    drop(history);
    if h.entries == 0 {
        warnings.push(Warning::reading(format!(
            "{}: no allocator history (record it with torch.cuda.memory._record_memory_history()); peaks are the state at snapshot time",
            path.display()
        )));
    }
    let (allocs, frees) = (h.allocs, h.frees);
    let (samples, peak_sites) = h.finish(end);
    if samples.iter().any(|s| s.allocated < 0 || s.reserved < 0) {
        warnings.push(Warning::damaged(format!(
            "{}: the allocator history does not add up to the snapshot's state (negative bytes in the replay); the memory chart is approximate",
            path.display()
        )));
    }
    let m = MemoryTimeline {
        rank: 0,
        source: path.to_owned(),
        samples,
        end,
        allocs,
        frees,
        peak_sites,
    };
    Ok((m, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::jit_pickle::{to_vec, P};
    use std::rc::Rc;

    /// A snapshot of one 2 MiB segment with `allocated` bytes in use, and
    /// `trace` as device 0's history.
    fn snapshot(trace: P, allocated: i64) -> P {
        let segment = P::dict([
            ("device", P::Int(0)),
            ("total_size", P::Int(2 << 20)),
            ("allocated_size", P::Int(allocated)),
            ("active_size", P::Int(allocated)),
            ("requested_size", P::Int(allocated)),
        ]);
        P::dict([
            ("segments", P::List(vec![segment])),
            ("device_traces", P::List(vec![trace])),
        ])
    }

    fn read_pickle(bytes: &[u8]) -> Result<(MemoryTimeline, Vec<Warning>), Error> {
        read(|_| Ok(bytes), Path::new("rank0_memory_snapshot.pickle"))
    }

    /// A snapshot cut off part way is refused as such, naming the file.
    /// An entry for [`History::add`]: (action, time, size, address, site).
    type Entry = (&'static str, i64, i64, Option<u64>, &'static str);

    fn history(entries: &[Entry]) -> History {
        let mut h = History::default();
        for &(action, t, size, addr, site) in entries {
            h.add(action, Some(t), size, addr, &mut || {
                (Arc::from(site), Phase::Forward)
            });
        }
        h
    }

    /// The bytes live at the peak by site, worked by hand: sites x and y
    /// allocate 80, 50 and 20 bytes (the peak, 150 live: x 100, y 50), then
    /// x's first block and a block from before the history are freed.
    #[test]
    fn live_bytes_by_site_at_the_peak() {
        let h = history(&[
            ("alloc", 1, 80, Some(1), "x"),
            ("alloc", 2, 50, Some(2), "y"),
            ("alloc", 3, 20, Some(3), "x"),
            ("free_completed", 4, 80, Some(1), ""),
            ("free_completed", 5, 30, Some(99), ""),
        ]);
        let end = MemState {
            allocated: 70,
            reserved: 2 << 20,
            ..MemState::default()
        };
        let (samples, sites) = h.finish(end);
        // Before the history: 70 - (150 - 80 - 30) = 30 allocated.
        let allocated: Vec<i64> = samples.iter().map(|s| s.allocated).collect();
        assert_eq!(allocated, vec![30, 110, 160, 180, 100, 70]);
        assert!(samples.iter().all(|s| s.reserved == 2 << 20));
        let phases: Vec<Phase> = samples.iter().map(|s| s.phase).collect();
        assert_eq!(phases[4..], [Phase::Forward, Phase::Before]);
        assert_eq!(sites, vec![("x".to_owned(), 100), ("y".to_owned(), 50)]);
    }

    /// No history: one sample, the snapshot's state, and no sites.
    #[test]
    fn no_history_is_the_state_at_snapshot_time() {
        let end = MemState {
            allocated: 70,
            reserved: 90,
            ..MemState::default()
        };
        let (samples, sites) = History::default().finish(end);
        let s: Vec<MemSample> = samples.iter().collect();
        assert_eq!(s.len(), 1);
        assert_eq!((s[0].time_us, s[0].allocated, s[0].reserved), (0, 70, 90));
        assert!(sites.is_empty());
    }

    /// The samples made as the entries come are the replay's, and the
    /// peak's sites those of the blocks live after the entries before the
    /// first most allocated sample (worked out afresh from every entry):
    /// 70,000 entries, with segments, a block allocated again at the same
    /// address, frees of blocks from before the history, and a peak first
    /// reached midway.
    #[test]
    fn samples_as_they_come_are_the_replays() {
        let mut entries: Vec<Entry> = vec![("segment_alloc", 0, 1 << 20, None, "")];
        for i in 1..35_000u64 {
            let t = i as i64;
            let site = ["a", "b", "c"][(i % 3) as usize];
            entries.push(("alloc", t, 100 + (i % 7) as i64, Some(i), site));
            if i > 1 {
                entries.push((
                    "free_completed",
                    t,
                    100 + ((i - 1) % 7) as i64,
                    Some(i - 1),
                    "",
                ));
            }
            if i == 20_000 {
                entries.push(("alloc", t, 5_000, Some(1 << 40), "d"));
                entries.push(("alloc", t, 7_000, Some(1 << 40), "e"));
                entries.push(("segment_alloc", t, 2 << 20, None, ""));
            }
            if i % 1_000 == 0 {
                entries.push(("free_completed", t, 64, Some(1 << 50 | i), ""));
            }
        }
        entries.push(("free_completed", 35_000, 7_000, Some(1 << 40), ""));
        let end = MemState {
            allocated: 100_000,
            reserved: 8 << 20,
            ..MemState::default()
        };
        let (samples, sites) = history(&entries).finish(end);
        // Afresh: each entry's change, and the blocks live before the peak.
        let delta = |&(action, t, size, _, _): &Entry| match action {
            "alloc" => (t, size, 0),
            "free_completed" => (t, -size, 0),
            _ => (t, 0, size),
        };
        let replayed = crate::model::memory::replay(
            end,
            entries.iter().map(|e| {
                let (t, da, dr) = delta(e);
                (t, da, dr, Phase::Before)
            }),
        );
        assert_eq!(samples.len(), entries.len() + 1);
        assert!(samples.iter().zip(replayed.iter()).all(|(s, r)| (
            s.time_us,
            s.allocated,
            s.reserved
        ) == (
            r.time_us,
            r.allocated,
            r.reserved
        )));
        let m = MemoryTimeline {
            samples,
            ..MemoryTimeline::default()
        };
        let peak = m.peak_index().expect("a peak");
        assert!(peak > 40_000, "the peak follows the blocks of d and e");
        let mut live: HashMap<u64, (i64, &str)> = HashMap::new();
        for &(action, _, size, addr, site) in &entries[..peak] {
            match (action, addr) {
                ("alloc", Some(a)) => {
                    live.insert(a, (size, site));
                }
                ("free_completed", Some(a)) => {
                    live.remove(&a);
                }
                _ => {}
            }
        }
        let mut by: HashMap<&str, i64> = HashMap::new();
        for (size, site) in live.into_values() {
            *by.entry(site).or_default() += size;
        }
        let mut want: Vec<(String, i64)> = by.into_iter().map(|(s, b)| (s.to_owned(), b)).collect();
        want.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        assert_eq!(sites, want);
        assert_eq!(sites[0], ("e".to_owned(), 7_000));
    }

    #[test]
    fn a_snapshot_cut_off_says_so() {
        let snap = P::dict([("segments", P::List(vec![P::str("x".repeat(100))]))]);
        let bytes = to_vec(&snap);
        let cut = &bytes[..bytes.len() - 60];
        let e = read_pickle(cut).unwrap_err().to_string();
        assert!(
            e.contains("rank0_memory_snapshot.pickle") && e.contains("cut off before its end"),
            "{e}"
        );
    }

    /// A history of thousands of entries laid out as Python pickles it
    /// (taken a batch of 1,000 at a time, the decoder renumbering what it
    /// keeps in between), a stack's frames first written half-way, and an
    /// allocation's frames list shared with its `free_requested`, as
    /// PyTorch shares it: each allocation keeps its own stack's site.
    #[test]
    fn a_long_history_keeps_each_stack_across_batches() {
        use crate::synth::jit_pickle::to_vec_as_python;
        let frame = |name: &str, file: &str, line| {
            Rc::new(P::dict([
                ("name", P::str(name)),
                ("filename", P::str(file)),
                ("line", P::Int(line)),
            ]))
        };
        let alloc = frame("malloc", "CUDACachingAllocator.cpp", 0);
        let fwd = frame("forward", "/app/model.py", 45);
        let step = frame("step", "/app/train.py", 12);
        let mut trace = Vec::new();
        // 3,000 allocations of 10 bytes, never freed; from the 1,500th on
        // every other one from train.py's stack, written for the first
        // time then. Each is followed by an unrelated block's free request
        // sharing its frames list (a free of a block that is never freed:
        // it changes no byte count).
        for i in 0..3000i64 {
            let top = if i >= 1500 && i % 2 == 1 { &step } else { &fwd };
            let frames = Rc::new(P::List(vec![
                P::Shared(alloc.clone()),
                P::Shared(top.clone()),
            ]));
            let ev = |action: &str, addr: i64| {
                P::dict([
                    ("action", P::str(action)),
                    ("addr", P::Int(addr)),
                    ("size", P::Int(10)),
                    ("stream", P::Int(0)),
                    ("time_us", P::Int(i)),
                    ("frames", P::Shared(frames.clone())),
                ])
            };
            trace.push(ev("alloc", 0x1000 + 16 * i));
            trace.push(ev("free_requested", 0x10_0000 + 16 * i));
        }
        let snap = snapshot(P::List(trace), 30_000);
        let bytes = to_vec_as_python(&snap);
        let (m, warnings) = read_pickle(&bytes).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!((m.allocs, m.frees), (3000, 0));
        // 2,250 from model.py (all of the first 1,500, then half), 750
        // from train.py.
        assert_eq!(
            m.peak_sites,
            [
                ("model.py:45 forward".to_owned(), 22_500),
                ("train.py:12 step".to_owned(), 7_500)
            ]
        );
        assert_eq!(m.samples.first().map(|s| s.allocated), Some(0));
        assert_eq!(m.samples.last().map(|s| s.allocated), Some(30_000));
    }

    /// Allocations from two stacks, each frame dict written once and named
    /// again, as PyTorch's snapshot shares them: the site and phase of each
    /// allocation are its own stack's, whether worked out or found again.
    #[test]
    fn allocations_take_their_own_stacks_site_when_frames_are_shared() {
        let frame = |name: &str, file: &str, line| {
            P::Shared(Rc::new(P::dict([
                ("name", P::str(name)),
                ("filename", P::str(file)),
                ("line", P::Int(line)),
            ])))
        };
        let alloc = frame("malloc", "CUDACachingAllocator.cpp", 0);
        let fwd = frame("forward", "/app/model.py", 45);
        let step = frame("step", "/app/train.py", 12);
        let opt = frame(
            "step",
            "/usr/lib/python3/site-packages/torch/optim/adamw.py",
            200,
        );
        let ev = |t, addr, size, frames: &[&P], action: &str| {
            P::dict([
                ("action", P::str(action)),
                ("addr", P::Int(addr)),
                ("size", P::Int(size)),
                ("stream", P::Int(0)),
                ("time_us", P::Int(t)),
                (
                    "frames",
                    P::List(frames.iter().map(|&f| f.clone()).collect()),
                ),
            ])
        };
        let trace = P::List(vec![
            ev(1, 0x1000, 100, &[&alloc, &fwd, &step], "alloc"),
            ev(2, 0x2000, 50, &[&alloc, &opt, &step], "alloc"),
            // The first stack again, in a list of its own.
            ev(3, 0x3000, 25, &[&alloc, &fwd, &step], "alloc"),
            ev(4, 0x2000, 50, &[], "free_completed"),
        ]);
        let snap = snapshot(trace, 125);
        let bytes = to_vec(&snap);
        let (m, warnings) = read_pickle(&bytes).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        assert_eq!((m.allocs, m.frees), (3, 1));
        // The peak (175 B, before the free) holds both model.py allocations.
        assert_eq!(
            m.peak_sites,
            [
                ("model.py:45 forward".to_owned(), 125),
                ("train.py:12 step".to_owned(), 50)
            ]
        );
    }
}
