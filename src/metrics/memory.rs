//! Memory-transfer metrics (device memcpy/memset activity).

use super::ctx::{gpu_step_windows, Ctx};
use super::outcome::{percent, Outcome};
use crate::model::{Activity, Ns};

/// Memcpy/memset time not hidden under compute kernels, as % of the device-side
/// step time.
pub fn memory_transfer_overhead(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.each().map(|(t, s)| {
            let window = gpu_step_windows(t);
            let exposed = s.memory.subtract(&s.compute).overlap_len(&window);
            (t.rank, percent(exposed, window.total()))
        }),
        "the trace has no GPU activity",
    )
}

/// Bytes over time of all memory copies with a byte count, pooled over ranks.
pub fn average_memory_bandwidth(ctx: &Ctx) -> Outcome {
    let mut per_rank = Vec::new();
    let (mut bytes, mut ns): (u64, Ns) = (0, 0);
    for t in &ctx.ranks {
        let (mut b, mut d) = (0u64, 0 as Ns);
        for op in t.ops.iter().filter(|o| o.activity == Activity::Memcpy && o.dur > 0) {
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
