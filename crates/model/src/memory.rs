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
    /// At the allocation peak, the bytes live by the code that allocated
    /// them (`model.py:45 forward`), largest first, at most [`PEAK_SITES`];
    /// bytes allocated before the history began have no site and are not
    /// among them.
    pub peak_sites: Vec<(String, i64)>,
}

/// Allocation sites kept for the peak.
pub const PEAK_SITES: usize = 5;

/// An allocator event, for what is live at a moment: an allocation of
/// `size` bytes at `addr` from site `site`, or the completed free of the
/// block at `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    Alloc { addr: u64, size: i64, site: u32 },
    Free { addr: u64 },
}

/// The bytes live after `events`, by site, largest first (then by site).
/// A free of a block allocated before them changes nothing here.
pub fn live_by_site(events: &[Block]) -> Vec<(u32, i64)> {
    let mut live: std::collections::HashMap<u64, (i64, u32)> = Default::default();
    for e in events {
        match *e {
            Block::Alloc { addr, size, site } => {
                live.insert(addr, (size, site));
            }
            Block::Free { addr } => {
                live.remove(&addr);
            }
        }
    }
    let mut by: std::collections::HashMap<u32, i64> = Default::default();
    for (size, site) in live.into_values() {
        *by.entry(site).or_default() += size;
    }
    let mut out: Vec<(u32, i64)> = by.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

impl MemoryTimeline {
    /// The sample with the most allocated bytes (the first of equals).
    pub fn peak_allocated(&self) -> Option<MemSample> {
        self.samples.get(self.peak_index()?).copied()
    }

    /// The index of [`Self::peak_allocated`] in `samples`.
    pub fn peak_index(&self) -> Option<usize> {
        let mut best: Option<(usize, i64)> = None;
        for (i, s) in self.samples.iter().enumerate() {
            if best.is_none_or(|(_, b)| s.allocated > b) {
                best = Some((i, s.allocated));
            }
        }
        best.map(|(i, _)| i)
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

    #[test]
    fn live_bytes_by_site() {
        // Site 0 allocates 80 at a, site 1 50 at b, site 0 20 at c; a is
        // freed, and a block from before the history at z.
        let ev = [
            Block::Alloc {
                addr: 1,
                size: 80,
                site: 0,
            },
            Block::Alloc {
                addr: 2,
                size: 50,
                site: 1,
            },
            Block::Alloc {
                addr: 3,
                size: 20,
                site: 0,
            },
            Block::Free { addr: 1 },
            Block::Free { addr: 99 },
        ];
        assert_eq!(live_by_site(&ev[..3]), vec![(0, 100), (1, 50)]);
        assert_eq!(live_by_site(&ev), vec![(1, 50), (0, 20)]);
    }
}
