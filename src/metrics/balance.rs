//! Utilization and balance across ranks.

use super::ctx::Ctx;
use super::outcome::{percent, Outcome};
use crate::model::time::ns_to_s;

/// Union of device activity over the rank's device window (first op start to
/// last op end).
pub fn aggregate_gpu_utilization(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.each().map(|(t, s)| {
            let window = t.device_window().map_or(0, |w| w.len());
            (t.rank, percent(s.busy.total(), window))
        }),
        "the trace has no GPU activity",
    )
}

/// Busiest rank's GPU busy time over the least busy rank's.
pub fn load_imbalance_ratio(ctx: &Ctx) -> Outcome {
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
    let busy: Vec<(u32, i64)> = ctx
        .stats()
        .iter()
        .map(|s| (s.rank, s.busy.total()))
        .collect();
    let (min_rank, min) = *busy.iter().min_by_key(|b| b.1).expect("≥ 2 ranks");
    let (max_rank, max) = *busy.iter().max_by_key(|b| b.1).expect("≥ 2 ranks");
    if min == 0 {
        return Outcome::na(format!("rank {min_rank} has no GPU activity"));
    }
    Outcome::value(max as f64 / min as f64)
        .with_per_rank(busy.iter().map(|(r, b)| (*r, ns_to_s(*b))).collect())
        .with_note(format!(
            "busiest rank {max_rank} ({:.6} s) / least busy rank {min_rank} ({:.6} s); per-rank values are busy seconds",
            ns_to_s(max),
            ns_to_s(min)
        ))
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::two_rank_example;

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
}
