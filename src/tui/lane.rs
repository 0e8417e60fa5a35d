//! A Timeline lane: what a rank, one of its streams or one of its launching
//! threads was doing, as coverage indexes, whether made from its ops or
//! from a summary's bins.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::derive::lanes::{Bin, LaneSets};
use crate::model::{Coverage, CpuKind, CpuThread, DeviceOp, Interval, IntervalSet, Trace};

/// A timeline row: what a rank (or one of its streams) was doing, as coverage
/// indexes so a screen column is drawn in O(log n).
pub struct Lane {
    pub rank_index: usize,
    pub rank: u32,
    pub stream: Option<u32>,
    /// A CPU lane: (thread id, its place among the rank's launching threads).
    /// Its `compute` is then the thread's operators, `comm` its runtime calls.
    pub cpu: Option<(u64, usize)>,
    /// The rank's launch queue (`super::queue`), drawn from its ops' waits,
    /// with no coverage of its own.
    pub queue: bool,
    pub compute: Coverage,
    pub comm: Coverage,
    /// compute ∩ comm.
    pub overlap: Coverage,
    pub memory: Coverage,
    /// The part of collectives spent waiting for the last rank to arrive
    /// (in pages, time per bin like the lane's other coverage).
    pub wait: Arc<Coverage>,
    /// compute ∪ comm ∪ memory: how much of a column the device was busy.
    pub busy: Coverage,
}

impl Lane {
    pub(crate) fn of<'a>(
        rank_index: usize,
        rank: u32,
        stream: Option<u32>,
        ops: impl Iterator<Item = &'a DeviceOp> + Clone,
        wait: Arc<Coverage>,
    ) -> Self {
        let sets = LaneSets::of(ops);
        Self {
            rank_index,
            rank,
            stream,
            cpu: None,
            queue: false,
            busy: Coverage::new(sets.busy),
            memory: Coverage::new(sets.memory),
            compute: Coverage::new(sets.compute),
            comm: Coverage::new(sets.comm),
            overlap: Coverage::new(sets.overlap),
            wait,
        }
    }

    /// A lane drawn from a summary's bins (`derive::lanes::Bin`) of one
    /// level, in time order.
    pub(crate) fn of_bins(
        rank_index: usize,
        rank: u32,
        stream: Option<u32>,
        bins: &[&Bin],
        wait: Arc<Coverage>,
    ) -> Self {
        let cov = |k: usize| {
            Coverage::binned(
                bins.iter()
                    .map(|b| (Interval::new(b.start, b.start + b.len), b.cover[k])),
            )
        };
        Self {
            rank_index,
            rank,
            stream,
            cpu: None,
            queue: false,
            compute: cov(0),
            comm: cov(1),
            overlap: cov(2),
            memory: cov(3),
            busy: cov(4),
            wait,
        }
    }

    /// The lane of one launching thread (the `k`-th busiest) of a rank:
    /// operators and runtime calls (annotations are named, not shaded: a
    /// `ProfilerStep` range would cover the whole lane).
    pub(super) fn cpu_of(rank_index: usize, rank: u32, k: usize, th: &CpuThread) -> Self {
        let set = |kind: CpuKind| {
            IntervalSet::from_iter_unsorted(
                th.ops
                    .iter()
                    .filter(|o| o.kind == kind)
                    .map(|o| Interval::new(o.start, o.end())),
            )
        };
        let ops = set(CpuKind::Op);
        let runtime = set(CpuKind::Runtime);
        Self {
            rank_index,
            rank,
            stream: None,
            cpu: Some((th.tid, k)),
            queue: false,
            busy: Coverage::new(ops.union(&runtime)),
            compute: Coverage::new(ops),
            comm: Coverage::new(runtime),
            overlap: Coverage::default(),
            memory: Coverage::default(),
            wait: Arc::default(),
        }
    }

    /// The launch queue lane of a rank.
    pub(super) fn queue_of(rank_index: usize, rank: u32) -> Self {
        Self {
            rank_index,
            rank,
            stream: None,
            cpu: None,
            queue: true,
            busy: Coverage::default(),
            compute: Coverage::default(),
            comm: Coverage::default(),
            overlap: Coverage::default(),
            memory: Coverage::default(),
            wait: Arc::default(),
        }
    }

    /// A lane of device ops (a rank's or one of its streams').
    pub fn is_device(&self) -> bool {
        self.cpu.is_none() && !self.queue
    }

    pub fn label(&self) -> String {
        if self.queue {
            return format!("r{} queue", self.rank);
        }
        match (self.cpu, self.stream) {
            (Some((_, 0)), _) => format!("r{} cpu", self.rank),
            (Some((_, k)), _) => format!("r{} cpu{}", self.rank, k + 1),
            (None, Some(s)) => format!("r{} s{s}", self.rank),
            (None, None) => format!("rank {}", self.rank),
        }
    }

    /// The rank's launching thread this CPU lane shows.
    pub(crate) fn thread<'a>(&self, trace: &'a Trace) -> Option<&'a CpuThread> {
        let (_, k) = self.cpu?;
        trace.ranks.get(self.rank_index)?.cpu.get(k)
    }
}

/// The wait coverage of rank lane `stream` (`None`: all streams).
pub fn wait_of(waits: &[(u32, Interval)], stream: Option<u32>) -> Arc<Coverage> {
    Arc::new(Coverage::new(IntervalSet::from_iter_unsorted(
        waits
            .iter()
            .filter(|(s, _)| stream.is_none_or(|x| x == *s))
            .map(|(_, iv)| *iv),
    )))
}

/// A lane as drawn: the resident one, or a finer one read for the view.
pub enum Shown<'a> {
    Resident(&'a Lane),
    Detail(Arc<Lane>),
}

impl std::ops::Deref for Shown<'_> {
    type Target = Lane;

    fn deref(&self) -> &Lane {
        match self {
            Self::Resident(l) => l,
            Self::Detail(l) => l,
        }
    }
}

/// A rank's lane and stream lanes from its bins of one level (the rank's
/// lane's first, as stored).
pub fn bin_lanes(
    rank_index: usize,
    rank: u32,
    bins: &[Bin],
    waits: &[(u32, Interval)],
) -> (Lane, Vec<Lane>) {
    let mut by_lane: BTreeMap<Option<u32>, Vec<&Bin>> = BTreeMap::new();
    for b in bins {
        by_lane.entry(b.stream).or_default().push(b);
    }
    let rank_bins = by_lane.remove(&None).unwrap_or_default();
    let lane = |s: Option<u32>, b: &[&Bin]| {
        Lane::of_bins(rank_index, rank, s, b, binned_wait(b, waits, s))
    };
    let streams = by_lane.iter().map(|(&s, b)| lane(s, b)).collect();
    (lane(None, &rank_bins), streams)
}

/// The wait coverage of lane `stream` as time per bin of `bins`: held per
/// bin, not per collective, so a lane's resident cost does not grow with a
/// rank's collectives. Waits lie inside communication, so inside bins.
fn binned_wait(bins: &[&Bin], waits: &[(u32, Interval)], stream: Option<u32>) -> Arc<Coverage> {
    let exact = wait_of(waits, stream);
    Arc::new(Coverage::binned(bins.iter().map(|b| {
        let bin = Interval::new(b.start, b.start + b.len);
        (bin, exact.covered(bin.start, bin.end))
    })))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Ns;

    /// A lane's resident wait is its waits' time per bin: [5, 25) on
    /// stream 7 over bins of 10 from 0 is 5, 10 and 5; stream 8's [12, 14)
    /// counts on the rank's lane only.
    #[test]
    fn resident_waits_are_binned_like_the_lane() {
        let bin = |stream, start| Bin {
            level: 1,
            stream,
            start: Ns(start),
            len: Ns(10),
            ops: 1,
            cover: [Ns(10); 5],
        };
        let bins: Vec<Bin> = [None, Some(7), Some(8)]
            .into_iter()
            .flat_map(|s| [0, 10, 20].map(|t| bin(s, t)))
            .collect();
        let waits = [
            (7, Interval::new(Ns(5), Ns(25))),
            (8, Interval::new(Ns(12), Ns(14))),
        ];
        let (rank, streams) = bin_lanes(0, 3, &bins, &waits);
        let per_bin = |l: &Lane| [0, 10, 20].map(|t| l.wait.covered(Ns(t), Ns(t + 10)).get());
        assert_eq!(per_bin(&rank), [5, 10, 5]);
        assert_eq!(per_bin(&streams[0]), [5, 10, 5]);
        assert_eq!(per_bin(&streams[1]), [0, 2, 0]);
        // Within a bin, taken as spread evenly.
        assert_eq!(streams[1].wait.covered(Ns(10), Ns(15)).get(), 1);
        assert_eq!(rank.wait.covered(Ns(0), Ns(30)).get(), 20);
    }
}
