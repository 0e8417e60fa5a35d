//! Step timing.

use super::ctx::Ctx;
use super::outcome::{Lack, Outcome, Why};
use crate::model::time::ns_to_s;
use crate::model::Ns;

/// Mean step duration in ns (per rank, then over ranks), `None` without steps.
pub(crate) fn mean_step_ns(ctx: &Ctx) -> Option<f64> {
    avg_step_time(ctx).as_value().map(|s| s * 1e9)
}

/// Mean `ProfilerStep#N` duration per rank over its measured steps (first and
/// last left out with three or more), averaged over ranks.
pub(crate) fn avg_step_time(ctx: &Ctx) -> Outcome {
    let out = Outcome::rank_mean(
        ctx.ranks.iter().map(|t| {
            let steps = t.measured_steps();
            let sum: Ns = steps.iter().map(|s| s.dur()).sum();
            (
                t.rank,
                (!steps.is_empty()).then(|| ns_to_s(sum) / steps.len() as f64),
            )
        }),
        Why::Lacks(Lack::Steps, crate::model::timeline::NO_STEPS),
    );
    match out.as_value() {
        Some(_) => out.with_note(crate::model::timeline::steps_used(&ctx.ranks)),
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::{two_rank_example, RankTrace};

    #[test]
    fn step_time() {
        // rank 0: two 100 µs steps; rank 1: one 200 µs step.
        let t = trace(&two_rank_example());
        assert_close(value(&t, "avg_step_time", None), 150e-6);
        assert_close(value(&t, "avg_step_time", Some(1)), 200e-6);
    }

    #[test]
    fn no_steps() {
        let mut r = RankTrace::new(None, 1, 10);
        r.kernel("gemm", 0.0, 5.0, 1, 8);
        assert!(matches!(
            eval(&trace(&[r]), "avg_step_time", None),
            Outcome::NotApplicable(_)
        ));
    }
}
