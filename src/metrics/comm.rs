//! Communication metrics: call counts, time, and shares of GPU time.

use super::ctx::Ctx;
use super::outcome::{percent, Outcome};
use crate::model::time::ns_to_s;
use crate::model::{KernelClass, Ns, RankTimeline};

const NO_KERNELS: &str = "the trace has no GPU kernels";

/// Communication kernels launched during the rank's last step (all of them when
/// the trace has no steps).
pub fn coll_call_num(ctx: &Ctx) -> Outcome {
    let Some(t) = ctx.focus.filter(|t| t.kernels().next().is_some()) else {
        return Outcome::na(NO_KERNELS);
    };
    let last = t.steps.len().checked_sub(1).map(|i| i as u32);
    let count = t
        .kernels()
        .filter(|k| k.is_comm() && (last.is_none() || k.step == last))
        .count();
    let scope = match last {
        Some(i) => format!("ProfilerStep#{} on rank {}", t.steps[i as usize].number, t.rank),
        None => format!("whole trace of rank {} (no steps)", t.rank),
    };
    Outcome::value(count as f64).with_note(scope)
}

/// Summed communication kernel time launched in steps, divided by the number of
/// steps (a trace without steps is one step).
fn comm_per_step(t: &RankTimeline) -> Option<f64> {
    t.kernels().next()?;
    let in_steps = !t.steps.is_empty();
    let sum: Ns = t
        .kernels()
        .filter(|k| k.is_comm() && (!in_steps || k.step.is_some()))
        .map(|k| k.dur)
        .sum();
    Some(ns_to_s(sum) / t.steps.len().max(1) as f64)
}

pub fn total_communication_time(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.ranks.iter().map(|t| (t.rank, comm_per_step(t))),
        NO_KERNELS,
    )
}

pub fn communication_ratio(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.stats().iter().map(|s| {
            (
                s.rank,
                percent(s.kernel_class(KernelClass::Communication), s.kernel_sum),
            )
        }),
        NO_KERNELS,
    )
}

pub fn communication_fraction(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.stats().iter().map(|s| {
            (
                s.rank,
                percent(s.op_class(KernelClass::Communication), s.op_sum),
            )
        }),
        "the trace has no GPU activity",
    )
}

/// Share of communication time during which compute kernels also ran.
pub fn communication_overlap_ratio(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.stats().iter().map(|s| {
            let comm = s.comm.total();
            let overlapped = s.comm.overlap_len(&s.compute);
            (s.rank, (comm > 0).then(|| overlapped as f64 / comm as f64))
        }),
        "the trace has no communication kernels",
    )
}
