//! Memory-transfer metrics (device memcpy/memset activity).

use super::ctx::{gpu_step_windows, Ctx};
use super::outcome::{Outcome, Unit};
use crate::model::{Activity, Ns};

/// Memcpy/memset time not hidden under compute kernels, as % of the device-side
/// step time.
pub fn memory_transfer_overhead(ctx: &Ctx) -> Outcome {
    Outcome::share_mean(
        ctx.each().map(|(t, s)| {
            let window = gpu_step_windows(t);
            let exposed = s.memory.subtract(&s.compute).overlap_len(&window);
            (t.rank, exposed, window.total())
        }),
        ("copies not under compute", "device step time"),
        Unit::Percent,
        "the trace has no GPU activity",
    )
}

/// Bytes over time of all memory copies with a byte count, pooled over ranks.
pub fn average_memory_bandwidth(ctx: &Ctx) -> Outcome {
    let mut per_rank = Vec::new();
    let (mut bytes, mut ns): (u64, Ns) = (0, 0);
    for t in &ctx.ranks {
        let (mut b, mut d) = (0u64, 0 as Ns);
        for op in t
            .ops
            .iter()
            .filter(|o| o.activity == Activity::Memcpy && o.dur > 0)
        {
            if let Some(x) = op.bytes {
                b += x;
                d += op.dur;
            }
        }
        if d > 0 {
            // bytes per nanosecond is 1e9 bytes per second: GB/s.
            per_rank.push((t.rank, b as f64 / d as f64));
        }
        bytes += b;
        ns += d;
    }
    if ns == 0 {
        return Outcome::na("the trace has no memory copies with a byte count");
    }
    Outcome::value(bytes as f64 / ns as f64).with_per_rank(per_rank)
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::{two_rank_example, RankTrace};

    #[test]
    fn transfer_overhead() {
        // rank 0: memcpy [60,70) is not under compute; device-side steps are
        // [10,70) and [110,180) = 130 µs -> 10/130. rank 1: no copies -> 0.
        let t = trace(&two_rank_example());
        assert_close(
            value(&t, "memory_transfer_overhead", None),
            10.0 / 130.0 * 100.0 / 2.0,
        );
    }

    #[test]
    fn hidden_copies_are_no_overhead() {
        let mut r = RankTrace::new(None, 1, 10);
        r.kernel("gemm", 0.0, 100.0, 1, 8);
        r.memcpy("Memcpy DtoH (Device -> Pinned)", 20.0, 10.0, 2, 100);
        r.memcpy("Memcpy DtoH (Device -> Pinned)", 95.0, 10.0, 2, 100);
        // Only [100,105) sticks out of the gemm; no steps: window [0,105).
        assert_close(
            value(&trace(&[r]), "memory_transfer_overhead", None),
            5.0 / 105.0 * 100.0,
        );
    }

    #[test]
    fn bandwidth() {
        // 1e6 bytes in 10 µs = 1e11 B/s = 100 GB/s.
        let t = trace(&two_rank_example());
        assert_close(value(&t, "average_memory_bandwidth", None), 100.0);
        assert!(matches!(
            eval(&t, "average_memory_bandwidth", Some(1)),
            Outcome::NotApplicable(_)
        ));
    }
}
