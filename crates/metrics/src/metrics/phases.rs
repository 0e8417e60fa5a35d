//! Time by phase, from `record_function` ranges: training phases (forward,
//! backward, optimizer), FSDP ranges, and inference engine steps (TTFT, TPOT).
//! Ranges of a phase are unioned per rank, so nested ranges (`optimizer` around
//! `Optimizer.step#AdamW.step`) count once.

use super::ctx::Ctx;
use super::outcome::{Outcome, Unit};
use crate::derive::phases::Phase;
use crate::model::engine::{engine_steps, EngineStep};
use crate::model::time::ns_to_s;
use crate::model::Ns;

/// Mean per step of the phase's time, per rank, averaged.
fn per_step(ctx: &Ctx, phase: Phase) -> Outcome {
    Outcome::rank_mean(
        ctx.each().map(|(t, s)| {
            let steps = t.step_count() as f64;
            (
                t.rank,
                s.phases[phase as usize].map(|ns| ns_to_s(ns) / steps),
            )
        }),
        format!("the trace has no {}", phase.describe()),
    )
}

/// The phase's device time as % of the device-side step windows (first to last
/// op launched in each step; the device window without steps), so both sides of
/// the ratio are measured on the GPU (CPU steps for a trace without device ops).
fn share(ctx: &Ctx, phase: Phase) -> Outcome {
    Outcome::share_mean(
        ctx.each().filter_map(|(t, s)| {
            let whole = match s.window.total() {
                // CPU-only trace: the CPU steps, else the whole window.
                Ns::ZERO if t.steps.is_empty() => t.window.map_or(Ns::ZERO, |w| w.len()),
                Ns::ZERO => t.measured_steps().iter().map(|s| s.dur()).sum(),
                w => w,
            };
            Some((t.rank, s.phases[phase as usize]?, whole))
        }),
        (phase.label(), "device step time"),
        Unit::Percent,
        format!("the trace has no {}", phase.describe()),
    )
}

pub(crate) fn forward_time(ctx: &Ctx) -> Outcome {
    per_step(ctx, Phase::Forward)
}
pub(crate) fn backward_time(ctx: &Ctx) -> Outcome {
    per_step(ctx, Phase::Backward)
}
pub(crate) fn optimizer_time(ctx: &Ctx) -> Outcome {
    per_step(ctx, Phase::Optimizer)
}
pub(crate) fn forward_fraction(ctx: &Ctx) -> Outcome {
    share(ctx, Phase::Forward)
}
pub(crate) fn backward_fraction(ctx: &Ctx) -> Outcome {
    share(ctx, Phase::Backward)
}
pub(crate) fn optimizer_fraction(ctx: &Ctx) -> Outcome {
    share(ctx, Phase::Optimizer)
}
pub(crate) fn fsdp_all_gather_time(ctx: &Ctx) -> Outcome {
    per_step(ctx, Phase::FsdpAllGather)
}
pub(crate) fn fsdp_reduce_scatter_time(ctx: &Ctx) -> Outcome {
    per_step(ctx, Phase::FsdpReduceScatter)
}
pub(crate) fn fsdp_copy_in_time(ctx: &Ctx) -> Outcome {
    per_step(ctx, Phase::FsdpCopyIn)
}
pub(crate) fn fsdp_copy_out_time(ctx: &Ctx) -> Outcome {
    per_step(ctx, Phase::FsdpCopyOut)
}

const NO_ENGINE: &str =
    "no inference engine-step ranges (vLLM execute_context_*, SGLang step[...])";

/// The engine steps of rank 0 (or `--rank`), or why there are none.
fn focus_engine_steps(ctx: &Ctx) -> Result<Vec<EngineStep>, Outcome> {
    let t = ctx.focus.ok_or_else(|| Outcome::na("no ranks"))?;
    let steps = engine_steps(t);
    if steps.is_empty() {
        return Err(Outcome::na(NO_ENGINE));
    }
    Ok(steps)
}

/// Time to first token: the first prefill engine step on rank 0 (or `--rank`).
pub(crate) fn ttft(ctx: &Ctx) -> Outcome {
    let steps = match focus_engine_steps(ctx) {
        Ok(s) => s,
        Err(na) => return na,
    };
    match steps.iter().find(|s| s.prefill) {
        Some(s) => Outcome::seconds(s.dur),
        None => Outcome::na("the trace has decode steps only (no prefill to time)"),
    }
}

/// Time per output token: mean decode engine step after the first prefill.
pub(crate) fn tpot(ctx: &Ctx) -> Outcome {
    let steps = match focus_engine_steps(ctx) {
        Ok(s) => s,
        Err(na) => return na,
    };
    let after = steps.iter().position(|s| s.prefill).map_or(0, |i| i + 1);
    let decode: Vec<Ns> = steps[after..]
        .iter()
        .filter(|s| !s.prefill)
        .map(|s| s.dur)
        .collect();
    if decode.is_empty() {
        return Outcome::na("no decode engine steps after the prefill");
    }
    Outcome::value(ns_to_s(decode.iter().sum()) / decode.len() as f64)
        .with_note(format!("mean of {} decode steps", decode.len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::RankTrace;

    #[test]
    fn phases_index_their_table() {
        // RankStats keeps phase times in an array indexed by `phase as usize`.
        for (i, p) in Phase::ALL.iter().enumerate() {
            assert_eq!(*p as usize, i);
        }
    }

    fn training() -> RankTrace {
        // Two steps of 100 µs; per step forward 30, backward 50, optimizer 10 µs
        // (an `optimizer` range around `Optimizer.step#AdamW.step` counts once).
        let mut r = RankTrace::new(Some(0), 1, 10);
        for (i, at) in [0.0, 100.0].into_iter().enumerate() {
            r.step(i as u32 + 1, at, 100.0);
            r.annotation("forward", at, 30.0, false);
            r.annotation("backward", at + 30.0, 50.0, false);
            r.annotation("optimizer", at + 80.0, 10.0, false);
            r.annotation("Optimizer.step#AdamW.step", at + 81.0, 8.0, false);
            r.annotation("FSDP::all_gather", at + 1.0, 4.0, false);
            r.annotation("FSDP::all_gather_copy_in", at + 0.5, 0.5, false);
        }
        r
    }

    #[test]
    fn training_phases() {
        let t = trace(&[training()]);
        assert_close(value(&t, "forward_time_s", None), 30e-6);
        assert_close(value(&t, "backward_time_s", None), 50e-6);
        assert_close(value(&t, "optimizer_time_s", None), 10e-6);
        // No device ops: the share is of the CPU steps, 200 µs.
        assert_close(value(&t, "forward_fraction", None), 30.0);
        assert_close(value(&t, "backward_fraction", None), 50.0);
        assert_close(value(&t, "fsdp_all_gather_time_s", None), 4e-6);
        assert_close(value(&t, "fsdp_copy_in_time_s", None), 0.5e-6);
        assert!(matches!(
            eval(&t, "fsdp_copy_out_time_s", None),
            Outcome::NotApplicable(_)
        ));
    }

    #[test]
    fn phases_on_the_device_follow_their_launches() {
        // Step 1's forward (CPU [0, 30)) launches kernels at 5 and 20 that run at
        // [10, 40) and [45, 60): device-side forward = 30 + 15 = 45 µs. Its
        // backward (CPU [30, 80)) launches one kernel at 35 running [60, 95).
        // The GPU mirror of `backward` (2 µs) is ignored.
        let mut r = RankTrace::new(Some(0), 1, 10);
        r.step(1, 0.0, 100.0);
        r.annotation("forward", 0.0, 30.0, false);
        r.annotation("backward", 30.0, 50.0, false);
        r.annotation("backward", 60.0, 2.0, true);
        for (ts, dur, at) in [(10.0, 30.0, 5.0), (45.0, 15.0, 20.0), (60.0, 35.0, 35.0)] {
            let c = r.kernel("gemm", ts, dur, 7, 1);
            r.launch(c, at);
        }
        let t = trace(&[r]);
        assert_close(value(&t, "forward_time_s", None), 45e-6);
        assert_close(value(&t, "backward_time_s", None), 35e-6);
        // Device-side step window: [10, 95) = 85 µs.
        assert_close(value(&t, "forward_fraction", None), 45.0 / 85.0 * 100.0);
    }

    #[test]
    fn ttft_and_tpot() {
        // Prefill 50 µs, then decode steps of 10, 12 and 14 µs.
        let mut r = RankTrace::new(Some(0), 1, 10);
        r.annotation(
            "execute_context_1(512_512)_generation_0(0)",
            0.0,
            50.0,
            false,
        );
        for (i, d) in [10.0, 12.0, 14.0].into_iter().enumerate() {
            r.annotation(
                "execute_context_0(0)_generation_8(8)",
                60.0 + 20.0 * i as f64,
                d,
                false,
            );
        }
        // A nested SGLang step inside a decode range counts once.
        r.annotation("step[DECODE bs=8]", 61.0, 5.0, false);
        let t = trace(&[r]);
        assert_close(value(&t, "ttft", None), 50e-6);
        assert_close(value(&t, "tpot", None), 12e-6);
        let t = trace(&[training()]);
        assert!(matches!(eval(&t, "ttft", None), Outcome::NotApplicable(_)));
    }
}
