//! Figures that CCL-Bench's `tools/main.py` prints under these names, computed
//! as its tools compute them (whole trace, every step, raw kernel durations),
//! so that a script moving from CCL-Bench to ccl-bench gets the same quantity.
//! Where its tool reads something that is not a trace (a benchmark's JSONL
//! output), the metric says so instead of printing a different figure.

use super::ctx::Ctx;
use super::outcome::Outcome;
use crate::model::time::{ns_to_s, Ns};
use crate::model::{CollKind, KernelClass, RankTimeline};

/// Whether a kernel is an NCCL (or RCCL) kernel by name, as CCL-Bench's tools
/// recognise them (`ncclDevKernel_*` from NCCL 2.19, `ncclKernel_*` before).
fn is_nccl(name: &str) -> bool {
    name.get(..4)
        .is_some_and(|p| p.eq_ignore_ascii_case("nccl"))
}

/// A rank's summed NCCL kernel time over the whole trace.
fn nccl_time(t: &RankTimeline, s: &super::ctx::RankStats) -> Ns {
    s.kernel_table
        .kernel_times()
        .filter(|&(id, _)| is_nccl(t.name(id)))
        .map(|(_, ns)| ns)
        .sum()
}

/// Each rank's NCCL kernel time, for the ranks that have any (CCL-Bench
/// keys its sums by the kernels it sees).
fn nccl_time_per_rank(ctx: &Ctx) -> Vec<(u32, Ns)> {
    ctx.each()
        .map(|(t, s)| (t.rank, nccl_time(t, s)))
        .filter(|&(_, ns)| ns > Ns::ZERO)
        .collect()
}

/// CCL-Bench's straggler figures over the ranks with NCCL kernels.
struct Spread {
    /// (max − min) / max of their summed NCCL kernel time.
    delay: f64,
    /// max / min.
    slowdown: f64,
    /// Each rank's NCCL kernel seconds.
    per_rank: Vec<(u32, f64)>,
    note: String,
}

fn delay_and_slowdown(ctx: &Ctx) -> Result<Spread, Outcome> {
    let per_rank = nccl_time_per_rank(ctx);
    if per_rank.len() < 2 {
        return Err(Outcome::na(format!(
            "needs NCCL kernels on at least 2 ranks; {} of the {} rank{} in scope ha{} any \
             (CCL-Bench prints 0.0 here)",
            per_rank.len(),
            ctx.ranks.len(),
            if ctx.ranks.len() == 1 { "" } else { "s" },
            if per_rank.len() == 1 { "s" } else { "ve" },
        )));
    }
    let (min_rank, min) = *per_rank.iter().min_by_key(|p| p.1).expect("two or more");
    let (max_rank, max) = *per_rank.iter().max_by_key(|p| p.1).expect("two or more");
    let note = format!(
        "NCCL kernel time over the whole trace: rank {max_rank} {:.6} s most, rank {min_rank} \
         {:.6} s least; per-rank values are NCCL kernel seconds",
        ns_to_s(max),
        ns_to_s(min)
    );
    let per_rank = per_rank.iter().map(|&(r, ns)| (r, ns_to_s(ns))).collect();
    let (max, min) = (max.as_f64(), min.as_f64());
    Ok(Spread {
        delay: (max - min) / max,
        slowdown: max / min,
        per_rank,
        note,
    })
}

/// `straggler`: CCL-Bench's straggler delay, (max − min) / max of the ranks'
/// NCCL kernel time. 0 when every rank spends the same time in NCCL.
pub(crate) fn straggler(ctx: &Ctx) -> Outcome {
    match delay_and_slowdown(ctx) {
        Ok(s) => Outcome::value(s.delay)
            .with_per_rank(s.per_rank)
            .with_note(s.note),
        Err(na) => na,
    }
}

/// `straggler_metrics`: the delay, with the delay and the slowdown (max / min)
/// as its parts (`--metric straggler_metrics` prints both as CCL-Bench does).
pub(crate) fn straggler_metrics(ctx: &Ctx) -> Outcome {
    match delay_and_slowdown(ctx) {
        Ok(s) => Outcome::value(s.delay)
            .with_per_rank(s.per_rank)
            .with_parts(vec![
                ("delay".into(), s.delay),
                ("slowdown".into(), s.slowdown),
            ])
            .with_note(s.note),
        Err(na) => na,
    }
}

/// `total_trace_time`: first kernel start to last kernel end over every rank,
/// in seconds (CCL-Bench's span of all `kernel` events across the files).
pub(crate) fn total_trace_time(ctx: &Ctx) -> Outcome {
    if !ctx.has_kernels() {
        return Outcome::na("the trace has no GPU kernels");
    }
    let mut span: Option<(Ns, Ns)> = None;
    for s in ctx.stats().iter().filter(|s| s.kernels > 0) {
        let Some(w) = s.kernel_window else {
            return Outcome::na(format!(
                "rank {}'s summary was made before kernel spans were stored: summarize again",
                s.rank
            ));
        };
        span = Some(span.map_or((w.start, w.end), |(a, b)| (a.min(w.start), b.max(w.end))));
    }
    match span {
        Some((a, b)) => {
            Outcome::seconds(b - a).with_note("first kernel start to last kernel end, all ranks")
        }
        None => Outcome::na("the trace has no GPU kernels"),
    }
}

/// `kernel_compute_time_group_6`: every non-communication kernel's duration,
/// summed over the ranks (CCL-Bench sums its nodes' files), in seconds.
pub(crate) fn kernel_compute_time(ctx: &Ctx) -> Outcome {
    if !ctx.has_kernels() {
        return Outcome::na("the trace has no GPU kernels");
    }
    let per_rank: Vec<(u32, Ns)> = ctx
        .stats()
        .iter()
        .map(|s| {
            let comm = s.kernel_class(KernelClass::Communication);
            (s.rank, s.kernel_sum - comm)
        })
        .collect();
    Outcome::seconds(per_rank.iter().map(|p| p.1).sum())
        .with_per_rank(per_rank.iter().map(|&(r, ns)| (r, ns_to_s(ns))).collect())
}

/// Where CCL-Bench's tool reads the SGLang benchmark's output, not a trace.
fn bench_results(what: &str, ours: &str) -> Outcome {
    Outcome::na(format!(
        "CCL-Bench takes the {what} from SGLang's bench_results.jsonl (client-side \
         measurements), not from a trace; the trace's own figure is `{ours}`"
    ))
}

pub(crate) fn ttft_group_6(_: &Ctx) -> Outcome {
    bench_results("median time to first token", "ttft")
}

pub(crate) fn tpot_group_6(_: &Ctx) -> Outcome {
    bench_results("median time per output token", "tpot")
}

pub(crate) fn throughput_group_6(_: &Ctx) -> Outcome {
    bench_results("output tokens per second", "throughput_tokens_per_s")
}

/// `comm_kernel_breakdown_tpu`: device time of the XLA collective ops over
/// every device, in seconds, by kind (CCL-Bench's per-type table, which it
/// gives in µs and only for XLA traces: NCCL kernel names match none of its
/// keys).
pub(crate) fn comm_kernel_breakdown_tpu(ctx: &Ctx) -> Outcome {
    let xla: Vec<&RankTimeline> = ctx
        .ranks
        .iter()
        .copied()
        .filter(|t| t.format == crate::model::timeline::SourceFormat::Xla)
        .collect();
    if xla.is_empty() {
        return Outcome::na(
            "reads XLA (TPU/JAX) traces; this one holds none (CCL-Bench's tool finds no \
             collective here)",
        );
    }
    let mut by_kind: std::collections::BTreeMap<&str, Ns> = Default::default();
    for t in &xla {
        for o in t.ops.iter().filter(|o| o.is_comm() && o.is_kernel()) {
            *by_kind
                .entry(o.coll.unwrap_or(CollKind::Unknown).name())
                .or_default() += o.dur;
        }
    }
    if by_kind.is_empty() {
        return Outcome::na("the XLA trace has no collective ops");
    }
    let total: Ns = by_kind.values().copied().sum();
    Outcome::seconds(total).with_parts(
        by_kind
            .into_iter()
            .map(|(k, ns)| (k.to_owned(), ns_to_s(ns)))
            .collect(),
    )
}

pub(crate) fn estimated_bandwidth(_: &Ctx) -> Outcome {
    Outcome::na(
        "CCL-Bench sums the XLA ops' `bytes_accessed` over the trace span; ccl-bench does not \
         read those per-op byte counts (device memory traffic: average_memory_bandwidth)",
    )
}

/// The lowest rank in scope: CCL-Bench's group-1 tools read `kineto_trace_0`
/// alone.
fn first_rank<'a>(ctx: &Ctx<'a>) -> Option<&'a RankTimeline> {
    ctx.ranks.iter().copied().min_by_key(|t| t.rank)
}

/// `traffic_window`: NCCL kernel time per iteration per GPU, in seconds, split
/// as CCL-Bench's heuristic splits it. Iterations are the first rank's
/// `RedistributeBackward` CPU ops (1 without any); an all-reduce that starts
/// inside one is data parallel, any other tensor parallel; broadcasts are
/// tensor parallel, all-gathers and reduce-scatters data parallel, send/recv
/// pipeline parallel.
pub(crate) fn traffic_window(ctx: &Ctx) -> Outcome {
    let Some(first) = first_rank(ctx) else {
        return Outcome::na("no ranks");
    };
    let marks: Vec<(Ns, Ns)> = ctx
        .each()
        .find(|(t, _)| t.rank == first.rank)
        .map(|(_, s)| s.iteration_marks.iter().map(|m| (m.start, m.end)).collect())
        .unwrap_or_default();
    let iters = marks.len().max(1) as f64;
    // Sums by kernel name from the kernel tables (a lean load keeps only
    // the communication ops); an all-reduce's part (dp inside an iteration
    // mark) needs its start, from the ops.
    let mut parts = [Ns::ZERO; 4];
    let mut any = false;
    for (t, s) in ctx.each() {
        for (id, ns) in s.kernel_table.kernel_times() {
            let name = t.name(id).to_ascii_lowercase();
            if !name.contains("nccl") {
                continue;
            }
            any = true;
            let part = if name.contains("allreduce") || name.contains("broadcast") {
                0
            } else if ["allgather", "reducescatter", "redistribute"]
                .iter()
                .any(|k| name.contains(k))
            {
                1
            } else if name.contains("send") || name.contains("recv") {
                2
            } else {
                3
            };
            parts[part] += ns;
        }
        if marks.is_empty() {
            continue;
        }
        for o in t.ops.iter().filter(|o| o.is_kernel()) {
            let name = t.name(o.name).to_ascii_lowercase();
            if name.contains("nccl")
                && name.contains("allreduce")
                && marks.iter().any(|&(a, b)| a <= o.start && o.start <= b)
            {
                parts[0] -= o.dur;
                parts[1] += o.dur;
            }
        }
    }
    if !any {
        return Outcome::na("the trace has no NCCL kernels");
    }
    let per = |ns: Ns| ns_to_s(ns) / (iters * ctx.ranks.len() as f64);
    let total: Ns = parts.iter().copied().sum();
    Outcome::value(per(total))
        .with_parts(
            ["tp", "dp", "pp", "other"]
                .iter()
                .zip(parts)
                .map(|(k, ns)| ((*k).to_owned(), per(ns)))
                .collect(),
        )
        .with_note(format!(
            "over {} iteration{} (RedistributeBackward on rank {}) and {} GPUs",
            iters,
            if iters == 1.0 { "" } else { "s" },
            first.rank,
            ctx.ranks.len()
        ))
}

/// `communication_overhead`: the first rank's NCCL kernel time / all its
/// kernel time (a fraction, 0-1).
pub(crate) fn communication_overhead(ctx: &Ctx) -> Outcome {
    let Some((t, s)) = ctx.each().min_by_key(|(t, _)| t.rank) else {
        return Outcome::na("no ranks");
    };
    let nccl = nccl_time(t, s);
    if s.kernel_sum <= Ns::ZERO {
        return Outcome::na(format!("rank {} has no GPU kernels", t.rank));
    }
    if t.format == crate::model::timeline::SourceFormat::Xla {
        // Its collectives are XLA ops, not NCCL kernels: CCL-Bench's 0
        // would say "no communication".
        return Outcome::na("counts NCCL kernels; an XLA trace's collectives are XLA ops");
    }
    Outcome::value(nccl.as_f64() / s.kernel_sum.as_f64())
        .with_note(format!("rank {}: NCCL kernels / all kernels", t.rank))
}

/// CCL-Bench's fixed link bandwidth for `bandwidth_utilization`, bytes/s.
const GROUP1_LINK: f64 = 100e9;

/// `bandwidth_utilization`: over the first rank's NCCL all-reduce kernels with
/// sizes, the mean of T_exp / T_obs, where T_exp = S (n − 1) / n / 100 GB/s
/// (CCL-Bench's ring model at its fixed 100 GB/s link).
pub(crate) fn bandwidth_utilization(ctx: &Ctx) -> Outcome {
    let Some(t) = first_rank(ctx) else {
        return Outcome::na("no ranks");
    };
    let mut utils = Vec::new();
    for o in t.ops.iter() {
        if !(o.is_kernel() && o.coll == Some(CollKind::AllReduce) && is_nccl(t.name(o.name))) {
            continue;
        }
        let Some(meta) = t.coll_meta(o) else {
            continue;
        };
        let (Some(s), Some(n)) = (meta.in_bytes(), meta.group_size) else {
            continue;
        };
        if n <= 1 || s == 0 || o.dur <= Ns::ZERO {
            continue;
        }
        let n = f64::from(n);
        let expected = s as f64 * (n - 1.0) / n / GROUP1_LINK;
        utils.push(expected / (o.dur.as_f64() / 1e9));
    }
    if utils.is_empty() {
        return Outcome::na(format!(
            "rank {} has no NCCL all-reduce kernel with its message size and group size \
             (Kineto collective args)",
            t.rank
        ));
    }
    let n = utils.len();
    Outcome::value(utils.iter().sum::<f64>() / n as f64).with_note(format!(
        "rank {}: mean over {n} all-reduce kernels at CCL-Bench's fixed 100 GB/s link",
        t.rank
    ))
}

/// CCL-Bench's `gpu_step_score` defaults: reference GPUs, reference step
/// (s) and the weight of the GPU term.
const SCORE_G0: f64 = 16.0;
const SCORE_T0: f64 = 0.44;
const SCORE_W: f64 = 0.5;

/// `gpu_step_score`: w · G0 / G + (1 − w) · T0 / T, with G the ranks loaded,
/// T `avg_step_time`, and CCL-Bench's defaults G0 = 16, T0 = 0.44 s, w = 0.5.
pub(crate) fn gpu_step_score(ctx: &Ctx) -> Outcome {
    let step = match super::steps::avg_step_time(ctx) {
        Outcome::Value(v) => v.value,
        Outcome::NotApplicable(why) => return Outcome::na(why),
    };
    let g = ctx.ranks.len() as f64;
    if step <= 0.0 || g == 0.0 {
        return Outcome::na("needs a positive step time and at least one rank");
    }
    Outcome::value(SCORE_W * SCORE_G0 / g + (1.0 - SCORE_W) * SCORE_T0 / step).with_note(format!(
        "0.5 x 16 / {g} GPUs + 0.5 x 0.44 s / {step:.6} s (CCL-Bench's defaults G0 = 16, \
         T0 = 0.44 s, w = 0.5)"
    ))
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::{two_rank_example, Coll, RankTrace};

    /// One part of a metric's breakdown (as `--metric NAME.PART` prints it).
    fn part(t: &crate::model::Trace, name: &str, part: &str) -> f64 {
        crate::metrics::part_of(eval(t, name, None), part)
            .as_value()
            .unwrap_or_else(|| panic!("{name}.{part}"))
    }

    #[test]
    fn straggler_is_ccl_benchs_delay() {
        // NCCL kernel time: rank 0 30 + 30 = 60 µs, rank 1 100 µs.
        let t = trace(&two_rank_example());
        assert_close(value(&t, "straggler", None), (100.0 - 60.0) / 100.0);
        assert_close(value(&t, "straggler_metrics", None), 0.4);
        assert_close(part(&t, "straggler_metrics", "slowdown"), 100.0 / 60.0);
        // One rank: CCL-Bench prints 0.0; here it does not apply.
        assert!(matches!(
            eval(&t, "straggler", Some(1)),
            Outcome::NotApplicable(_)
        ));
    }

    #[test]
    fn trace_span_and_compute_kernels() {
        // Kernels: rank 0 [10, 180), rank 1 [0, 200): 200 µs.
        let t = trace(&two_rank_example());
        assert_close(value(&t, "total_trace_time", None), 200e-6);
        // Non-NCCL kernels: rank 0 35 + 40 + 10 = 85 µs, rank 1 100 µs.
        assert_close(value(&t, "kernel_compute_time_group_6", None), 185e-6);
        // Rank 0: NCCL 60 of 145 µs of kernels.
        assert_close(value(&t, "communication_overhead", None), 60.0 / 145.0);
    }

    #[test]
    fn benchmark_file_figures_say_why_not() {
        let t = trace(&two_rank_example());
        for name in [
            "ttft_group_6",
            "tpot_group_6",
            "throughput_group_6",
            "estimated_bandwidth",
            "comm_kernel_breakdown_tpu",
        ] {
            assert!(
                matches!(eval(&t, name, None), Outcome::NotApplicable(_)),
                "{name}"
            );
        }
    }

    #[test]
    fn bandwidth_utilization_at_100_gbps() {
        // Rank 0's all-reduce: 1 MiB of f32 = 4 MiB over 2 ranks in 30 µs;
        // expected 4 MiB x 1/2 / 100 GB/s = 20.97 µs.
        let t = trace(&two_rank_example());
        let s = 4.0 * 1048576.0;
        assert_close(
            value(&t, "bandwidth_utilization", None),
            (s / 2.0 / 100e9) / 30e-6,
        );
    }

    #[test]
    fn traffic_window_splits_by_kind() {
        // One rank, no RedistributeBackward: one iteration. An all-reduce
        // (tp, outside any iteration mark) of 10 µs, an all-gather (dp) of 4,
        // a send (pp) of 6.
        let mut r = RankTrace::new(Some(0), 1, 10);
        let c = Coll::all_reduce_f32(1, 2);
        r.collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 0.0, 10.0, 20, &c);
        r.collective("ncclDevKernel_AllGather_RING_LL", 20.0, 4.0, 20, &c);
        r.collective("ncclDevKernel_SendRecv", 30.0, 6.0, 20, &c);
        let t = trace(&[r]);
        assert_close(value(&t, "traffic_window", None), 20e-6);
        assert_close(part(&t, "traffic_window", "tp"), 10e-6);
        assert_close(part(&t, "traffic_window", "dp"), 4e-6);
        assert_close(part(&t, "traffic_window", "pp"), 6e-6);
    }

    /// Two ranks, two `RedistributeBackward` marks on rank 0 ([0, 50) and
    /// [100, 150)): two iterations. Each rank runs an all-reduce of 10 µs at
    /// 20 (inside a mark: dp) and one of 6 µs at 60 (outside: tp). Per
    /// iteration per GPU: dp 2 x 10 / 4 = 5 µs, tp 2 x 6 / 4 = 3 µs.
    #[test]
    fn traffic_window_counts_iterations_by_rank_0s_marks() {
        let c = Coll::all_reduce_f32(1, 2);
        let ranks: Vec<RankTrace> = (0..2)
            .map(|r| {
                let mut t = RankTrace::new(Some(r), 2, 10);
                if r == 0 {
                    t.cpu_op("RedistributeBackward", 0.0, 50.0, None);
                    t.cpu_op("RedistributeBackward", 100.0, 50.0, None);
                }
                let a = t.collective(
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                    20.0,
                    10.0,
                    20,
                    &c,
                );
                let b = t.collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 60.0, 6.0, 20, &c);
                // Launched from the marks' thread, which keeps its CPU ops.
                t.launch(a, 15.0);
                t.launch(b, 55.0);
                t
            })
            .collect();
        let t = trace(&ranks);
        assert_close(part(&t, "traffic_window", "dp"), 5e-6);
        assert_close(part(&t, "traffic_window", "tp"), 3e-6);
        assert_close(value(&t, "traffic_window", None), 8e-6);
    }

    #[test]
    fn gpu_step_score_by_hand() {
        // Steps 100, 100 µs on rank 0 and 200 on rank 1: means 100 and 200,
        // averaged 150 µs; 2 GPUs: 0.5 x 16 / 2 + 0.5 x 0.44 / 150e-6.
        let t = trace(&two_rank_example());
        assert_close(
            value(&t, "gpu_step_score", None),
            0.5 * 8.0 + 0.5 * 0.44 / 150e-6,
        );
    }
}
