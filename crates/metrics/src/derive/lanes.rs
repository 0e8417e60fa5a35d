//! What a timeline lane shows of a rank's device ops: their coverage by
//! kind, exact (the Timeline's lanes) or summed per time bin at a few
//! resolutions (a summary's `coverage` table, for views too wide to draw
//! each op).

use std::collections::BTreeMap;

use crate::model::{DeviceOp, IntervalSet, Ns, RankTimeline};

/// A lane's ops as sets: what is drawn, and how busy a column is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LaneSets {
    pub compute: IntervalSet,
    pub comm: IntervalSet,
    /// compute ∩ comm.
    pub overlap: IntervalSet,
    pub memory: IntervalSet,
    /// compute ∪ comm ∪ memory.
    pub busy: IntervalSet,
}

impl LaneSets {
    pub fn of<'a>(ops: impl Iterator<Item = &'a DeviceOp> + Clone) -> Self {
        let set = |keep: fn(&DeviceOp) -> bool| {
            IntervalSet::from_iter_unsorted(ops.clone().filter(|o| keep(o)).map(|o| o.interval()))
        };
        let compute = set(DeviceOp::is_compute);
        let comm = set(DeviceOp::is_comm);
        let memory = set(DeviceOp::is_memory);
        Self {
            overlap: compute.intersect(&comm),
            busy: compute.union(&comm).union(&memory),
            compute,
            comm,
            memory,
        }
    }

    /// The sets in the order of [`Bin::cover`].
    fn all(&self) -> [&IntervalSet; 5] {
        [
            &self.compute,
            &self.comm,
            &self.overlap,
            &self.memory,
            &self.busy,
        ]
    }
}

/// Ops grouped by stream once (each lane's, in start order), rather than
/// filtered again per stream.
pub fn by_stream(ops: &[DeviceOp]) -> BTreeMap<u32, Vec<&DeviceOp>> {
    let mut streams: BTreeMap<u32, Vec<&DeviceOp>> = BTreeMap::new();
    for o in ops {
        streams.entry(o.stream).or_default().push(o);
    }
    streams
}

/// Ops per finest bin, on average: fine enough that a view showing a few
/// hundred ops per column is drawn from bins, coarse enough that the bins
/// are a small fraction of the ops.
pub(crate) const OPS_PER_BIN: usize = 32;
/// Each level's bins are this many of the level below.
pub const FACTOR: i64 = 16;
/// The coarsest level has at most this many bins over the rank's window
/// (a whole-run view is a few hundred columns wide).
pub const TOP_BINS: i64 = 2048;
/// Finest bins at most, whatever the ops.
const MAX_BINS: usize = 1 << 20;

/// One lane's time in one bin.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bin {
    /// 0 for the finest bins; each level up is `FACTOR` times wider.
    pub level: u32,
    /// The stream's lane, or `None` for the rank's (all streams).
    pub stream: Option<u32>,
    pub start: Ns,
    pub len: Ns,
    /// Ops starting in the bin.
    pub ops: u64,
    /// Covered time in the bin: compute, comm, overlap, memory, busy.
    pub cover: [Ns; 5],
}

/// A rank's lanes binned, coarsest level first, then by lane (the rank's
/// before its streams') and time; bins with no op left out. Bins start at
/// the rank's first op, on its own clock (an alignment offset moves them
/// all).
pub fn bins(t: &RankTimeline) -> Vec<Bin> {
    let Some(window) = t.device_window() else {
        return Vec::new();
    };
    let n = (t.ops.len() / OPS_PER_BIN).clamp(1, MAX_BINS) as u64;
    let width = Ns(len_of(window.len()).div_ceil(n).max(1) as i64);
    bins_of(t, width, TOP_BINS)
}

/// [`bins`] with the finest bins `width` wide and at most `top` bins on the
/// coarsest level.
fn bins_of(t: &RankTimeline, width: Ns, top: i64) -> Vec<Bin> {
    let Some(window) = t.device_window() else {
        return Vec::new();
    };
    let origin = window.start;
    let mut lanes = vec![(None, fine(t.ops.iter(), origin, width))];
    for (s, ops) in by_stream(&t.ops) {
        lanes.push((Some(s), fine(ops.iter().copied(), origin, width)));
    }
    let mut levels = 1;
    let mut w = width;
    while len_of(window.len()).div_ceil(len_of(w)) > top as u64 {
        w = w * FACTOR;
        levels += 1;
    }
    let mut out = Vec::new();
    for level in (0..levels).rev() {
        let scale = FACTOR.pow(level);
        let w = width * scale;
        for (stream, fine) in &lanes {
            let mut coarse: BTreeMap<i64, (u64, [Ns; 5])> = BTreeMap::new();
            for (b, (ops, cover)) in fine {
                let c = coarse.entry(b.div_euclid(scale)).or_default();
                c.0 += ops;
                for (x, y) in c.1.iter_mut().zip(cover) {
                    *x += *y;
                }
            }
            out.extend(coarse.into_iter().map(|(b, (ops, cover))| Bin {
                level,
                stream: *stream,
                start: origin + w * b,
                len: w,
                ops,
                cover,
            }));
        }
    }
    out
}

/// A length as unsigned (an interval's is never negative).
fn len_of(d: Ns) -> u64 {
    d.0.max(0) as u64
}

/// A lane's finest bins: ops starting in each and time covered by kind.
fn fine<'a>(
    ops: impl Iterator<Item = &'a DeviceOp> + Clone,
    origin: Ns,
    width: Ns,
) -> BTreeMap<i64, (u64, [Ns; 5])> {
    let mut bins: BTreeMap<i64, (u64, [Ns; 5])> = BTreeMap::new();
    for o in ops.clone() {
        bins.entry((o.start - origin).0.div_euclid(width.0))
            .or_default()
            .0 += 1;
    }
    let sets = LaneSets::of(ops);
    for (k, set) in sets.all().into_iter().enumerate() {
        for (b, c) in set.per_bin(origin, width) {
            bins.entry(b).or_default().1[k] = c;
        }
    }
    bins
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::trace;
    use crate::synth::RankTrace;

    /// A gemm [0, 100 µs) on stream 7, an all-reduce [50, 150) on stream
    /// 20 and a copy [300, 320) on stream 9 (times in µs).
    fn rank() -> RankTimeline {
        let mut r = RankTrace::new(Some(0), 1, 10);
        r.kernel("sm90_gemm_bf16", 0.0, 100.0, 7, 1);
        r.kernel(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            50.0,
            100.0,
            20,
            1,
        );
        r.memcpy("Memcpy DtoD (Device -> Device)", 300.0, 20.0, 9, 1000);
        trace(&[r]).ranks.remove(0)
    }

    const US: i64 = 1000;

    fn cover(v: [i64; 5]) -> [Ns; 5] {
        v.map(|x| Ns(x * US))
    }

    #[test]
    fn bins_of_a_rank_by_hand() {
        let t = rank();
        let origin = t.device_window().unwrap().start;
        // Bins of 100 µs, at most 2 on the top level: bins of 1,600 µs.
        let b = bins_of(&t, Ns(100 * US), 2);
        let at = |us: i64| origin + Ns(us * US);
        let bin = |level, stream, start: i64, len: i64, ops, c| Bin {
            level,
            stream,
            start: at(start),
            len: Ns(len * US),
            ops,
            cover: cover(c),
        };
        assert_eq!(
            b,
            vec![
                // Level 1: one bin per lane holding the level below's sums.
                bin(1, None, 0, 1600, 3, [100, 100, 50, 20, 170]),
                bin(1, Some(7), 0, 1600, 1, [100, 0, 0, 0, 100]),
                bin(1, Some(9), 0, 1600, 1, [0, 0, 0, 20, 20]),
                bin(1, Some(20), 0, 1600, 1, [0, 100, 0, 0, 100]),
                // Level 0, the rank's lane: [0,100) holds the gemm and half
                // the all-reduce, [100,200) the rest of it, [300,400) the
                // copy; [200,300) is idle and left out.
                bin(0, None, 0, 100, 2, [100, 50, 50, 0, 100]),
                bin(0, None, 100, 100, 0, [0, 50, 0, 0, 50]),
                bin(0, None, 300, 100, 1, [0, 0, 0, 20, 20]),
                bin(0, Some(7), 0, 100, 1, [100, 0, 0, 0, 100]),
                bin(0, Some(9), 300, 100, 1, [0, 0, 0, 20, 20]),
                bin(0, Some(20), 0, 100, 1, [0, 50, 0, 0, 50]),
                bin(0, Some(20), 100, 100, 0, [0, 50, 0, 0, 50]),
            ]
        );
    }

    #[test]
    fn default_bins_hold_about_32_ops_and_every_level_sums_alike() {
        let mut r = RankTrace::new(Some(0), 1, 10);
        for k in 0..1000 {
            r.kernel("sm90_gemm_bf16", f64::from(k) * 10.0, 6.0, 7, 1);
        }
        let t = trace(&[r]).ranks.remove(0);
        let b = bins(&t);
        let finest: Vec<&Bin> = b.iter().filter(|b| b.level == 0).collect();
        // 1,000 ops: 31 bins of 322.6 µs, about 32 ops each.
        let w = finest[0].len;
        assert_eq!(w, Ns(322_452)); // ⌈9,996 µs / 31⌉
        assert!(finest.iter().all(|b| b.ops <= 33), "{finest:?}");
        let sums = |level| {
            b.iter()
                .filter(|b| b.level == level && b.stream.is_none())
                .fold((0, Ns::ZERO), |a, b| (a.0 + b.ops, a.1 + b.cover[4]))
        };
        assert_eq!(sums(0), (1000, Ns(6000 * US)));
        assert!(
            b.iter().all(|b| b.level == 0),
            "31 bins need no coarser level"
        );
        assert!(bins(&RankTimeline::default()).is_empty());
    }
}
