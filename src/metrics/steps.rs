//! Step timing.

use super::ctx::Ctx;
use super::outcome::Outcome;
use crate::model::time::ns_to_s;
use crate::model::Ns;

/// Mean `ProfilerStep#N` duration per rank, averaged over ranks.
pub fn avg_step_time(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.ranks.iter().map(|t| {
            let n = t.steps.len();
            let sum: Ns = t.steps.iter().map(|s| s.dur()).sum();
            (t.rank, (n > 0).then(|| ns_to_s(sum) / n as f64))
        }),
        "the trace has no ProfilerStep annotations",
    )
}
