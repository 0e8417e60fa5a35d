//! Kernel-time metrics: totals, concentration, class breakdown, SM coverage.

use super::ctx::Ctx;
use super::outcome::{Lack, Outcome, Unit, Why};
use crate::derive::sm::SmCoverage;
use crate::model::time::ns_to_s;
use crate::model::{KernelClass, Ns};

const NO_KERNELS: &str = "the trace has no GPU kernels";

pub(crate) fn total_kernel_time(ctx: &Ctx) -> Outcome {
    if !ctx.has_kernels() {
        return Outcome::na(NO_KERNELS);
    }
    let per_rank: Vec<(u32, f64)> = ctx
        .stats()
        .iter()
        .map(|s| (s.rank, ns_to_s(s.kernel_sum)))
        .collect();
    let total: Ns = ctx.stats().iter().map(|s| s.kernel_sum).sum();
    Outcome::seconds(total).with_per_rank(per_rank)
}

pub(crate) fn dominant_kernel_concentration(ctx: &Ctx) -> Outcome {
    let out = Outcome::share_mean(
        ctx.stats().iter().map(|s| {
            let top = s.kernel_table.kernel_times().map(|k| k.1).max();
            let top = top.unwrap_or(Ns::ZERO);
            (s.rank, top, s.kernel_sum)
        }),
        ("top kernel", "all kernels"),
        Unit::Percent,
        NO_KERNELS,
    );
    // Name the kernel that dominates on the most ranks' pooled time.
    let mut pooled: std::collections::HashMap<&str, Ns> = Default::default();
    for (t, s) in ctx.each() {
        for (id, ns) in s.kernel_table.kernel_times() {
            *pooled.entry(t.name(id)).or_default() += ns;
        }
    }
    match pooled
        .into_iter()
        .max_by_key(|(n, ns)| (*ns, std::cmp::Reverse(*n)))
    {
        Some((name, _)) => out.with_note(format!("dominant kernel: {name}")),
        None => out,
    }
}

pub(crate) fn moe_fraction(ctx: &Ctx) -> Outcome {
    Outcome::share_mean(
        ctx.stats()
            .iter()
            .map(|s| (s.rank, s.kernel_class(KernelClass::Moe), s.kernel_sum)),
        ("MoE kernels", "all kernels"),
        Unit::Percent,
        NO_KERNELS,
    )
}

/// Device time no class rule recognises, as % of device time: a large share
/// means the class metrics (communication included) are missing something,
/// and a `--classes` rule would fix it. The note names the unrecognised
/// kernel with the most time.
pub(crate) fn unclassified_fraction(ctx: &Ctx) -> Outcome {
    let out = Outcome::share_mean(
        ctx.stats()
            .iter()
            .map(|s| (s.rank, s.op_class(KernelClass::Other), s.op_sum)),
        ("unclassified ops", "all GPU ops"),
        Unit::Percent,
        "the trace has no GPU ops",
    );
    let mut pooled: std::collections::HashMap<&str, Ns> = Default::default();
    for (t, s) in ctx.each() {
        for (&name, &ns) in &s.unclassified {
            *pooled.entry(t.name(name)).or_default() += ns;
        }
    }
    match pooled
        .into_iter()
        .max_by_key(|(n, ns)| (*ns, std::cmp::Reverse(*n)))
    {
        Some((name, _)) => out.with_note(format!("most time unclassified: {name}")),
        None => out,
    }
}

/// The classes `break_down_steps` reports; compute classes other than these are
/// folded into "other compute".
const BREAKDOWN: [&str; 6] = [
    "communication",
    "attention",
    "moe",
    "gemm",
    "other compute",
    "memory",
];

fn breakdown_bucket(c: KernelClass) -> usize {
    match c {
        KernelClass::Communication => 0,
        KernelClass::Attention => 1,
        KernelClass::Moe => 2,
        KernelClass::Gemm => 3,
        KernelClass::Memory => 5,
        _ => 4,
    }
}

/// Device time per class over the ops launched during steps (all ops when the
/// trace has no steps), as % of that time. Headline: the compute share.
pub(crate) fn break_down_steps(ctx: &Ctx) -> Outcome {
    let mut shares: Vec<(u32, [f64; 6])> = Vec::new();
    for (t, s) in ctx.each() {
        let mut sums = [Ns::ZERO; 6];
        for (c, ns) in KernelClass::ALL.iter().zip(s.counted_class_sum) {
            sums[breakdown_bucket(*c)] += ns;
        }
        let total: Ns = sums.iter().sum();
        if total > Ns::ZERO {
            shares.push((t.rank, sums.map(|x| x.as_f64() / total.as_f64() * 100.0)));
        }
    }
    if shares.is_empty() {
        return Outcome::na("the trace has no GPU activity");
    }
    let n = shares.len() as f64;
    let mean = |i: usize| shares.iter().map(|(_, s)| s[i]).sum::<f64>() / n;
    let parts = BREAKDOWN
        .iter()
        .enumerate()
        .map(|(i, label)| ((*label).to_owned(), mean(i)))
        .collect();
    let compute = |s: &[f64; 6]| s[1] + s[2] + s[3] + s[4];
    let per_rank = shares.iter().map(|(r, s)| (*r, compute(s))).collect();
    Outcome::value(shares.iter().map(|(_, s)| compute(s)).sum::<f64>() / n)
        .with_per_rank(per_rank)
        .with_parts(parts)
        .with_note("headline: compute share (attention + moe + gemm + other compute)")
}

const NO_GRID: &str =
    "no kernel has launch-grid information (args.grid or blocks per SM) with a known SM count";

pub(crate) fn mean_sm_coverage(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.each().map(|(t, s)| {
            let sm = &s.sm;
            (
                t.rank,
                (sm.total > Ns::ZERO).then(|| sm.weighted / sm.total.as_f64() * 100.0),
            )
        }),
        Why::Lacks(Lack::LaunchGrids, NO_GRID),
    )
}

/// Share of kernel time (over kernels with known coverage) in the part `hit` picks.
fn coverage_share(ctx: &Ctx, label: &str, hit: fn(&SmCoverage) -> Ns) -> Outcome {
    Outcome::share_mean(
        ctx.each().map(|(t, s)| (t.rank, hit(&s.sm), s.sm.total)),
        (label, "kernels with grid info"),
        Unit::Percent,
        Why::Lacks(Lack::LaunchGrids, NO_GRID),
    )
}

pub(crate) fn compute_bound_fraction(ctx: &Ctx) -> Outcome {
    coverage_share(ctx, "kernels > 70 % SMs, > median", |s| s.compute_bound)
}

pub(crate) fn memory_bound_fraction(ctx: &Ctx) -> Outcome {
    coverage_share(ctx, "kernels < 50 % SMs", |s| s.memory_bound)
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::{two_rank_example, RankTrace};

    #[test]
    fn total_kernel_time_sums_all_ranks() {
        // 145 µs + 200 µs; the memcpy is not a kernel.
        assert_close(
            value(&trace(&two_rank_example()), "total_kernel_time", None),
            345e-6,
        );
    }

    #[test]
    fn dominant_kernel() {
        let t = trace(&two_rank_example());
        // rank 0: flash 40/145; rank 1: gemm and all-reduce tie at 100/200.
        assert_close(
            value(&t, "dominant_kernel_concentration", None),
            (40.0 / 145.0 * 100.0 + 50.0) / 2.0,
        );
    }

    #[test]
    fn moe_fraction() {
        // rank 0: 10/145; rank 1: 0.
        assert_close(
            value(&trace(&two_rank_example()), "moe_fraction", None),
            10.0 / 145.0 * 100.0 / 2.0,
        );
    }

    #[test]
    fn unclassified_fraction() {
        // Every op of the example has a class.
        assert_close(
            value(&trace(&two_rank_example()), "unclassified_fraction", None),
            0.0,
        );
        // Rank 0 still: 0; rank 1: a 30 µs unrecognised kernel of 230 µs of
        // device time, named in the note.
        let mut ranks = two_rank_example();
        ranks[1].kernel("my_custom_op", 300.0, 30.0, 7, 10);
        let t = trace(&ranks);
        let Outcome::Value(m) = eval(&t, "unclassified_fraction", None) else {
            panic!()
        };
        assert_close(m.value, 30.0 / 230.0 * 100.0 / 2.0);
        assert_eq!(
            m.note.as_deref(),
            Some("most time unclassified: my_custom_op")
        );
    }

    #[test]
    fn break_down_by_class() {
        let t = trace(&two_rank_example());
        // rank 0 of 155 µs: comm 60, attention 40, moe 10, gemm 35, other 0, memory 10;
        // rank 1 of 200 µs: comm 100, gemm 100. Headline: compute share 85/155 and 50 %.
        let Outcome::Value(m) = eval(&t, "break_down_steps", None) else {
            panic!()
        };
        assert_close(m.value, (85.0 / 155.0 * 100.0 + 50.0) / 2.0);
        let part = |l: &str| m.parts.iter().find(|p| p.0 == l).unwrap().1;
        assert_close(part("communication"), (60.0 / 155.0 * 100.0 + 50.0) / 2.0);
        assert_close(part("attention"), 40.0 / 155.0 * 100.0 / 2.0);
        assert_close(part("moe"), 10.0 / 155.0 * 100.0 / 2.0);
        assert_close(part("gemm"), (35.0 / 155.0 * 100.0 + 50.0) / 2.0);
        assert_close(part("other compute"), 0.0);
        assert_close(part("memory"), 10.0 / 155.0 * 100.0 / 2.0);
        assert_close(m.parts.iter().map(|p| p.1).sum(), 100.0);
    }

    #[test]
    fn sm_coverage_family() {
        let t = trace(&two_rank_example());
        // Coverage with 10 SMs: K1 1.0, C1 0.8, K2 0.4, C2 0.8, K3 0.6 on rank 0;
        // rank 1: gemm 1.0, all-reduce 0.8.
        // rank 0: (35·1 + 30·.8 + 40·.4 + 30·.8 + 10·.6) / 145 = 105/145; rank 1: 180/200.
        assert_close(
            value(&t, "mean_sm_coverage", None),
            (105.0 / 145.0 * 100.0 + 90.0) / 2.0,
        );
        // Median duration on rank 0 is 30 (of 10,30,30,35,40): only K1 (35 µs, 1.0)
        // is both wide and long. Rank 1: nothing is longer than its median (100).
        assert_close(
            value(&t, "compute_bound_fraction", None),
            35.0 / 145.0 * 100.0 / 2.0,
        );
        // Coverage below 50 %: K2 on rank 0 only.
        assert_close(
            value(&t, "memory_bound_fraction", None),
            40.0 / 145.0 * 100.0 / 2.0,
        );
    }

    #[test]
    fn no_grid_is_not_applicable() {
        let mut r = RankTrace::new(None, 1, 0);
        r.kernel("gemm", 0.0, 5.0, 1, 8);
        // numSms 0 -> the SM count is unknown (deviceProperties without numSms).
        let t = trace(&[r]);
        assert!(matches!(
            eval(&t, "mean_sm_coverage", None),
            Outcome::NotApplicable(_)
        ));
    }

    #[test]
    fn no_kernels_is_not_applicable() {
        let t = trace(&[RankTrace::new(Some(0), 1, 10)]);
        for m in [
            "total_kernel_time",
            "dominant_kernel_concentration",
            "moe_fraction",
            "break_down_steps",
        ] {
            assert!(
                matches!(eval(&t, m, None), Outcome::NotApplicable(_)),
                "{m}"
            );
        }
    }
}
