//! FLOPs, tokens and model FLOPs utilization. Model FLOPs per token are 6 × N
//! for training (forward + backward) and 2 × N for inference, N = parameters.

use super::ctx::Ctx;
use super::outcome::{Lack, Outcome, Why};
use super::steps::mean_step_ns;
use crate::model::hardware;
use crate::model::time::{ns_to_s, Ns};

const NO_FLOPS: &str = "no op carries a `flops` arg (profile with torch.profiler(with_flops=True))";
const NO_PARAMS: &str =
    "needs the model size: --model-params N or workload.model.model_arch.num_params in the card";

fn is_inference(ctx: &Ctx) -> bool {
    ctx.trace
        .card
        .as_ref()
        .and_then(|c| c.workload.model.phase.as_deref())
        .is_some_and(|p| p.to_ascii_lowercase().starts_with("infer"))
}

/// FLOP per token: 6 N (training) or 2 N (inference).
fn flops_per_token(ctx: &Ctx) -> Option<f64> {
    let k = if is_inference(ctx) { 2.0 } else { 6.0 };
    Some(k * ctx.model_params()?)
}

pub(crate) fn total_model_flops_from_args(ctx: &Ctx) -> Outcome {
    let per_rank: Vec<(u32, f64)> = ctx
        .ranks
        .iter()
        .filter_map(|t| Some((t.rank, t.flops?)))
        .collect();
    if per_rank.is_empty() {
        return Outcome::lacks(Lack::Flops, NO_FLOPS);
    }
    Outcome::value(per_rank.iter().map(|p| p.1).sum()).with_per_rank(per_rank)
}

/// Σ over ranks of the rank's FLOPs / its wall time: aggregate FLOP/s.
pub(crate) fn achieved_flops_from_trace_json(ctx: &Ctx) -> Outcome {
    let per_rank: Vec<(u32, f64)> = ctx
        .ranks
        .iter()
        .filter_map(|t| {
            let w = t.window?.len();
            (w > Ns::ZERO).then_some((t.rank, t.flops? / ns_to_s(w)))
        })
        .collect();
    if per_rank.is_empty() {
        return Outcome::lacks(Lack::Flops, NO_FLOPS);
    }
    Outcome::value(per_rank.iter().map(|p| p.1).sum()).with_per_rank(per_rank)
}

pub(crate) fn flops_per_token_used(ctx: &Ctx) -> Outcome {
    match flops_per_token(ctx) {
        Some(f) => Outcome::value(f).with_note(if is_inference(ctx) {
            "2 x parameters (inference)"
        } else {
            "6 x parameters (training)"
        }),
        None => Outcome::na(NO_PARAMS),
    }
}

fn tokens(ctx: &Ctx) -> Result<f64, Why> {
    let flops = total_model_flops_from_args(ctx)
        .as_value()
        .ok_or(Why::Lacks(Lack::Flops, NO_FLOPS))?;
    Ok(flops / flops_per_token(ctx).ok_or_else(|| Why::from(NO_PARAMS))?)
}

pub(crate) fn estimated_total_tokens(ctx: &Ctx) -> Outcome {
    tokens(ctx).map_or_else(Outcome::na, Outcome::value)
}

/// Estimated tokens / mean wall time.
pub(crate) fn estimated_throughput(ctx: &Ctx) -> Outcome {
    let wall = super::window::wall_time_s(ctx).as_value();
    match (tokens(ctx), wall) {
        (Ok(t), Some(w)) if w > 0.0 => Outcome::value(t / w),
        (Err(e), _) => Outcome::na(e),
        _ => Outcome::na("the trace has no timed events"),
    }
}

/// Tokens the job processes per step (card batch × sequence length).
fn tokens_per_step(ctx: &Ctx) -> Result<f64, String> {
    let card = ctx
        .trace
        .card
        .as_ref()
        .ok_or("needs batch_size and seq_len from a workload card")?;
    let d = &card.workload.data;
    let seq = d
        .seq_len
        .or_else(|| Some(d.input_len? + d.output_len.unwrap_or(0.0)))
        .ok_or("the workload card has no data.seq_len (or input_len)")?;
    let batch = d
        .batch_size
        .ok_or("the workload card has no data.batch_size")?;
    Ok(batch * seq)
}

/// Card batch × sequence length / mean step time: tokens per second of the job.
pub(crate) fn tokens_per_s(ctx: &Ctx) -> Outcome {
    let tokens = match tokens_per_step(ctx) {
        Ok(t) => t,
        Err(e) => return Outcome::na(e),
    };
    match mean_step_ns(ctx) {
        Some(step) if step > 0.0 => Outcome::value(tokens / (step / 1e9))
            .with_note(format!("{tokens} tokens per step (card batch x seq)")),
        _ => Outcome::lacks(Lack::Steps, crate::model::timeline::NO_STEPS),
    }
}

/// Model FLOPs per step / step time / (peak FLOP/s × devices) × 100.
pub(crate) fn mfu(ctx: &Ctx) -> Outcome {
    let tokens = match tokens_per_step(ctx) {
        Ok(t) => t,
        Err(e) => return Outcome::na(e),
    };
    let Some(per_token) = flops_per_token(ctx) else {
        return Outcome::na(NO_PARAMS);
    };
    let Some(step) = mean_step_ns(ctx).filter(|&s| s > 0.0) else {
        return Outcome::lacks(Lack::Steps, crate::model::timeline::NO_STEPS);
    };
    let card = ctx.trace.card.as_ref();
    let model = card
        .and_then(|c| c.workload.hardware.xpu_spec.model.clone())
        .or_else(|| Some(ctx.focus?.devices.first()?.name.clone()));
    let Some(model) = model else {
        return Outcome::na("needs the GPU model (card xpu_spec.model or trace deviceProperties)");
    };
    let Some(peak) = hardware::lookup(&model) else {
        return Outcome::na(format!(
            "unknown GPU model '{model}': its peak FLOP/s is not in the table"
        ));
    };
    let precision = card.and_then(|c| c.workload.model.precision.as_deref());
    let Some(peak_flops) = peak.for_precision(precision) else {
        return Outcome::na(format!(
            "{} has no {} peak",
            peak.name,
            precision.unwrap_or("bf16")
        ));
    };
    let chips = ctx.n_chips();
    let achieved = per_token * tokens / (step / 1e9);
    Outcome::value(achieved / (peak_flops * f64::from(chips)) * 100.0).with_note(format!(
        "{achieved:.3e} FLOP/s of {chips} x {} at {peak_flops:.3e} FLOP/s",
        peak.name
    ))
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, eval_with, trace, value, with_card};
    use crate::metrics::{Options, Outcome};
    use crate::synth::{two_rank_example, RankTrace};

    #[test]
    fn flops_from_args() {
        // 2e12 FLOP in CPU op args over a 100 µs window.
        let mut r = RankTrace::new(Some(0), 1, 10);
        r.cpu_op("aten::mm", 0.0, 100.0, Some(1.5e12));
        r.cpu_op("aten::addmm", 10.0, 10.0, Some(0.5e12));
        r.cpu_op("aten::linear", 5.0, 50.0, None);
        let t = trace(&[r]);
        assert_close(value(&t, "total_model_flops_from_args", None), 2e12);
        assert_close(
            value(&t, "achieved_flops_from_trace_json", None),
            2e12 / 100e-6,
        );
        // Tokens need the model size: 2e12 / (6 × 1e9) = 333.3 tokens in 100 µs.
        assert!(matches!(
            eval(&t, "estimated_total_tokens", None),
            Outcome::NotApplicable(_)
        ));
        let opts = Options {
            model_params: Some(1e9),
            n_chips: None,
        };
        let tokens = eval_with(&t, "estimated_total_tokens", opts)
            .as_value()
            .unwrap();
        assert_close(tokens, 2e12 / 6e9);
        let tps = eval_with(&t, "throughput", opts).as_value().unwrap();
        assert_close(tps, 2e12 / 6e9 / 100e-6);
        // No flops args at all: not applicable, not zero.
        let t = trace(&two_rank_example());
        assert!(matches!(
            eval(&t, "total_model_flops_from_args", None),
            Outcome::NotApplicable(_)
        ));
    }

    #[test]
    fn mfu_from_the_card() {
        // Card: 1.3e9 params, batch 8 × seq 1024 = 8,192 tokens per step,
        // 8 x H100-SXM (989 TFLOP/s bf16). Steps: rank 0 100 µs, rank 1 200 µs,
        // mean 150 µs. MFU = 6 × 1.3e9 × 8192 / 150e-6 / (8 × 989e12) × 100
        // = 5,384 %: the synthetic steps are far too short for that model.
        let mut t = trace(&two_rank_example());
        assert!(matches!(eval(&t, "mfu", None), Outcome::NotApplicable(_)));
        with_card(&mut t);
        let na = eval(&t, "mfu", None);
        assert!(
            matches!(na, Outcome::NotApplicable(ref w) if w.starts_with("implausible value 5384")),
            "{na:?}"
        );
        assert_close(value(&t, "flops_per_token_used", None), 6.0 * 1.3e9);
        assert_close(value(&t, "tokens_per_s", None), 8192.0 / 150e-6);
        // A 13M-parameter model: 6 × 1.3e7 × 8192 / 150e-6 / (8 × 989e12) × 100.
        let small = |n_chips| Options {
            n_chips,
            model_params: Some(1.3e7),
        };
        let want = 6.0 * 1.3e7 * 8192.0 / 150e-6 / (8.0 * 989e12) * 100.0;
        assert_close(eval_with(&t, "mfu", small(None)).as_value().unwrap(), want);
        // --n-chips overrides the card's 8 devices.
        assert_close(
            eval_with(&t, "mfu", small(Some(16))).as_value().unwrap(),
            want / 2.0,
        );
        // An unknown GPU is named.
        t.card.as_mut().unwrap().workload.hardware.xpu_spec.model = Some("Mystery X1".into());
        let na = eval(&t, "mfu", None);
        assert!(
            matches!(na, Outcome::NotApplicable(ref w) if w.contains("Mystery X1")),
            "{na:?}"
        );
    }
}
