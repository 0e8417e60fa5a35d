//! CUDA memory snapshots (`torch.cuda.memory._dump_snapshot`): a pickled dict
//! with `segments` (the allocator's state) and `device_traces` (its recent
//! history). Read with serde-pickle into plain structs: no pickle code runs, and
//! class references are refused rather than resolved.

use std::path::Path;

use serde::Deserialize;

use crate::error::Error;
use crate::model::memory::{replay, MemState, MemoryTimeline};

#[derive(Deserialize)]
struct Snapshot {
    segments: Vec<Segment>,
    #[serde(default)]
    device_traces: Vec<Vec<Event>>,
}

#[derive(Deserialize)]
struct Segment {
    #[serde(default)]
    device: i64,
    total_size: i64,
    #[serde(default)]
    allocated_size: i64,
    #[serde(default)]
    active_size: i64,
    #[serde(default)]
    requested_size: i64,
}

#[derive(Deserialize)]
struct Event {
    action: String,
    #[serde(default)]
    size: i64,
    #[serde(default)]
    time_us: Option<i64>,
}

/// Reads one snapshot. The device with the most history is the rank's (a
/// process normally uses one); `rank` is assigned by the caller.
pub fn read(bytes: &[u8], path: &Path) -> Result<(MemoryTimeline, Vec<String>), Error> {
    let not = |why: String| Error::NotATrace {
        path: path.to_owned(),
        why,
    };
    // Bounded before decoding: the decoder copies reused values and recurses.
    super::pickle_budget::check(bytes).map_err(|why| {
        not(format!(
            "a pickle that cannot be decoded within bounds: {why}"
        ))
    })?;
    let snap: Snapshot = serde_pickle::from_slice(bytes, serde_pickle::DeOptions::new().replace_recursive_structures())
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
    let deltas: Vec<(i64, i64, i64)> = history
        .iter()
        .filter_map(|e| {
            let t = e.time_us.unwrap_or(last_t);
            last_t = t;
            // A free counts when the block is back in the allocator, which is
            // when `free_completed` comes (after streams using it are done).
            let d = match e.action.as_str() {
                "alloc" => {
                    allocs += 1;
                    (e.size, 0)
                }
                "free_completed" => {
                    frees += 1;
                    (-e.size, 0)
                }
                "segment_alloc" | "segment_map" => (0, e.size),
                "segment_free" | "segment_unmap" => (0, -e.size),
                _ => return None,
            };
            Some((t, d.0, d.1))
        })
        .collect();
    let samples = replay(end, &deltas);
    if samples.iter().any(|s| s.allocated < 0 || s.reserved < 0) {
        warnings.push(format!(
            "{}: the allocator history does not add up to the snapshot's state (negative bytes in the replay); the memory chart is approximate",
            path.display()
        ));
    }
    Ok((
        MemoryTimeline {
            rank: 0,
            source: path.to_owned(),
            samples,
            end,
            allocs,
            frees,
        },
        warnings,
    ))
}
