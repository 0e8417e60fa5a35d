//! CUDA memory snapshots (`torch.cuda.memory._dump_snapshot`): a pickled dict
//! with `segments` (the allocator's state) and `device_traces` (its recent
//! history). Read with the project's data-only pickle decoder (`pickle_tree`):
//! no pickle code runs, class references are refused, and a frame dict the
//! pickle shares between events (PyTorch writes each once) is read where it
//! is named rather than copied.

use std::path::Path;

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
    site: Option<String>,
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
    let device_traces = t
        .get(root, "device_traces")
        .map(|d| t.list(d))
        .unwrap_or_default()
        .iter()
        .map(|&dev| {
            t.list(dev)
                .iter()
                .map(|&e| {
                    let action = t.get(e, "action").and_then(V::str).unwrap_or_default();
                    let mut phase = Phase::Before;
                    let site = (action == "alloc").then(|| {
                        let frames: Vec<Frame> = t
                            .get(e, "frames")
                            .map(|f| t.list(f))
                            .unwrap_or_default()
                            .iter()
                            .map(|&f| Frame {
                                name: t.get(f, "name").and_then(V::str).unwrap_or_default(),
                                filename: t.get(f, "filename").and_then(V::str).unwrap_or_default(),
                                line: int(f, "line"),
                            })
                            .collect();
                        phase = Phase::of_stack(frames.iter().map(|f| (f.filename, f.name)));
                        site(&frames)
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
pub fn read(bytes: &[u8], path: &Path) -> Result<(MemoryTimeline, Vec<String>), Error> {
    let not = |why: String| Error::NotATrace {
        path: path.to_owned(),
        why,
    };
    // Bounded before decoding: reading walks a reused value each time it is
    // named, and nesting a million deep is refused here rather than walked.
    super::pickle_budget::check(bytes).map_err(|why| {
        not(format!(
            "a pickle that cannot be decoded within bounds: {why}"
        ))
    })?;
    let snap = super::pickle_tree::decode(bytes)
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
        warnings.push(format!(
            "{}: allocator history on {busy} devices; showing device {device}, the busiest",
            path.display()
        ));
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
        warnings.push(format!(
            "{}: no allocator history (record it with torch.cuda.memory._record_memory_history()); peaks are the state at snapshot time",
            path.display()
        ));
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
        warnings.push(format!(
            "{}: the allocator history does not add up to the snapshot's state (negative bytes in the replay); the memory chart is approximate",
            path.display()
        ));
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
