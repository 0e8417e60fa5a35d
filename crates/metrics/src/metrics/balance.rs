//! Utilization and balance across ranks.

use super::ctx::Ctx;
use super::outcome::{Lack, Outcome, Unit, Why};
use super::ranks::{verdict, Basis, Verdict};
use crate::model::time::{ns_to_s, Ns};

/// Union of device activity over the rank's device window (first op start to
/// last op end).
pub(crate) fn aggregate_gpu_utilization(ctx: &Ctx) -> Outcome {
    Outcome::share_mean(
        ctx.stats().iter().map(|s| {
            let window = s.device_window.map_or(Ns::ZERO, |w| w.len());
            (s.rank, s.whole.busy, window)
        }),
        ("busy", "device window"),
        Unit::Percent,
        "the trace has no GPU activity",
    )
}

/// Busiest rank's GPU busy time over the least busy rank's.
pub(crate) fn load_imbalance_ratio(ctx: &Ctx) -> Outcome {
    if ctx.ranks.len() < 2 {
        return Outcome::na(format!(
            "needs at least 2 ranks; the trace{} has {}",
            if ctx.ranks.len() < ctx.trace.ranks.len() {
                " selection"
            } else {
                ""
            },
            ctx.ranks.len()
        ));
    }
    let busy: Vec<(u32, Ns)> = ctx.stats().iter().map(|s| (s.rank, s.whole.busy)).collect();
    let (min_rank, min) = *busy.iter().min_by_key(|b| b.1).expect("≥ 2 ranks");
    let (max_rank, max) = *busy.iter().max_by_key(|b| b.1).expect("≥ 2 ranks");
    if min == Ns::ZERO {
        return Outcome::na(format!("rank {min_rank} has no GPU activity"));
    }
    Outcome::value(max.as_f64() / min.as_f64())
        .with_per_rank(busy.iter().map(|&(r, b)| (r, ns_to_s(b))).collect())
        .with_note(format!(
            "busiest rank {max_rank} ({:.6} s) / least busy rank {min_rank} ({:.6} s); per-rank values are busy seconds",
            ns_to_s(max),
            ns_to_s(min)
        ))
}

fn two_ranks_needed(ctx: &Ctx) -> Option<Outcome> {
    (ctx.ranks.len() < 2).then(|| {
        Outcome::na(format!(
            "needs at least 2 ranks; the selection has {}",
            ctx.ranks.len()
        ))
    })
}

/// The straggler as a ratio (see `ranks::Verdict::ratio`): 1 + the wait it
/// causes per step / the step; without matched collectives, the busiest
/// rank's work / the median's. 1 when no rank stands out beyond noise.
pub(crate) fn straggler(ctx: &Ctx) -> Outcome {
    if let Some(na) = two_ranks_needed(ctx) {
        return na;
    }
    let v = verdict(ctx);
    if let Verdict::Unknown { .. } = v {
        return Outcome::na(v.sentence());
    }
    let Some(ratio) = v.ratio() else {
        return Outcome::na("the ranks' steps have no length to compare with");
    };
    let rows = ctx.rank_rows();
    let per_rank = match &v {
        Verdict::Straggler {
            basis: Basis::Work { .. },
            ..
        } => rows.iter().map(|r| (r.rank, ns_to_s(r.work()))).collect(),
        _ => rows.iter().map(|r| (r.rank, ns_to_s(r.caused))).collect(),
    };
    let unit = match &v {
        Verdict::Straggler {
            basis: Basis::Work { .. },
            ..
        } => "work seconds per step",
        _ => "seconds per step the others waited for the rank",
    };
    Outcome::value(ratio)
        .with_per_rank(per_rank)
        .with_note(format!("{}; per-rank values are {unit}", v.sentence()))
}

/// The rank number of the straggler; not applicable when no rank stands out.
pub(crate) fn slowest_rank(ctx: &Ctx) -> Outcome {
    if let Some(na) = two_ranks_needed(ctx) {
        return na;
    }
    match verdict(ctx) {
        v @ Verdict::Straggler { rank, .. } => {
            Outcome::value(f64::from(rank)).with_note(v.sentence())
        }
        Verdict::NoStraggler(why) => Outcome::na(format!("no straggler: {why}")),
        Verdict::OneRank => Outcome::na("needs at least 2 ranks"),
        v @ Verdict::Unknown { .. } => Outcome::na(v.sentence()),
    }
}

/// Population standard deviation of every step's duration on every rank.
pub(crate) fn step_time_std(ctx: &Ctx) -> Outcome {
    // In integer nanoseconds (exact in f64), so equal steps give exactly 0.
    let d: Vec<f64> = ctx
        .ranks
        .iter()
        .flat_map(|t| t.measured_steps().iter().map(|s| s.dur().as_f64()))
        .collect();
    if d.len() < 2 {
        return Outcome::na(format!(
            "needs at least 2 steps over all ranks; the trace has {}",
            d.len()
        ));
    }
    let mean = d.iter().sum::<f64>() / d.len() as f64;
    let var = d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / d.len() as f64;
    Outcome::value(var.sqrt() / 1e9).with_note(format!(
        "over {} steps, mean {:.6} s",
        d.len(),
        mean / 1e9
    ))
}

/// Exposed communication of the rank that waits most minus that of the rank
/// that waits least, per step: time ranks spend waiting for each other.
pub(crate) fn sync_wait_time(ctx: &Ctx) -> Outcome {
    if let Some(na) = two_ranks_needed(ctx) {
        return na;
    }
    let rows = ctx.rank_rows();
    if !ctx.ranks.iter().any(|t| t.ops.iter().any(|o| o.is_comm())) {
        return Outcome::na("the trace has no communication ops");
    }
    let max = rows
        .iter()
        .map(|r| r.exposed_comm)
        .max()
        .unwrap_or(Ns::ZERO);
    let min = rows
        .iter()
        .map(|r| r.exposed_comm)
        .min()
        .unwrap_or(Ns::ZERO);
    Outcome::seconds(max - min)
        .with_per_rank(
            rows.iter()
                .map(|r| (r.rank, ns_to_s(r.exposed_comm)))
                .collect(),
        )
        .with_note("per-rank values are exposed communication seconds per step")
}

/// Communication not overlapped by compute, per step, averaged over ranks.
pub(crate) fn exposed_comm_time(ctx: &Ctx) -> Outcome {
    if !ctx.ranks.iter().any(|t| t.ops.iter().any(|o| o.is_comm())) {
        return Outcome::na("the trace has no communication ops");
    }
    Outcome::rank_mean(
        ctx.each().map(|(t, s)| {
            let exposed = s.in_window.exposed_comm;
            (t.rank, Some(ns_to_s(exposed) / t.step_count() as f64))
        }),
        "no ranks",
    )
}

/// Step time with no device activity (step time − busy), per step, averaged.
pub(crate) fn bubble_time(ctx: &Ctx) -> Outcome {
    let rows = ctx.rank_rows();
    Outcome::rank_mean(
        rows.iter().map(|r| {
            (
                r.rank,
                r.step_time.map(|st| ns_to_s((st - r.busy).max(Ns::ZERO))),
            )
        }),
        Why::Lacks(Lack::Steps, crate::model::timeline::NO_STEPS),
    )
}

/// Kernel-launch calls' CPU time per step, averaged over ranks.
pub(crate) fn cpu_launch_overhead(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.ranks.iter().map(|t| {
            let steps = t.step_count() as f64;
            // With steps: the launch calls made during the measured ones.
            let time = if t.steps.is_empty() {
                t.launch_time
            } else {
                t.launch_by_step
                    .get(t.measured())
                    .map_or(t.launch_time, |v| v.iter().map(|l| l.1).sum())
            };
            (t.rank, (t.launch_calls > 0).then(|| ns_to_s(time) / steps))
        }),
        Why::Lacks(
            Lack::LaunchCalls,
            "the trace has no kernel-launch runtime calls (cuda_runtime / cuda_driver)",
        ),
    )
}

/// Per rank in scope: (rank, its split, its steps), for ranks with matched collectives.
fn waits_in_scope<'a>(
    ctx: &'a Ctx,
) -> impl Iterator<Item = (u32, crate::model::collectives::WaitSplit, usize)> + 'a {
    let waits = ctx.waits();
    ctx.trace
        .ranks
        .iter()
        .zip(waits)
        .filter(|(t, w)| w.ops > 0 && ctx.ranks.iter().any(|r| r.rank == t.rank))
        .map(|(t, w)| (t.rank, *w, t.step_count()))
}

const NO_MATCHES: &str =
    "no collective is seen on two or more ranks (needs the traces of several ranks of one run)";

/// Time inside collectives spent waiting for the last rank to arrive, per step.
pub(crate) fn comm_wait_time(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        waits_in_scope(ctx).map(|(r, w, n)| (r, Some(ns_to_s(w.wait) / n as f64))),
        NO_MATCHES,
    )
}

/// Time inside collectives after every rank has arrived (moving data), per step.
pub(crate) fn comm_transfer_time(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        waits_in_scope(ctx).map(|(r, w, n)| (r, Some(ns_to_s(w.transfer) / n as f64))),
        NO_MATCHES,
    )
}

/// Wait / (wait + transfer) over matched collectives × 100.
pub(crate) fn comm_wait_fraction(ctx: &Ctx) -> Outcome {
    Outcome::share_mean(
        waits_in_scope(ctx).map(|(r, w, _)| (r, w.wait, w.wait + w.transfer)),
        ("wait", "matched collectives"),
        Unit::Percent,
        NO_MATCHES,
    )
}

pub(crate) fn scale_up_bw_utility(_: &Ctx) -> Outcome {
    Outcome::na("needs a network simulator's link model; a profiler trace alone cannot give it")
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::{two_rank_example, RankTrace};

    #[test]
    fn utilization() {
        // rank 0: busy [10,70) + [110,180) = 130 over window [10,180) = 170; rank 1: 200/200.
        let t = trace(&two_rank_example());
        assert_close(
            value(&t, "aggregate_gpu_utilization", None),
            (130.0 / 170.0 * 100.0 + 100.0) / 2.0,
        );
    }

    #[test]
    fn imbalance_needs_two_ranks() {
        let t = trace(&two_rank_example());
        assert_close(value(&t, "load_imbalance_ratio", None), 200.0 / 130.0);
        assert!(matches!(
            eval(&t, "load_imbalance_ratio", Some(0)),
            Outcome::NotApplicable(_)
        ));
    }

    #[test]
    fn stragglers_and_variability() {
        // One all-reduce is matched: rank 0 starts it at 30 µs, rank 1 at 100,
        // so rank 0 waits for rank 1 (rank 1's one step), but only the 30 µs
        // its op lasts are charged (its trace says it spent no more inside
        // the op). Median step time of 100 and 200 µs: 150. 1 + 30 / 150.
        let t = trace(&two_rank_example());
        assert_close(value(&t, "straggler_wait_share", None), 1.0 + 30.0 / 150.0);
        assert_close(value(&t, "slowest_rank", None), 1.0);
        // Step times 100, 100, 200 µs: mean 133.3, population std 47.14 µs.
        let mean = 400.0 / 3.0;
        let std = ((2.0 * (100.0 - mean) * (100.0f64 - mean) + (200.0 - mean) * (200.0 - mean))
            / 3.0)
            .sqrt();
        assert_close(value(&t, "step_time_std_s", None), std * 1e-6);
        // Exposed comm per step: rank 0 17.5, rank 1 100.
        assert_close(value(&t, "sync_wait_time_s", None), 82.5e-6);
        assert_close(
            value(&t, "exposed_comm_time_s", None),
            (17.5e-6 + 100e-6) / 2.0,
        );
        // Bubble: rank 0 100 − 65 = 35 µs, rank 1 200 − 200 = 0.
        assert_close(value(&t, "bubble_time_s", None), 17.5e-6);
        // Launch calls (1 µs each): rank 0 6 over 2 steps, rank 1 2 over 1 step.
        assert_close(
            value(&t, "cpu_launch_overhead_s", None),
            (3e-6 + 2e-6) / 2.0,
        );
        assert!(matches!(
            eval(&t, "straggler_wait_share", Some(0)),
            Outcome::NotApplicable(_)
        ));
        assert!(matches!(
            eval(&t, "scale_up_bw_utility", None),
            Outcome::NotApplicable(_)
        ));
    }

    /// Two ranks, one step of 100 µs, one all-reduce: rank 1 starts it
    /// `late` µs after rank 0.
    fn pair(late: f64) -> crate::model::Trace {
        let c = crate::synth::Coll::all_reduce_f32(1, 2);
        let mut ranks = vec![
            RankTrace::new(Some(0), 2, 10),
            RankTrace::new(Some(1), 2, 10),
        ];
        for (r, start) in ranks.iter_mut().zip([10.0, 10.0 + late]) {
            r.step(1, 0.0, 100.0);
            r.collective(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                start,
                20.0,
                20,
                &c,
            );
        }
        trace(&ranks)
    }

    #[test]
    fn the_straggler_is_whom_the_others_wait_for() {
        // 30 µs late in a 100 µs step, rank 1; rank 0's op lasts 20 µs, so
        // 20 µs of waiting are charged: 1.2.
        let t = pair(30.0);
        assert_close(value(&t, "straggler_wait_share", None), 1.2);
        assert_close(value(&t, "slowest_rank", None), 1.0);
        // 1 µs late is noise (under 10 µs and 2 % of the step): no straggler.
        let t = pair(1.0);
        assert_close(value(&t, "straggler_wait_share", None), 1.0);
        match eval(&t, "slowest_rank", None) {
            Outcome::NotApplicable(why) => assert!(why.starts_with("no straggler"), "{why}"),
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn wait_and_transfer() {
        // `late_pair`, one step: rank 0 waits 30 µs and transfers 20; rank 1
        // waits 0 and transfers 20.
        let ranks = crate::synth::late_pair();
        let t = trace(&ranks);
        assert_close(value(&t, "comm_wait_time_s", None), 15e-6);
        assert_close(value(&t, "comm_transfer_time_s", None), 20e-6);
        assert_close(value(&t, "comm_wait_fraction", None), (60.0 + 0.0) / 2.0);
        assert_close(value(&t, "comm_wait_time_s", Some(0)), 30e-6);
        // One rank alone has nothing to wait for.
        let t = trace(&ranks[..1]);
        assert!(matches!(
            eval(&t, "comm_wait_time_s", None),
            Outcome::NotApplicable(_)
        ));
    }
}
