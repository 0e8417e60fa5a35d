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

use super::blocks::Blocks;
use super::pickle_tree::{Tree, V};
use crate::error::Error;
use crate::model::memory::{
    live_by_site, Block, MemSample, MemState, MemoryTimeline, Phase, Samples, PEAK_SITES,
};
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

/// One device's history as it is read (`device_traces[i]`): what the
/// replay and the peak's sites need of each entry, in the entries' order.
#[derive(Default)]
struct History {
    /// Entries of any action (the busiest device is the rank's).
    entries: usize,
    /// The last time seen: an entry without one happened then.
    last_t: i64,
    /// Each entry that changes a byte count, in order.
    counted: Blocks<Counted>,
    /// The phase of each block allocated in the history, for its free; a
    /// block from before the history is freed from `Phase::Before`.
    phase_of: foldhash::HashMap<u64, Phase>,
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
        let (kind, site, phase) = match action {
            "alloc" => {
                self.allocs += 1;
                let (site, phase) = at();
                if let Some(a) = addr {
                    self.phase_of.insert(a, phase);
                }
                (Kind::Alloc, self.sites.intern(&site).0, phase)
            }
            "free_completed" => {
                self.frees += 1;
                let phase = addr
                    .and_then(|a| self.phase_of.remove(&a))
                    .unwrap_or(Phase::Before);
                (Kind::Free, 0, phase)
            }
            "segment_alloc" | "segment_map" => (Kind::Map, 0, Phase::Before),
            "segment_free" | "segment_unmap" => (Kind::Unmap, 0, Phase::Before),
            _ => return,
        };
        self.counted.push(Counted {
            t,
            size,
            addr: addr.unwrap_or(0),
            has_addr: addr.is_some(),
            site,
            kind,
            phase,
        });
    }
}

/// An entry that changes a byte count, in 32 bytes (a snapshot's history
/// holds up to hundreds of thousands).
#[derive(Clone, Copy)]
struct Counted {
    t: i64,
    size: i64,
    addr: u64,
    has_addr: bool,
    /// An allocation's site.
    site: u32,
    kind: Kind,
    phase: Phase,
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Alloc,
    /// A block back in the allocator (`free_completed`: after the streams
    /// using it are done).
    Free,
    /// A segment taken from the driver, or given back.
    Map,
    Unmap,
}

const _: () = assert!(std::mem::size_of::<Counted>() == 32);

impl Counted {
    /// (time, change in allocated, change in reserved, phase), as
    /// [`replay`] takes it.
    fn delta(&self) -> (i64, i64, i64, Phase) {
        match self.kind {
            Kind::Alloc => (self.t, self.size, 0, self.phase),
            Kind::Free => (self.t, -self.size, 0, self.phase),
            Kind::Map => (self.t, 0, self.size, self.phase),
            Kind::Unmap => (self.t, 0, -self.size, self.phase),
        }
    }

    /// The block it allocates or frees, when it has an address.
    fn block(&self) -> Option<Block> {
        let addr = self.addr;
        if !self.has_addr {
            return None;
        }
        match self.kind {
            Kind::Alloc => Some(Block::Alloc {
                addr,
                size: self.size,
                site: self.site,
            }),
            Kind::Free => Some(Block::Free { addr }),
            Kind::Map | Kind::Unmap => None,
        }
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

/// The samples of a history that ends in `end` (as [`replay`] makes them)
/// and the bytes live by site at the allocation peak. Each block of the
/// history becomes a block of samples where it lies (both are 32 bytes an
/// item), once the peak's sites are found: the history and its samples
/// are never held at once.
fn samples(
    end: MemState,
    counted: Blocks<Counted>,
    sites: &crate::model::strings::Interner,
) -> (Samples, Vec<(String, i64)>) {
    let (net_alloc, net_reserved) = (counted.iter()).fold((0i64, 0i64), |(a, r), c| {
        let (_, da, dr, _) = c.delta();
        (a.wrapping_add(da), r.wrapping_add(dr))
    });
    let mut s = MemSample {
        time_us: counted.get(0).map_or(0, |c| c.t),
        allocated: end.allocated.wrapping_sub(net_alloc),
        reserved: end.reserved.wrapping_sub(net_reserved),
        phase: Phase::Before,
    };
    // Sample k follows event k - 1: the blocks live at the peak (the first
    // sample of the most allocated bytes) are those of the events before it.
    let (mut peak, mut most, mut allocated) = (0, s.allocated, s.allocated);
    for (i, c) in counted.iter().enumerate() {
        allocated = allocated.wrapping_add(c.delta().1);
        if allocated > most {
            (peak, most) = (i + 1, allocated);
        }
    }
    let peak_sites = live_by_site(counted.iter().take(peak).filter_map(Counted::block))
        .into_iter()
        .take(PEAK_SITES)
        .map(|(id, bytes)| (sites.get(StrId(id)).to_owned(), bytes))
        .collect();
    let mut out = Samples::default();
    out.push_chunk(vec![s]);
    for block in counted.into_blocks() {
        // Same size and alignment: collected into the block's own memory.
        out.push_chunk(
            block
                .into_iter()
                .map(|c| {
                    let (t, da, dr, phase) = c.delta();
                    s = MemSample {
                        time_us: t,
                        allocated: s.allocated.wrapping_add(da),
                        reserved: s.reserved.wrapping_add(dr),
                        phase,
                    };
                    s
                })
                .collect(),
        );
    }
    (out, peak_sites)
}

const _: () = assert!(
    std::mem::size_of::<Counted>() == std::mem::size_of::<MemSample>()
        && std::mem::align_of::<Counted>() == std::mem::align_of::<MemSample>()
);

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
    let History {
        counted,
        sites,
        allocs,
        frees,
        ..
    } = h;
    let (samples, peak_sites) = samples(end, counted, &sites);
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
    /// The samples made block by block where the history lay are the
    /// replay's, and the peak's sites those live before the first most
    /// allocated sample, across blocks: 70,000 entries, two blocks.
    #[test]
    fn samples_made_in_place_are_the_replays() {
        let mut sites = crate::model::strings::Interner::default();
        let (a, b) = (sites.intern("a.py:1 f").0, sites.intern("b.py:2 g").0);
        let mut counted = Blocks::default();
        let entry = |t, size, addr, site, kind| Counted {
            t,
            size,
            addr,
            has_addr: true,
            site,
            kind,
            phase: Phase::Forward,
        };
        // A segment, then for each i: allocate 100 bytes at `i` (site a),
        // free a's block before it. One block of site b is allocated after
        // the step i = 20,000 and freed at the end, so a's next allocation
        // first makes 300 live: a's blocks 20,000 and 20,001, and b's.
        counted.push(entry(0, 1 << 20, 0, 0, Kind::Map));
        for i in 1..35_000u64 {
            let t = i as i64;
            counted.push(entry(t, 100, i, a, Kind::Alloc));
            if i > 1 {
                counted.push(entry(t, 100, i - 1, 0, Kind::Free));
            }
            if i == 20_000 {
                counted.push(entry(t, 100, 1 << 40, b, Kind::Alloc));
            }
        }
        counted.push(entry(35_000, 100, 1 << 40, 0, Kind::Free));
        assert!(counted.len() > super::super::blocks::BLOCK);
        let end = MemState {
            allocated: 100,
            reserved: 1 << 20,
            ..MemState::default()
        };
        let replayed = crate::model::memory::replay(end, counted.iter().map(Counted::delta));
        let (samples, peak_sites) = samples(end, counted, &sites);
        assert_eq!(samples.len(), replayed.len());
        assert!(samples.iter().eq(replayed.iter()));
        assert_eq!(
            samples.first().map(|s| (s.allocated, s.reserved)),
            Some((0, 0))
        );
        assert_eq!(samples.last().map(|s| s.allocated), Some(100));
        let m = MemoryTimeline {
            samples,
            ..MemoryTimeline::default()
        };
        // Entries: the map (0), a's first (1), two for each i from 2 to
        // 20,000 (2 to 39,999), b's (40,000), a's 20,001st (40,001);
        // sample k follows entry k - 1.
        let peak = m.peak_index().expect("a peak");
        assert_eq!(peak, 40_002);
        assert_eq!(m.samples[peak].allocated, 300);
        assert_eq!(
            peak_sites,
            vec![("a.py:1 f".to_owned(), 200), ("b.py:2 g".to_owned(), 100)]
        );
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
