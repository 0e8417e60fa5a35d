//! Clock sanity across ranks. Each rank's profiler stamps events with its own
//! host's clock: ranks whose clocks count from different epochs, or tick at
//! different rates, make every cross-rank timing (sync wait, arrival order, the
//! timeline) wrong. This finds both, from the raw clocks, and says what the
//! alignment on shared collectives did about it.

use super::collectives::{offsets_from, BySeq, Instances};
use super::time::{human, median, Ns};
use super::trace::Offset;
use super::trace::Trace;
use super::RankTimeline;

/// The first rank's end of each matched collective it took part in.
pub type RefEnds = BySeq<Ns>;

pub fn ref_ends(trace: &Trace, inst: &Instances) -> RefEnds {
    BySeq::of(inst, |i| {
        let (_, o) = i.pairs().find(|&(r, _)| r == 0)?;
        Some(trace.ranks[0].ops[o].end())
    })
}

/// For each collective `t` shares with the first rank, (the first rank's
/// end time, first rank's end − this rank's end), in op order.
pub fn samples_of(t: &RankTimeline, ends: &RefEnds) -> Vec<(Ns, Ns)> {
    let mut out = Vec::new();
    ends.walk(t, |op, ref_end| out.push((ref_end, ref_end - op.end())));
    out
}

/// Per rank (like `Trace::ranks`): [`samples_of`] each.
pub fn samples(trace: &Trace, inst: &Instances) -> Vec<Vec<(Ns, Ns)>> {
    let ends = ref_ends(trace, inst);
    trace.ranks.iter().map(|t| samples_of(t, &ends)).collect()
}

/// How much faster this rank's clock runs than the first rank's, in parts per
/// million: the change of the offset between the earlier and the later half of
/// the shared collectives (medians, so a few late collectives do not tilt it).
/// `None` below 8 samples.
pub fn drift_ppm(samples: &[(Ns, Ns)]) -> Option<f64> {
    if samples.len() < 8 {
        return None;
    }
    let mut s = samples.to_vec();
    s.sort_unstable();
    let (a, b) = s.split_at(s.len() / 2);
    let mid = |h: &[(Ns, Ns)]| {
        (
            median(h.iter().map(|x| x.0).collect()),
            median(h.iter().map(|x| x.1).collect()),
        )
    };
    let ((ta, da), (tb, db)) = (mid(a), mid(b));
    (tb > ta).then(|| (da - db).as_f64() / (tb - ta).as_f64() * 1e6)
}

/// Drift below this many ns of offset change over the trace is noise.
const DRIFT_FLOOR: Ns = Ns(5_000);

/// Matched collectives whose end times scatter more than this around the
/// offset are not a clock measurement.
const SPREAD_LIMIT: Ns = Ns(1_000_000);

/// What is wrong with the ranks' clocks, one line per finding; `samples`
/// gives a rank's (by its index in `trace.ranks`, see [`samples_of`]),
/// `offsets` are those alignment applied (`None`: not aligned).
pub fn check(
    trace: &Trace,
    samples: impl Fn(usize) -> Vec<(Ns, Ns)>,
    offsets: Option<&[Offset]>,
) -> Vec<String> {
    let mut out = Vec::new();
    let Some(first) = trace.ranks.first() else {
        return out;
    };
    let Some(w0) = first.window else {
        return out;
    };
    for (i, t) in trace.ranks.iter().enumerate().skip(1) {
        let aligned_by = offsets
            .and_then(|o| o.get(i))
            .filter(|o| o.samples > 0)
            .map(|o| o.samples);
        if let Some(w) = t.window {
            // Traces of one run overlap in time; a gap longer than both traces
            // (and than a second) means another epoch, not a late start.
            let gap = w.start - w0.start;
            let longest = w.len().max(w0.len()).max(Ns(1_000_000_000));
            if gap.abs() > longest {
                let fix = match aligned_by {
                    Some(n) => format!("aligned on {n} shared collectives"),
                    None => "no shared collectives align them, so its cross-rank timings \
                             (sync wait, arrival order, the timeline) are not meaningful"
                        .into(),
                };
                out.push(format!(
                    "rank {}: its clock reads {} {} rank {}'s, more than either trace lasts \
                     (a different clock epoch); {fix}",
                    t.rank,
                    human(gap.abs()),
                    if gap > Ns::ZERO { "ahead of" } else { "behind" },
                    first.rank
                ));
            }
        }
        let s = &samples(i);
        if s.is_empty() {
            continue;
        }
        // Collectives end on all members within microseconds; a wide spread
        // means the matched calls are not the same ones (sampled traces,
        // point-to-point traffic), and then no drift can be read either.
        let diffs: Vec<Ns> = s.iter().map(|x| x.1).collect();
        let mid = median(diffs.clone());
        let spread = median(diffs.iter().map(|&d| (d - mid).abs()).collect());
        if spread > SPREAD_LIMIT {
            out.push(format!(
                "rank {}: the collectives matched with rank {}'s end ±{} apart (median deviation \
                 over {}), not together: they are probably not the same calls, so its clock \
                 offset and cross-rank timings are uncertain",
                t.rank,
                first.rank,
                human(spread),
                s.len()
            ));
            continue;
        }
        if let Some(ppm) = drift_ppm(s) {
            let span = s.iter().map(|x| x.0).max().unwrap_or_default()
                - s.iter().map(|x| x.0).min().unwrap_or_default();
            let change = Ns::rounded(ppm * 1e-6 * span.as_f64());
            // A change within twice the scatter of the samples is not a rate.
            if change.abs() > DRIFT_FLOOR.max(spread * 2) {
                let fix = match aligned_by {
                    Some(_) => format!(
                        "one offset is applied, so aligned times are off by up to {} at the ends",
                        human(change.abs() / 2)
                    ),
                    None => "the clocks were not aligned".into(),
                };
                out.push(format!(
                    "rank {}: its clock runs {:.1} ppm {} against rank {}'s ({} over the {} \
                     its shared collectives span); {fix}",
                    t.rank,
                    ppm.abs(),
                    if ppm > 0.0 { "fast" } else { "slow" },
                    first.rank,
                    human(change.abs()),
                    human(span)
                ));
            }
        }
    }
    out
}

/// Per-rank offsets relative to the first rank, from the end times of the
/// collectives each rank shares with it: the median of (reference end − rank
/// end), robust to the few collectives that end late on one rank. Ranks that
/// share no collective with the reference get offset 0 and no samples.
pub fn estimate_offsets(trace: &Trace, inst: &Instances) -> Vec<Offset> {
    offsets_from(trace, &samples(trace, inst))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::trace;
    use crate::model::collectives::instances;
    use crate::synth::{Coll, RankTrace};

    /// Two ranks with `n` all-reduces 100 ms apart, each 50 µs long; rank 1's
    /// clock reads `offset_us` more and gains `ppm` per million.
    fn pair(n: usize, offset_us: f64, ppm: f64, with_colls: bool) -> Trace {
        let ar = Coll::all_reduce_f32(1 << 20, 2);
        let mut ranks = vec![
            RankTrace::new(Some(0), 2, 10),
            RankTrace::new(Some(1), 2, 10),
        ];
        for (r, t) in ranks.iter_mut().enumerate() {
            let clock = |x: f64| {
                if r == 0 {
                    x
                } else {
                    x + offset_us + x * ppm * 1e-6
                }
            };
            for k in 0..n {
                let start = 1000.0 + k as f64 * 100_000.0;
                if with_colls {
                    t.collective(
                        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                        clock(start),
                        50.0,
                        7,
                        &ar,
                    );
                } else {
                    t.kernel("gemm", clock(start), 50.0, 7, 8);
                }
            }
        }
        trace(&ranks)
    }

    fn findings(t: &Trace, align: bool) -> Vec<String> {
        let inst = instances(t);
        let s = samples(t, &inst);
        let offsets = estimate_offsets(t, &inst);
        check(t, |i| s[i].clone(), align.then_some(&offsets[..]))
    }

    #[test]
    fn one_clock_is_fine() {
        assert!(findings(&pair(20, 3.0, 0.0, true), true).is_empty());
    }

    #[test]
    fn another_epoch_is_found_and_said_to_be_aligned() {
        // Rank 1 stamps Unix time (1.7e9 s), rank 0 time since boot.
        let f = findings(&pair(20, 1.7e15, 0.0, true), true);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with("rank 1: its clock reads 1700000000 s ahead of rank 0's"),
            "{f:?}"
        );
        assert!(f[0].ends_with("aligned on 20 shared collectives"), "{f:?}");
        // Nothing to align by: the cross-rank timings are not to be trusted.
        let f = findings(&pair(20, -1.7e15, 0.0, false), true);
        assert!(f[0].contains("behind rank 0's"), "{f:?}");
        assert!(f[0].contains("not meaningful"), "{f:?}");
    }

    #[test]
    fn drift_is_measured_in_ppm() {
        // 20 collectives over 1.9 s, rank 1 gains 50 ppm: 95 µs by the end.
        let t = pair(20, 0.0, 50.0, true);
        let inst = instances(&t);
        let s = samples(&t, &inst);
        // Halves: medians at 0.45 s and 1.45 s; offsets −22.5 µs and −72.5 µs.
        let ppm = drift_ppm(&s[1]).unwrap();
        assert!((ppm - 50.0).abs() < 0.01, "{ppm}");
        let f = findings(&t, true);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(
            f[0].starts_with(
                "rank 1: its clock runs 50.0 ppm fast against rank 0's (95.0 µs over the 1.90 s"
            ),
            "{f:?}"
        );
        assert!(f[0].ends_with("off by up to 47.5 µs at the ends"), "{f:?}");
        // Ends 5 ms apart on alternate collectives: not the same calls.
        let mut t = pair(20, 0.0, 0.0, true);
        for (k, op) in t.ranks[1].ops.iter_mut().enumerate() {
            op.start += if k % 2 == 0 {
                Ns(5_000_000)
            } else {
                Ns(-5_000_000)
            };
        }
        let f = findings(&t, true);
        assert_eq!(f.len(), 1, "{f:?}");
        assert!(f[0].starts_with("rank 1: the collectives matched with rank 0's end ±5.00 ms apart (median deviation over 20)"), "{f:?}");
        // 1 ppm over 1.9 s is 1.9 µs: below the floor, not reported.
        assert!(findings(&pair(20, 0.0, 1.0, true), true).is_empty());
    }

    #[test]
    fn recovers_injected_offsets() {
        // The simulated run ends each collective on all ranks at once; shift
        // rank 3 by +0.8 ms and rank 6 by −3 s, then estimate.
        let mut t = crate::metrics::testing::trace(&crate::synth::training_run(
            &crate::synth::RunShape::default(),
        ));
        let injected: Vec<Ns> = (0..8)
            .map(|r| match r {
                3 => Ns(800_000),
                6 => Ns(-3_000_000_000),
                _ => Ns::ZERO,
            })
            .collect();
        let shift: Vec<Offset> = injected
            .iter()
            .enumerate()
            .map(|(r, &d)| Offset {
                rank: r as u32,
                offset: d,
                spread: Ns::ZERO,
                samples: 0,
            })
            .collect();
        t.shift(&shift);
        let inst = instances(&t);
        // 3 steps × (8 all-gathers + 8 reduce-scatters + 1 all-reduce) in one group.
        assert_eq!(inst.len(), 51);
        let est = estimate_offsets(&t, &inst);
        for (r, o) in est.iter().enumerate() {
            assert!(
                (o.offset + injected[r]).abs() <= Ns(5_000),
                "rank {r}: {o:?}"
            );
            assert_eq!(o.samples, 51);
        }
        t.shift(&est);
        let again = estimate_offsets(&t, &instances(&t));
        assert!(
            again.iter().all(|o| o.offset.abs() <= Ns(1_000)),
            "{again:?}"
        );
    }
}
