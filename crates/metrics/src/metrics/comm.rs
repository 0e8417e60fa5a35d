//! Communication metrics: call counts, time, and shares of GPU time.

use super::ctx::{Ctx, RankStats};
use super::outcome::{Outcome, Unit};
use crate::model::time::ns_to_s;
use crate::model::{KernelClass, Ns, RankTimeline};

const NO_KERNELS: &str = "the trace has no GPU kernels";

/// Communication kernels launched during the rank's last step (all of them when
/// the trace has no steps); without kernels, the communication nodes of the
/// rank's execution trace (which records one iteration).
pub(crate) fn coll_call_num(ctx: &Ctx) -> Outcome {
    let et = ctx.focus_et();
    let has_kernels = ctx.stats().first().is_some_and(|s| s.kernels > 0);
    let Some(t) = ctx.focus.filter(|_| has_kernels) else {
        return match et {
            Some(e) => Outcome::value(e.colls.len() as f64).with_note(format!(
                "communication nodes in the execution trace of rank {} ({})",
                e.rank,
                e.source.display()
            )),
            None => Outcome::na(NO_KERNELS),
        };
    };
    // The last measured step: the very last one runs into the profiler's stop.
    let last = t.measured().last().map(|i| i as u32);
    let count = t
        .kernels()
        .filter(|k| k.is_comm() && (last.is_none() || k.step.get() == last))
        .count();
    let mut scope = match last {
        Some(i) => match t.step_program() {
            Some(p) => format!(
                "run {} of the XLA program {p} (the step) on rank {}",
                t.steps[i as usize].number, t.rank
            ),
            None => format!(
                "ProfilerStep#{} on rank {}",
                t.steps[i as usize].number, t.rank
            ),
        },
        None => format!("whole trace of rank {} (no steps)", t.rank),
    };
    if let Some(e) = et {
        let n = e.colls.len();
        scope += &if n == count {
            format!("; the execution trace agrees ({n} communication nodes)")
        } else {
            format!("; the execution trace has {n} communication nodes (another iteration?)")
        };
    }
    Outcome::value(count as f64).with_note(scope)
}

/// Summed communication kernel time launched in steps, divided by the number of
/// steps (a trace without steps is one step).
fn comm_per_step(t: &RankTimeline, s: &RankStats) -> Option<f64> {
    if s.kernels == 0 {
        return None;
    }
    let sum: Ns = t
        .kernels()
        .filter(|k| k.is_comm() && t.counts(k.step))
        .map(|k| k.dur)
        .sum();
    Some(ns_to_s(sum) / t.step_count() as f64)
}

pub(crate) fn total_communication_time(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.each().map(|(t, s)| (t.rank, comm_per_step(t, s))),
        NO_KERNELS,
    )
}

pub(crate) fn communication_ratio(ctx: &Ctx) -> Outcome {
    Outcome::share_mean(
        ctx.stats().iter().map(|s| {
            (
                s.rank,
                s.kernel_class(KernelClass::Communication),
                s.kernel_sum,
            )
        }),
        ("comm kernels", "all kernels"),
        Unit::Percent,
        NO_KERNELS,
    )
}

pub(crate) fn communication_fraction(ctx: &Ctx) -> Outcome {
    Outcome::share_mean(
        ctx.stats()
            .iter()
            .map(|s| (s.rank, s.op_class(KernelClass::Communication), s.op_sum)),
        ("comm", "all GPU ops"),
        Unit::Percent,
        "the trace has no GPU activity",
    )
}

fn overlap(ctx: &Ctx, unit: Unit) -> Outcome {
    Outcome::share_mean(
        ctx.stats()
            .iter()
            .map(|s| (s.rank, s.whole.comm_under_compute, s.whole.comm)),
        ("comm under compute", "comm"),
        unit,
        "the trace has no communication kernels",
    )
}

/// Share of communication time during which compute kernels also ran.
pub(crate) fn communication_overlap_ratio(ctx: &Ctx) -> Outcome {
    overlap(ctx, Unit::Ratio)
}

/// CCL-Bench's `compute_comm_overlap`: as `communication_overlap_ratio`,
/// in %, but within the measured steps' CPU ranges (the whole trace
/// without steps), over kernels only.
pub(crate) fn compute_comm_overlap(ctx: &Ctx) -> Outcome {
    Outcome::share_mean(
        ctx.stats()
            .iter()
            .map(|s| (s.rank, s.step_overlap.0, s.step_overlap.1)),
        ("comm under compute in steps", "comm in steps"),
        Unit::Percent,
        "the trace has no communication kernels (in the measured steps)",
    )
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::{two_rank_example, RankTrace};

    #[test]
    fn shares_show_their_terms() {
        let t = trace(&two_rank_example());
        let Outcome::Value(m) = eval(&t, "communication_ratio", None) else {
            unreachable!()
        };
        assert_eq!(
            m.fraction.as_deref(),
            Some("rank 0: comm kernels 60.0 µs / all kernels 145 µs = 41.379 %")
        );
    }

    /// One rank, steps [0, 100), [100, 200), [200, 300) µs; the first and
    /// last are left out, and the middle one's kernels clipped to it:
    /// comm [110, 150) and [190, 210) -> [190, 200), compute [100, 130) and
    /// [195, 205) -> [195, 200). Under compute 20 + 5 of 40 + 10 µs: 50 %.
    /// Over the whole trace (communication_overlap_ratio) the other steps'
    /// fully hidden comm count too: comm [10, 50) under [0, 50), and
    /// [190, 250) under [195, 260): (40 + 20 + 55) / (40 + 40 + 60).
    #[test]
    fn compute_comm_overlap_is_ccl_benchs_within_the_measured_steps() {
        let c = crate::synth::Coll::all_reduce_f32(1 << 20, 2);
        let mut r = RankTrace::new(Some(0), 1, 10);
        for (n, at) in [(1, 0.0), (2, 100.0), (3, 200.0)] {
            r.step(n, at, 100.0);
        }
        const AR: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
        r.kernel("sm90_xmma_gemm_bf16", 0.0, 50.0, 7, 10);
        r.collective(AR, 10.0, 40.0, 20, &c);
        r.kernel("sm90_xmma_gemm_bf16", 100.0, 30.0, 7, 10);
        r.collective(AR, 110.0, 40.0, 20, &c);
        r.collective(AR, 190.0, 20.0, 20, &c);
        r.kernel("sm90_xmma_gemm_bf16", 195.0, 10.0, 7, 10);
        r.kernel("sm90_xmma_gemm_bf16", 205.0, 55.0, 7, 10);
        r.collective(AR, 210.0, 40.0, 20, &c);
        let t = trace(&[r]);
        assert_close(value(&t, "compute_comm_overlap", None), 50.0);
        assert_close(
            value(&t, "communication_overlap_ratio", None),
            115.0 / 140.0,
        );
    }

    // Hand computations for `synth::two_rank_example` (µs):
    // rank 0 kernels K1 35 + C1 30 + K2 40 + C2 30 + K3 10 = 145, of which comm 60;
    //        all device ops 145 + memcpy 10 = 155.
    // rank 1 kernels 100 + 100 = 200, comm 100.

    #[test]
    fn coll_call_num_counts_the_last_step() {
        let t = trace(&two_rank_example());
        // Rank 0's last step (#2) launched C2 only.
        assert_eq!(value(&t, "coll_call_num", None), 1.0);
        assert_eq!(value(&t, "coll_call_num", Some(1)), 1.0);
    }

    #[test]
    fn coll_call_num_without_steps_counts_everything() {
        let mut r = RankTrace::new(Some(0), 1, 10);
        r.kernel("ncclKernel_AllReduce_RING_LL_Sum_float", 0.0, 5.0, 1, 8);
        r.kernel("ncclKernel_Broadcast_RING_LL_Sum_int8_t", 10.0, 5.0, 1, 8);
        r.kernel("gemm", 20.0, 5.0, 2, 8);
        assert_eq!(value(&trace(&[r]), "coll_call_num", None), 2.0);
    }

    #[test]
    fn communication_time_per_step() {
        // rank 0: 60 µs over 2 steps = 30 µs; rank 1: 100 µs over 1 step. Mean 65 µs.
        assert_close(
            value(
                &trace(&two_rank_example()),
                "total_communication_time",
                None,
            ),
            65e-6,
        );
    }

    #[test]
    fn communication_ratio_and_fraction() {
        let t = trace(&two_rank_example());
        // ratio: 60/145 and 100/200, averaged.
        assert_close(
            value(&t, "communication_ratio", None),
            (60.0 / 145.0 * 100.0 + 50.0) / 2.0,
        );
        assert_close(value(&t, "communication_ratio", Some(1)), 50.0);
        // fraction: the memcpy joins the denominator on rank 0: 60/155.
        assert_close(
            value(&t, "communication_fraction", None),
            (60.0 / 155.0 * 100.0 + 50.0) / 2.0,
        );
    }

    #[test]
    fn overlap_ratio() {
        let t = trace(&two_rank_example());
        // rank 0: comm [30,60) ∪ [140,170) = 60; compute [10,45) ∪ [110,150) ∪ [170,180);
        // overlap [30,45) + [140,150) = 25 -> 25/60. rank 1: comm starts where compute
        // ends (touching, no overlap) -> 0.
        assert_close(
            value(&t, "communication_overlap_ratio", None),
            (25.0 / 60.0) / 2.0,
        );
        assert_close(
            value(&t, "communication_overlap_ratio", Some(0)),
            25.0 / 60.0,
        );
    }

    #[test]
    fn no_communication_is_not_applicable_for_overlap_but_zero_for_ratio() {
        let mut r = RankTrace::new(None, 1, 10);
        r.kernel("gemm", 0.0, 5.0, 1, 8);
        let t = trace(&[r]);
        assert!(matches!(
            eval(&t, "communication_overlap_ratio", None),
            Outcome::NotApplicable(_)
        ));
        assert_eq!(value(&t, "communication_ratio", None), 0.0);
    }
}
