//! Memory metrics: device copies (memcpy/memset activity) and, from CUDA
//! memory snapshots, allocator peaks, fragmentation and allocation counts.

use super::ctx::Ctx;
use super::outcome::{Lack, Outcome, Unit, Why};
use crate::model::memory::MemoryTimeline;
use crate::model::Ns;

/// Memcpy/memset time not hidden under compute kernels, as % of the device-side
/// step time.
pub(crate) fn memory_transfer_overhead(ctx: &Ctx) -> Outcome {
    Outcome::share_mean(
        ctx.stats()
            .iter()
            .map(|s| (s.rank, s.in_window.exposed_memory, s.window.total())),
        ("copies not under compute", "device step time"),
        Unit::Percent,
        "the trace has no GPU activity",
    )
}

/// Bytes over time of all memory copies with a byte count, pooled over ranks.
pub(crate) fn average_memory_bandwidth(ctx: &Ctx) -> Outcome {
    let mut per_rank = Vec::new();
    let (mut bytes, mut ns): (u64, Ns) = (0, Ns::ZERO);
    for s in ctx.stats() {
        let (b, d) = s.copied;
        if d > Ns::ZERO {
            // bytes per nanosecond is 1e9 bytes per second: GB/s.
            per_rank.push((s.rank, b as f64 / d.as_f64()));
        }
        bytes += b;
        ns += d;
    }
    if ns == Ns::ZERO {
        return Outcome::na("the trace has no memory copies with a byte count");
    }
    Outcome::value(bytes as f64 / ns.as_f64()).with_per_rank(per_rank)
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::{two_rank_example, RankTrace};

    #[test]
    fn transfer_overhead() {
        // rank 0: memcpy [60,70) is not under compute; device-side steps are
        // [10,70) and [110,180) = 130 µs -> 10/130. rank 1: no copies -> 0.
        let t = trace(&two_rank_example());
        assert_close(
            value(&t, "memory_transfer_overhead", None),
            10.0 / 130.0 * 100.0 / 2.0,
        );
    }

    #[test]
    fn hidden_copies_are_no_overhead() {
        let mut r = RankTrace::new(None, 1, 10);
        r.kernel("gemm", 0.0, 100.0, 1, 8);
        r.memcpy("Memcpy DtoH (Device -> Pinned)", 20.0, 10.0, 2, 100);
        r.memcpy("Memcpy DtoH (Device -> Pinned)", 95.0, 10.0, 2, 100);
        // Only [100,105) sticks out of the gemm; no steps: window [0,105).
        assert_close(
            value(&trace(&[r]), "memory_transfer_overhead", None),
            5.0 / 105.0 * 100.0,
        );
    }

    #[test]
    fn bandwidth() {
        // 1e6 bytes in 10 µs = 1e11 B/s = 100 GB/s.
        let t = trace(&two_rank_example());
        assert_close(value(&t, "average_memory_bandwidth", None), 100.0);
        assert!(matches!(
            eval(&t, "average_memory_bandwidth", Some(1)),
            Outcome::NotApplicable(_)
        ));
    }
}

const NO_SNAPSHOT: &str =
    "no CUDA memory snapshot (rank{N}_memory_snapshot.pickle from torch.cuda.memory._dump_snapshot) beside the traces";

/// The snapshots of the ranks in scope (all of them for a snapshot-only
/// trace, or the one `--rank` names).
fn snapshots<'a>(ctx: &Ctx<'a>) -> Vec<&'a MemoryTimeline> {
    let all = ctx.trace.ranks.len() == ctx.ranks.len();
    ctx.trace
        .memory
        .iter()
        .filter(|m| match ctx.only_rank() {
            Some(r) => m.rank == r,
            None => all || ctx.ranks.iter().any(|r| r.rank == m.rank),
        })
        .collect()
}

const GB: f64 = 1e9;

/// The largest per-rank value, with every rank's.
fn rank_max(values: Vec<(u32, f64)>) -> Outcome {
    match values.iter().map(|v| v.1).reduce(f64::max) {
        Some(max) => Outcome::value(max).with_per_rank(values),
        None => Outcome::lacks(Lack::MemorySnapshot, NO_SNAPSHOT),
    }
}

pub(crate) fn peak_memory_allocated_gb(ctx: &Ctx) -> Outcome {
    rank_max(
        snapshots(ctx)
            .into_iter()
            .filter_map(|m| Some((m.rank, m.peak_allocated()?.allocated as f64 / GB)))
            .collect(),
    )
}

pub(crate) fn peak_memory_reserved_gb(ctx: &Ctx) -> Outcome {
    rank_max(
        snapshots(ctx)
            .into_iter()
            .filter_map(|m| Some((m.rank, m.peak_reserved()? as f64 / GB)))
            .collect(),
    )
}

pub(crate) fn memory_fragmentation(ctx: &Ctx) -> Outcome {
    let snaps = snapshots(ctx);
    if snaps.is_empty() {
        return Outcome::lacks(Lack::MemorySnapshot, NO_SNAPSHOT);
    }
    Outcome::rank_mean(
        snaps.into_iter().map(|m| {
            // A damaged history can put allocated above reserved: no share then.
            let p = m
                .peak_allocated()
                .filter(|p| p.reserved > 0 && (0..=p.reserved).contains(&p.allocated));
            (
                m.rank,
                p.map(|p| (1.0 - p.allocated as f64 / p.reserved as f64) * 100.0),
            )
        }),
        "no snapshot has its allocation peak within reserved memory (a damaged allocator history)",
    )
}

pub(crate) fn memory_allocation_efficiency(ctx: &Ctx) -> Outcome {
    let snaps = snapshots(ctx);
    if snaps.is_empty() {
        return Outcome::lacks(Lack::MemorySnapshot, NO_SNAPSHOT);
    }
    Outcome::rank_mean(
        snaps.into_iter().map(|m| {
            let e = m.end;
            (
                m.rank,
                // Requests are rounded up, never down: more requested than
                // allocated is a damaged snapshot, not a share.
                (e.allocated > 0 && (0..=e.allocated).contains(&e.requested))
                    .then(|| e.requested as f64 / e.allocated as f64 * 100.0),
            )
        }),
        "no snapshot holds allocated blocks with consistent sizes (0 < requested <= allocated)",
    )
}

pub(crate) fn memory_alloc_count(ctx: &Ctx) -> Outcome {
    let snaps = snapshots(ctx);
    let frees: u64 = snaps.iter().map(|m| m.frees).sum();
    let o = Outcome::rank_mean(
        snaps.iter().map(|m| (m.rank, Some(m.allocs as f64))),
        Why::Lacks(Lack::MemorySnapshot, NO_SNAPSHOT),
    );
    match o {
        Outcome::Value(_) => o.with_note(format!("{frees} completed frees over all ranks")),
        na => na,
    }
}

#[cfg(test)]
mod snapshot_tests {
    use super::*;
    use crate::metrics::testing::eval_with;
    use crate::model::memory::{MemSample, MemState};
    use crate::model::Trace;

    fn timeline(rank: u32, samples: &[(i64, i64)], end: MemState, allocs: u64) -> MemoryTimeline {
        MemoryTimeline {
            rank,
            samples: samples
                .iter()
                .enumerate()
                .map(|(i, &(allocated, reserved))| MemSample {
                    time_us: i as i64,
                    allocated,
                    reserved,
                    phase: Default::default(),
                })
                .collect(),
            end,
            allocs,
            frees: allocs - 1,
            ..MemoryTimeline::default()
        }
    }

    #[test]
    fn peaks_fragmentation_efficiency_counts() {
        // Rank 0 peaks at 3 GB allocated of 4 GB reserved (25 % unusable),
        // reserved peaks at 5 GB; rank 1 peaks at 2 GB of 2 GB (0 %), reserved 2.
        // Efficiency: rank 0 900/1000 = 90 %, rank 1 100 % → mean 95 %.
        let g = 1_000_000_000;
        let end0 = MemState {
            allocated: 1000,
            requested: 900,
            reserved: 5 * g,
            active: 1000,
        };
        let end1 = MemState {
            allocated: 10,
            requested: 10,
            reserved: 2 * g,
            active: 10,
        };
        let trace = Trace {
            memory: vec![
                timeline(0, &[(g, 2 * g), (3 * g, 4 * g), (g, 5 * g)], end0, 10),
                timeline(1, &[(2 * g, 2 * g), (g, 2 * g)], end1, 20),
            ],
            ..Trace::default()
        };
        let v = |name: &str| eval_with(&trace, name, Default::default()).as_value();
        assert_eq!(v("peak_memory_allocated_gb"), Some(3.0));
        assert_eq!(v("peak_memory_reserved_gb"), Some(5.0));
        assert_eq!(v("memory_fragmentation"), Some(12.5));
        assert_eq!(v("memory_allocation_efficiency"), Some(95.0));
        assert_eq!(v("memory_alloc_count"), Some(15.0));
        // No snapshot: not applicable, with the reason.
        let none = eval_with(
            &Trace::default(),
            "peak_memory_allocated_gb",
            Default::default(),
        );
        assert!(none.as_value().is_none());
    }

    #[test]
    fn damaged_snapshots_give_no_shares() {
        // Rank 0 is consistent (fragmentation 1 − 1/4 = 75 %, efficiency 50 %);
        // rank 1 claims more allocated than reserved and more requested than
        // allocated: it is left out of both means rather than pushing them past 100 %.
        let good = MemState {
            allocated: 100,
            requested: 50,
            reserved: 400,
            active: 100,
        };
        let bad = MemState {
            allocated: 100,
            requested: 2400,
            reserved: 50,
            active: 100,
        };
        let trace = Trace {
            memory: vec![
                timeline(0, &[(100, 400)], good, 1),
                timeline(1, &[(100, 50)], bad, 1),
            ],
            ..Trace::default()
        };
        let v = |name: &str| eval_with(&trace, name, Default::default()).as_value();
        assert_eq!(v("memory_fragmentation"), Some(75.0));
        assert_eq!(v("memory_allocation_efficiency"), Some(50.0));
        let only_bad = Trace {
            memory: vec![timeline(1, &[(100, 50)], bad, 1)],
            ..Trace::default()
        };
        for name in ["memory_fragmentation", "memory_allocation_efficiency"] {
            let o = eval_with(&only_bad, name, Default::default());
            assert!(o.as_value().is_none(), "{name}");
        }
    }
}
