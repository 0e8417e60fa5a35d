//! Whole-trace timing and counts (CCL-Bench's TPU/XLA-era list): every time is
//! per rank over that rank's whole window (first to last timed event), then
//! averaged over ranks; counts are summed over the ranks in scope.

use super::ctx::Ctx;
use super::outcome::{Lack, Outcome};
use crate::model::time::ns_to_s;
use crate::model::{CollKind, Ns};

const NO_OPS: &str = "the trace has no device activity";
const NO_COMM: &str = "the trace has no communication ops";

/// Last event end − first event start, per rank, averaged.
pub(crate) fn wall_time_s(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.ranks
            .iter()
            .map(|t| (t.rank, t.window.map(|w| ns_to_s(w.len())))),
        "the trace has no timed events",
    )
}

/// Union of non-communication device ops (compute kernels, copies, sets).
pub(crate) fn total_compute_time_s(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.each().map(|(t, s)| {
            let busy = s.whole.compute_or_memory;
            (t.rank, (s.ops > 0).then(|| ns_to_s(busy)))
        }),
        NO_OPS,
    )
}

/// Union of communication ops; the breakdown gives each collective kind's
/// summed op time (per rank, averaged), so the types can be compared.
pub(crate) fn total_comm_time_s(ctx: &Ctx) -> Outcome {
    let mut kinds: Vec<(CollKind, Ns)> = Vec::new();
    for t in &ctx.ranks {
        for o in t.ops.iter().filter(|o| o.is_comm()) {
            let k = o.coll.unwrap_or(CollKind::Unknown);
            match kinds.iter_mut().find(|(c, _)| *c == k) {
                Some((_, d)) => *d += o.dur,
                None => kinds.push((k, o.dur)),
            }
        }
    }
    kinds.sort();
    let n = ctx.ranks.len().max(1) as f64;
    Outcome::rank_mean(
        ctx.each()
            .map(|(t, s)| (t.rank, (s.ops > 0).then(|| ns_to_s(s.whole.comm)))),
        NO_OPS,
    )
    .with_parts(
        kinds
            .into_iter()
            .map(|(k, d)| (k.name().to_owned(), ns_to_s(d) / n))
            .collect(),
    )
}

/// Mean duration of one communication op, pooled over ranks.
pub(crate) fn avg_comm_kernel_time_s(ctx: &Ctx) -> Outcome {
    // Counted and summed in one walk: a run has millions.
    let (n, sum) = ctx
        .ranks
        .iter()
        .flat_map(|t| t.ops.iter().filter(|o| o.is_comm()))
        .fold((0usize, Ns::ZERO), |(n, sum), o| (n + 1, sum + o.dur));
    if n == 0 {
        return Outcome::na(NO_COMM);
    }
    Outcome::value(ns_to_s(sum) / n as f64).with_note(format!("{n} communication ops"))
}

/// Non-communication busy time / wall time, per rank, averaged.
pub(crate) fn compute_utilization_proxy(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.each().map(|(t, s)| {
            let w = t.window.map_or(Ns::ZERO, |w| w.len());
            let busy = s.whole.compute_or_memory;
            (
                t.rank,
                (w > Ns::ZERO && s.ops > 0).then(|| busy.as_f64() / w.as_f64()),
            )
        }),
        NO_OPS,
    )
}

/// Communication ops over all ranks in scope.
pub(crate) fn num_comm_kernels(ctx: &Ctx) -> Outcome {
    if ctx.stats().iter().all(|s| s.ops == 0) {
        return Outcome::na(NO_OPS);
    }
    let per_rank: Vec<(u32, f64)> = ctx
        .ranks
        .iter()
        .map(|t| (t.rank, t.ops.iter().filter(|o| o.is_comm()).count() as f64))
        .collect();
    let total: f64 = per_rank.iter().map(|(_, v)| v).sum();
    Outcome::value(total)
        .with_per_rank(per_rank)
        .with_note(format!(
            "over {} rank(s); {:.1} per chip with --n-chips {}",
            ctx.ranks.len(),
            total / f64::from(ctx.n_chips()),
            ctx.n_chips()
        ))
}

/// (bytes, duration) of communication ops with a known message size and a
/// positive duration, pooled over ranks (walked, not collected: a run has
/// millions).
fn sized<'a>(ctx: &'a Ctx) -> impl Iterator<Item = (u64, Ns)> + 'a {
    ctx.ranks.iter().flat_map(|t| {
        t.ops
            .iter()
            .filter(|o| o.is_comm() && o.dur > Ns::ZERO)
            .filter_map(|o| {
                let bytes = t.coll_meta(o).and_then(|m| m.in_bytes()).or(o.bytes())?;
                Some((bytes, o.dur))
            })
    })
}

pub(crate) fn num_comm_kernels_w_size_and_time(ctx: &Ctx) -> Outcome {
    if ctx.ranks.iter().all(|t| !t.ops.iter().any(|o| o.is_comm())) {
        return Outcome::na(NO_COMM);
    }
    Outcome::value(sized(ctx).count() as f64)
}

/// Mean over sized communication ops of message bytes / duration.
pub(crate) fn avg_comm_bandwidth_gbps(ctx: &Ctx) -> Outcome {
    // In the order the ops come, so the sum is the same to the bit.
    let (n, sum) = sized(ctx).fold((0usize, 0.0f64), |(n, sum), (b, d)| {
        (n + 1, sum + b as f64 / d.as_f64())
    });
    if n == 0 {
        return Outcome::lacks(
            Lack::CollSizes,
            "no communication op has a message size (record_param_comms / collective args)",
        );
    }
    // bytes per ns = GB/s.
    Outcome::value(sum / n as f64)
        .with_note(format!("mean over {n} ops of message bytes / duration"))
}

/// Summed all-reduce time per rank, averaged.
pub(crate) fn allreduce_comm_time_s(ctx: &Ctx) -> Outcome {
    if ctx.ranks.iter().all(|t| !t.ops.iter().any(|o| o.is_comm())) {
        return Outcome::na(NO_COMM);
    }
    Outcome::rank_mean(
        ctx.ranks.iter().map(|t| {
            let sum: Ns = t
                .ops
                .iter()
                .filter(|o| o.coll == Some(CollKind::AllReduce))
                .map(|o| o.dur)
                .sum();
            (t.rank, Some(ns_to_s(sum)))
        }),
        NO_COMM,
    )
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::{two_rank_example, RankTrace};

    #[test]
    fn whole_window_times() {
        // Both ranks' windows are [0, 200) µs (steps and ops).
        let t = trace(&two_rank_example());
        assert_close(value(&t, "wall_time_s", None), 200e-6);
        // Non-comm busy: rank 0 compute 85 + memcpy 10 = 95; rank 1 100.
        assert_close(value(&t, "total_compute_time_s", None), 97.5e-6);
        // Comm union: rank 0 60, rank 1 100.
        assert_close(value(&t, "total_comm_time_s", None), 80e-6);
        // By kind, summed then averaged over 2 ranks: all-reduce (30 + 100) / 2,
        // all-gather 30 / 2.
        let Outcome::Value(m) = eval(&t, "total_comm_time_s", None) else {
            unreachable!()
        };
        assert_eq!(m.parts.len(), 2);
        assert_eq!(m.parts[0].0, "all_reduce");
        assert_close(m.parts[0].1, 65e-6);
        assert_close(m.parts[1].1, 15e-6);
        // Comm ops 30, 30, 100 µs.
        assert_close(value(&t, "avg_comm_kernel_time_s", None), 160e-6 / 3.0);
        assert_close(
            value(&t, "compute_utilization_proxy", None),
            (0.475 + 0.5) / 2.0,
        );
        assert_close(value(&t, "num_comm_kernels", None), 3.0);
        // All-reduce: rank 0 30 µs, rank 1 100 µs.
        assert_close(value(&t, "allreduce_comm_time_s", None), 65e-6);
    }

    #[test]
    fn sized_bandwidth() {
        // All-reduce 2^20 float = 4,194,304 B in 30 µs (rank 0) and 100 µs (rank 1);
        // all-gather input 2^18 bf16 = 524,288 B in 30 µs. Bytes/ns = GB/s.
        let t = trace(&two_rank_example());
        assert_close(value(&t, "num_comm_kernels_w_size_and_time", None), 3.0);
        let want = (4_194_304.0 / 30_000.0 + 524_288.0 / 30_000.0 + 4_194_304.0 / 100_000.0) / 3.0;
        assert_close(value(&t, "avg_comm_bandwidth_GBps", None), want);
    }

    #[test]
    fn not_applicable_without_communication() {
        let mut r = RankTrace::new(Some(0), 1, 10);
        r.kernel("gemm", 0.0, 10.0, 7, 1);
        let t = trace(&[r]);
        assert!(matches!(
            eval(&t, "avg_comm_kernel_time_s", None),
            Outcome::NotApplicable(_)
        ));
        assert!(matches!(
            eval(&t, "avg_comm_bandwidth_GBps", None),
            Outcome::NotApplicable(_)
        ));
        assert!(matches!(
            eval(&t, "allreduce_comm_time_s", None),
            Outcome::NotApplicable(_)
        ));
        // No communication is a real zero when there are device ops.
        assert_close(value(&t, "num_comm_kernels", None), 0.0);
    }
}
