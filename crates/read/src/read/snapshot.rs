//! CUDA memory snapshots (`torch.cuda.memory._dump_snapshot`): a pickled dict
//! with `segments` (the allocator's state) and `device_traces` (its recent
//! history). Read with the project's data-only pickle decoder (`pickle_tree`):
//! no pickle code runs, class references are refused, and a frame dict the
//! pickle shares between events (PyTorch writes each once) is read where it
//! is named rather than copied.

use crate::model::Warning;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use super::pickle_tree::{Tree, V};
use crate::error::Error;
use crate::model::memory::{
    live_by_site, replay, Block, MemState, MemoryTimeline, Phase, PEAK_SITES,
};
use crate::model::strings::StrId;

struct Snapshot {
    segments: Vec<Segment>,
    device_traces: Vec<Vec<Event>>,
}

struct Segment {
    device: i64,
    total_size: i64,
    allocated_size: i64,
    active_size: i64,
    requested_size: i64,
}

struct Event {
    action: String,
    size: i64,
    time_us: Option<i64>,
    addr: Option<u64>,
    /// Where it was allocated (see [`site`]), for allocations.
    site: Option<Arc<str>>,
    /// The part of the step that allocated it, for allocations.
    phase: Phase,
}

struct Frame<'a> {
    name: &'a str,
    filename: &'a str,
    line: i64,
}

/// The snapshot's fields from its decoded pickle: a dict with `segments`
/// (a list) and, when history was recorded, `device_traces`.
fn snapshot(t: &Tree) -> Result<Snapshot, String> {
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
    // Site and phase by stack: PyTorch writes each frame dict once and
    // names it again, so a stack is the list of its frames' containers, and
    // most allocations repeat one of a few thousand stacks.
    let mut by_stack: HashMap<Vec<u32>, (Arc<str>, Phase)> = HashMap::new();
    let mut where_from = |frames: &[V]| -> (Arc<str>, Phase) {
        let key: Option<Vec<u32>> = frames
            .iter()
            .map(|f| match f {
                V::Dict(i) => Some(*i),
                _ => None,
            })
            .collect();
        if let Some(hit) = key.as_ref().and_then(|k| by_stack.get(k)) {
            return hit.clone();
        }
        let frames: Vec<Frame> = frames
            .iter()
            .map(|&f| Frame {
                name: t.get(f, "name").and_then(|v| t.str(v)).unwrap_or_default(),
                filename: t
                    .get(f, "filename")
                    .and_then(|v| t.str(v))
                    .unwrap_or_default(),
                line: int(f, "line"),
            })
            .collect();
        let phase = Phase::of_stack(frames.iter().map(|f| (f.filename, f.name)));
        let found = (Arc::from(site(&frames)), phase);
        if let Some(k) = key {
            by_stack.insert(k, found.clone());
        }
        found
    };
    let device_traces = t
        .get(root, "device_traces")
        .map(|d| t.list(d))
        .unwrap_or_default()
        .iter()
        .map(|&dev| {
            t.list(dev)
                .iter()
                .map(|&e| {
                    let action = t
                        .get(e, "action")
                        .and_then(|v| t.str(v))
                        .unwrap_or_default();
                    let mut phase = Phase::Before;
                    let site = (action == "alloc").then(|| {
                        let frames = t.get(e, "frames").map(|f| t.list(f)).unwrap_or_default();
                        let (site, p) = where_from(frames);
                        phase = p;
                        site
                    });
                    Event {
                        action: action.to_owned(),
                        size: int(e, "size"),
                        time_us: t.get(e, "time_us").and_then(V::int),
                        addr: t
                            .get(e, "addr")
                            .and_then(V::int)
                            .and_then(|a| u64::try_from(a).ok()),
                        site,
                        phase,
                    }
                })
                .collect()
        })
        .collect();
    Ok(Snapshot {
        segments,
        device_traces,
    })
}

/// Where an allocation was made, as a person looks for it: the innermost
/// Python frame outside PyTorch itself (`model.py:45 forward`), else the
/// innermost Python frame, else (the autograd engine's C++-only stacks) the
/// innermost C++ function past the allocator's own (`C++
/// at::native::structured_sum_out::impl`).
fn site(frames: &[Frame]) -> String {
    let py = |f: &&Frame| f.filename.ends_with(".py");
    let own = |f: &&Frame| !f.filename.contains("/torch/") && !f.filename.contains("\\torch\\");
    let f = frames
        .iter()
        .filter(py)
        .find(own)
        .or_else(|| frames.iter().find(py));
    if let Some(f) = f {
        let file = f.filename.rsplit(['/', '\\']).next().unwrap_or(f.filename);
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
            |f| format!("C++ {}", crate::model::classify::bare_name(f.name)),
        )
}

/// Reads one snapshot. The device with the most history is the rank's (a
/// process normally uses one); `rank` is assigned by the caller.
pub fn read(bytes: &[u8], path: &Path) -> Result<(MemoryTimeline, Vec<Warning>), Error> {
    let not = |why: String| Error::NotATrace {
        path: path.to_owned(),
        why,
    };
    // Bounded before decoding: reading walks a reused value each time it is
    // named, and nesting a million deep is refused here rather than walked.
    let items = super::pickle_budget::check(bytes).map_err(|why| {
        not(format!(
            "a pickle that cannot be decoded within bounds: {why}"
        ))
    })?;
    let snap = super::pickle_tree::decode_sized(bytes, items)
        .and_then(|t| snapshot(&t))
        .map_err(|e| {
            not(format!(
                "not a CUDA memory snapshot (torch.cuda.memory._dump_snapshot pickle with `segments`): {e}"
            ))
        })?;
    let mut warnings = Vec::new();
    let device = snap
        .device_traces
        .iter()
        .enumerate()
        .max_by_key(|(i, t)| (t.len(), std::cmp::Reverse(*i)))
        .filter(|(_, t)| !t.is_empty())
        .map(|(i, _)| i as i64)
        .or_else(|| snap.segments.first().map(|s| s.device))
        .unwrap_or(0);
    let busy = snap.device_traces.iter().filter(|t| !t.is_empty()).count();
    if busy > 1 {
        warnings.push(Warning::reading(format!(
            "{}: allocator history on {busy} devices; showing device {device}, the busiest",
            path.display()
        )));
    }
    let mut end = MemState::default();
    for s in snap.segments.iter().filter(|s| s.device == device) {
        end.allocated += s.allocated_size;
        end.reserved += s.total_size;
        end.active += s.active_size;
        end.requested += s.requested_size;
    }
    let history = usize::try_from(device)
        .ok()
        .and_then(|d| snap.device_traces.get(d))
        .map_or(&[][..], |t| t.as_slice());
    if history.is_empty() {
        warnings.push(Warning::reading(format!(
            "{}: no allocator history (record it with torch.cuda.memory._record_memory_history()); peaks are the state at snapshot time",
            path.display()
        )));
    }
    let (mut allocs, mut frees) = (0, 0);
    let mut last_t = 0;
    // Allocation sites, each named once.
    let mut sites = crate::model::strings::Interner::default();
    let mut blocks: Vec<Option<Block>> = Vec::new();
    // The phase of each block allocated in the history, for its free; a
    // block from before the history is freed from `Phase::Before`.
    let mut phase_of: std::collections::HashMap<u64, Phase> = Default::default();
    let deltas: Vec<(i64, i64, i64, Phase)> = history
        .iter()
        .filter_map(|e| {
            let t = e.time_us.unwrap_or(last_t);
            last_t = t;
            // A free counts when the block is back in the allocator, which is
            // when `free_completed` comes (after streams using it are done).
            let (d, block, phase) = match e.action.as_str() {
                "alloc" => {
                    allocs += 1;
                    if let Some(a) = e.addr {
                        phase_of.insert(a, e.phase);
                    }
                    let site = sites.intern(e.site.as_deref().unwrap_or_default()).0;
                    let block = e.addr.map(|addr| Block::Alloc {
                        addr,
                        size: e.size,
                        site,
                    });
                    ((e.size, 0), block, e.phase)
                }
                "free_completed" => {
                    frees += 1;
                    let phase = e
                        .addr
                        .and_then(|a| phase_of.remove(&a))
                        .unwrap_or(Phase::Before);
                    ((-e.size, 0), e.addr.map(|addr| Block::Free { addr }), phase)
                }
                "segment_alloc" | "segment_map" => ((0, e.size), None, Phase::Before),
                "segment_free" | "segment_unmap" => ((0, -e.size), None, Phase::Before),
                _ => return None,
            };
            blocks.push(block);
            Some((t, d.0, d.1, phase))
        })
        .collect();
    let samples = replay(end, &deltas);
    if samples.iter().any(|s| s.allocated < 0 || s.reserved < 0) {
        warnings.push(Warning::damaged(format!(
            "{}: the allocator history does not add up to the snapshot's state (negative bytes in the replay); the memory chart is approximate",
            path.display()
        )));
    }
    let mut m = MemoryTimeline {
        rank: 0,
        source: path.to_owned(),
        samples,
        end,
        allocs,
        frees,
        peak_sites: Vec::new(),
    };
    // Sample k follows event k - 1: the blocks live at the peak are those
    // of the events before it.
    if let Some(p) = m.peak_index() {
        let upto: Vec<Block> = blocks[..p.min(blocks.len())]
            .iter()
            .flatten()
            .copied()
            .collect();
        m.peak_sites = live_by_site(&upto)
            .into_iter()
            .take(PEAK_SITES)
            .map(|(id, bytes)| (sites.get(StrId(id)).to_owned(), bytes))
            .collect();
    }
    Ok((m, warnings))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::synth::jit_pickle::{to_vec, P};
    use std::rc::Rc;

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
        let segment = P::dict([
            ("device", P::Int(0)),
            ("total_size", P::Int(2 << 20)),
            ("allocated_size", P::Int(125)),
            ("active_size", P::Int(125)),
            ("requested_size", P::Int(125)),
        ]);
        let snap = P::dict([
            ("segments", P::List(vec![segment])),
            ("device_traces", P::List(vec![trace])),
        ]);
        let (m, warnings) =
            read(&to_vec(&snap), Path::new("rank0_memory_snapshot.pickle")).unwrap();
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
