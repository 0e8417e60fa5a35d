//! Device memory over time, from CUDA caching-allocator snapshots
//! (`torch.cuda.memory._dump_snapshot`): per rank, allocated and reserved bytes
//! after every allocator event, and the allocator's state when the snapshot was
//! taken.

use std::path::PathBuf;

/// Bytes after one allocator event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemSample {
    /// The event's time (µs, the allocator's clock).
    pub time_us: i64,
    /// Bytes in blocks handed out to tensors.
    pub allocated: i64,
    /// Bytes the allocator holds from the driver (cudaMalloc'd segments).
    pub reserved: i64,
}

/// The allocator's state at snapshot time, summed over segments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemState {
    pub allocated: i64,
    pub reserved: i64,
    /// Allocated plus blocks freed but still in use by a stream.
    pub active: i64,
    /// Bytes the program asked for in allocated blocks (before rounding).
    pub requested: i64,
}

#[derive(Debug, Clone, Default)]
pub struct MemoryTimeline {
    pub rank: u32,
    pub source: PathBuf,
    /// In time order; the first sample is the state before the first event.
    pub samples: Vec<MemSample>,
    pub end: MemState,
    /// Allocations and completed frees in the recorded history.
    pub allocs: u64,
    pub frees: u64,
}

impl MemoryTimeline {
    /// The sample with the most allocated bytes (the first of equals).
    pub fn peak_allocated(&self) -> Option<MemSample> {
        self.samples.iter().copied().reduce(|best, s| {
            if s.allocated > best.allocated {
                s
            } else {
                best
            }
        })
    }

    pub fn peak_reserved(&self) -> Option<i64> {
        self.samples.iter().map(|s| s.reserved).max()
    }
}

/// Replays allocator events backwards from the end state: the history is a
/// ring buffer that may begin after the first allocations, so the state before
/// it is the end state minus what the history added. `events` are
/// (time µs, Δallocated, Δreserved) in order.
pub fn replay(end: MemState, events: &[(i64, i64, i64)]) -> Vec<MemSample> {
    let (net_alloc, net_reserved) = events
        .iter()
        .fold((0i64, 0i64), |(a, r), e| (a + e.1, r + e.2));
    let mut s = MemSample {
        time_us: events.first().map_or(0, |e| e.0),
        allocated: end.allocated - net_alloc,
        reserved: end.reserved - net_reserved,
    };
    let mut out = Vec::with_capacity(events.len() + 1);
    out.push(s);
    for &(t, da, dr) in events {
        s = MemSample {
            time_us: t,
            allocated: s.allocated + da,
            reserved: s.reserved + dr,
        };
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replay_starts_from_what_the_history_did_not_see() {
        // End: 100 allocated, 300 reserved. History: segment +200, alloc +80,
        // alloc +50, free -30. So before it: 0 + 100 - 100 = 0 allocated,
        // 300 - 200 = 100 reserved (one segment older than the history).
        let end = MemState {
            allocated: 100,
            reserved: 300,
            ..MemState::default()
        };
        let s = replay(end, &[(1, 0, 200), (2, 80, 0), (3, 50, 0), (4, -30, 0)]);
        let alloc: Vec<i64> = s.iter().map(|x| x.allocated).collect();
        assert_eq!(alloc, vec![0, 0, 80, 130, 100]);
        assert_eq!(s[0].reserved, 100);
        assert_eq!(s.last().unwrap().reserved, 300);
        let t = MemoryTimeline {
            samples: s,
            ..MemoryTimeline::default()
        };
        assert_eq!(
            t.peak_allocated()
                .map(|p| (p.time_us, p.allocated, p.reserved)),
            Some((3, 130, 300))
        );
        assert_eq!(t.peak_reserved(), Some(300));
    }
}
