//! Collective sizes: volumes, achieved bus bandwidth (the nccl-tests
//! definition), peer-to-peer link utilization, and a Hockney α-β fit.

use super::ctx::{BusSum, BusSums, Ctx};
use super::outcome::{Lack, Outcome};
use crate::model::{CollKind, DeviceOp, Ns, RankTimeline};

/// A communication op with what its size metadata tells.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SizedColl {
    pub kind: CollKind,
    /// Bytes this rank contributes (`In msg nelems` × element size).
    pub msg_bytes: u64,
    /// nccl-tests' S: the total data size the algorithm bandwidth is computed
    /// from: the gathered output for all-gather, the input otherwise.
    pub data_bytes: u64,
    /// Ranks in the collective's group.
    pub n: Option<u32>,
    pub dur: Ns,
    pub step: Option<u32>,
}

impl SizedColl {
    /// nccl-tests' bus-bandwidth factor: 2(n−1)/n for all-reduce, (n−1)/n for
    /// all-gather, reduce-scatter and all-to-all, 1 for point-to-point.
    pub(crate) fn bus_factor(&self) -> Option<f64> {
        self.kind.bus_factor(self.n?)
    }
}

fn sized_op(t: &RankTimeline, o: &DeviceOp) -> Option<SizedColl> {
    if !o.is_comm() {
        return None;
    }
    let m = t.coll_meta(o)?;
    let msg_bytes = m.in_bytes()?;
    let kind = o.coll.unwrap_or(m.kind);
    let data_bytes = match kind {
        CollKind::AllGather => m.out_bytes()?,
        _ => msg_bytes,
    };
    Some(SizedColl {
        kind,
        msg_bytes,
        data_bytes,
        n: m.group_size.or(t.world_size),
        dur: o.dur,
        step: o.step.get(),
    })
}

/// Sized collectives of one rank.
pub(crate) fn sized(t: &RankTimeline) -> impl Iterator<Item = SizedColl> + '_ {
    t.ops.iter().filter_map(|o| sized_op(t, o))
}

const NO_SIZES: &str =
    "no communication op has size metadata (Kineto collective args or record_param_comms)";

/// [`BusSums`] in one pass for every kind, in the ops' order (each kind's
/// sums add up as a pass for it alone would).
fn bus_sums(ctx: &Ctx) -> BusSums {
    let mut s = BusSums::default();
    for t in &ctx.ranks {
        for c in sized(t) {
            s.any_sized = true;
            if c.dur <= Ns::ZERO {
                continue;
            }
            // A group of one moves nothing over a link.
            let Some(f) = c.bus_factor().filter(|&f| f > 0.0) else {
                continue;
            };
            let at = match s.by_kind.iter().position(|k| k.0 == c.kind) {
                Some(at) => at,
                None => {
                    s.by_kind.push((c.kind, BusSum::default()));
                    s.by_kind.len() - 1
                }
            };
            let k = &mut s.by_kind[at].1;
            k.bytes += c.data_bytes as f64 * f;
            k.alg_bytes += c.data_bytes;
            k.time += c.dur;
            k.ops += 1;
        }
    }
    s
}

/// Achieved bus bandwidth of one collective kind: Σ S × factor / Σ time over
/// its ops on the ranks in scope (duration-weighted), in GB/s.
fn busbw(ctx: &Ctx, kind: CollKind) -> Outcome {
    let sums = ctx.bus_sums(|| bus_sums(ctx));
    let any_sized = sums.any_sized;
    let BusSum {
        bytes,
        alg_bytes,
        time,
        ops,
    } = (sums.by_kind.iter())
        .find(|k| k.0 == kind)
        .map_or_else(BusSum::default, |k| k.1);
    if !any_sized {
        return Outcome::lacks(Lack::CollSizes, NO_SIZES);
    }
    if ops == 0 {
        return Outcome::na(format!(
            "no {} with a known size and a group of 2 or more ranks",
            kind.name()
        ));
    }
    Outcome::value(bytes / time.as_f64()).with_note(format!(
        "busbw over {ops} {} ops: Σ size × bus factor / Σ time; algbw (Σ size / Σ time) {:.3} GB/s",
        kind.name(),
        alg_bytes as f64 / time.as_f64()
    ))
}

pub(crate) fn bw_allreduce(ctx: &Ctx) -> Outcome {
    busbw(ctx, CollKind::AllReduce)
}
pub(crate) fn bw_allgather(ctx: &Ctx) -> Outcome {
    busbw(ctx, CollKind::AllGather)
}
pub(crate) fn bw_reducescatter(ctx: &Ctx) -> Outcome {
    busbw(ctx, CollKind::ReduceScatter)
}
pub(crate) fn bw_alltoall(ctx: &Ctx) -> Outcome {
    busbw(ctx, CollKind::AllToAll)
}

/// Point-to-point transfers' bandwidth as % of the card's link bandwidth
/// (scale-up within a node, scale-out across nodes).
pub(crate) fn bw_peertopeer(ctx: &Ctx) -> Outcome {
    let (link_gbps, link) = match link_gbps(ctx) {
        Ok(l) => l,
        Err(na) => return na,
    };
    let (mut bytes, mut time) = (0u64, Ns::ZERO);
    let mut any_sized = false;
    for t in &ctx.ranks {
        for c in sized(t) {
            any_sized = true;
            if c.kind == CollKind::SendRecv && c.dur > Ns::ZERO {
                bytes += c.msg_bytes;
                time += c.dur;
            }
        }
    }
    if !any_sized {
        return Outcome::lacks(Lack::CollSizes, NO_SIZES);
    }
    if time == Ns::ZERO {
        return Outcome::na("no point-to-point (send/recv) transfers with a known size");
    }
    let achieved_gbps = bytes as f64 * 8.0 / time.as_f64(); // bits per ns = Gb/s
    Outcome::value(achieved_gbps / link_gbps * 100.0).with_note(format!(
        "{achieved_gbps:.1} Gb/s of a {link_gbps} Gb/s {link} link"
    ))
}

/// The link bandwidth of the workload card in Gb/s, and which link it is:
/// scale-up within a node, else scale-out; not applicable without it.
pub(crate) fn link_gbps(ctx: &Ctx) -> Result<(f64, &'static str), Outcome> {
    let Some(card) = &ctx.trace.card else {
        return Err(Outcome::na(
            "needs the link bandwidth from a workload card (network_topo.bandwidth_gbps)",
        ));
    };
    let hw = &card.workload.hardware;
    let bw = &hw.network_topo.bandwidth_gbps;
    let one_node = match (hw.xpu_spec.total_count, hw.xpu_spec.count_per_node) {
        (Some(t), Some(p)) => t <= p,
        _ => true,
    };
    match (bw.first(), bw.get(1)) {
        (_, Some(&up)) if one_node => Ok((up, "scale-up")),
        (Some(&out), _) => Ok((out, "scale-out")),
        _ => Err(Outcome::na(
            "the workload card has no network_topo.bandwidth_gbps",
        )),
    }
}

/// GB a rank sends per step in collectives of `kind` (all kinds when `None`):
/// message bytes of the ops launched in steps / steps, on rank 0 (or `--rank`).
fn volume(ctx: &Ctx, kind: Option<CollKind>) -> Outcome {
    let Some(t) = ctx.focus.filter(|t| sized(t).next().is_some()) else {
        // No sizes in the profiler trace: the execution trace's nodes have them.
        return match ctx
            .focus_et()
            .filter(|e| e.colls.iter().any(|c| c.bytes > 0))
        {
            Some(e) => {
                let bytes: u64 = e
                    .colls
                    .iter()
                    .filter(|c| kind.is_none_or(|k| c.kind == k))
                    .map(|c| c.bytes)
                    .sum();
                Outcome::value(bytes as f64 / 1e9).with_note(format!(
                    "rank {}, one iteration, from the execution trace {}",
                    e.rank,
                    e.source.display()
                ))
            }
            None => Outcome::lacks(Lack::CollSizes, NO_SIZES),
        };
    };
    let bytes: u64 = sized(t)
        .filter(|c| kind.is_none_or(|k| c.kind == k) && t.counts(c.step))
        .map(|c| c.msg_bytes)
        .sum();
    let steps = t.step_count();
    Outcome::value(bytes as f64 / 1e9 / steps as f64).with_note(format!(
        "rank {}, mean per step over {}",
        t.rank,
        t.steps_used()
    ))
}

pub(crate) fn vol_allreduce(ctx: &Ctx) -> Outcome {
    volume(ctx, Some(CollKind::AllReduce))
}
pub(crate) fn vol_allgather(ctx: &Ctx) -> Outcome {
    volume(ctx, Some(CollKind::AllGather))
}
pub(crate) fn vol_reducescatter(ctx: &Ctx) -> Outcome {
    volume(ctx, Some(CollKind::ReduceScatter))
}
pub(crate) fn vol_alltoall(ctx: &Ctx) -> Outcome {
    volume(ctx, Some(CollKind::AllToAll))
}
pub(crate) fn vol_total(ctx: &Ctx) -> Outcome {
    volume(ctx, None)
}

/// Least-squares fit of t = α + β · bytes over all-reduce ops with a size.
pub(crate) fn hockney_fit(ctx: &Ctx) -> Result<(f64, f64, usize), String> {
    // Points by size, not one per op (see `fit::Points`).
    let mut pts = crate::derive::fit::Points::default();
    for c in ctx.ranks.iter().flat_map(|t| sized(t)) {
        if c.kind == CollKind::AllReduce && c.dur > Ns::ZERO {
            pts.add(c.msg_bytes as f64, c.dur.as_f64() / 1e9);
        }
    }
    let distinct = pts.distinct();
    if distinct < 2 {
        return Err(format!(
            "needs all-reduce ops of at least 2 distinct sizes; the trace has {} op(s) of {distinct} size(s)",
            pts.len()
        ));
    }
    let l = pts.line().expect("two distinct sizes");
    Ok((l.alpha, l.beta, l.points))
}

pub(crate) fn hockney_alpha(ctx: &Ctx) -> Outcome {
    match ctx.hockney(|| hockney_fit(ctx)).clone() {
        Ok((a, _, n)) => Outcome::value(a).with_note(format!("fit over {n} all-reduce ops")),
        Err(e) => Outcome::na(e),
    }
}

pub(crate) fn hockney_beta(ctx: &Ctx) -> Outcome {
    match ctx.hockney(|| hockney_fit(ctx)).clone() {
        Ok((_, b, n)) => Outcome::value(b).with_note(format!("fit over {n} all-reduce ops")),
        Err(e) => Outcome::na(e),
    }
}

pub(crate) fn hockney_inverse_beta(ctx: &Ctx) -> Outcome {
    match ctx.hockney(|| hockney_fit(ctx)).clone() {
        Ok((_, b, _)) if b > 0.0 => Outcome::value(1.0 / b),
        Ok((_, b, _)) => Outcome::na(format!(
            "the fitted β is {b:e} s/B (time does not grow with size), so 1/β is meaningless"
        )),
        Err(e) => Outcome::na(e),
    }
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value, with_card};
    use crate::metrics::Outcome;
    use crate::synth::{two_rank_example, Coll, RankTrace};

    #[test]
    fn bus_bandwidth() {
        // All-reduce, n = 2, factor 2(n−1)/n = 1: 2 × 4,194,304 B over 30 + 100 µs.
        let t = trace(&two_rank_example());
        assert_close(
            value(&t, "bandwidth_utilization_allreduce_group_6", None),
            2.0 * 4_194_304.0 / 130_000.0,
        );
        // All-gather: S = output 2^19 bf16 = 1,048,576 B, factor 1/2, in 30 µs.
        assert_close(
            value(&t, "bandwidth_utilization_allgather_group_6", None),
            1_048_576.0 * 0.5 / 30_000.0,
        );
        let na = eval(&t, "bandwidth_utilization_alltoall_group_6", None);
        assert!(
            matches!(na, Outcome::NotApplicable(ref w) if w.contains("all_to_all")),
            "{na:?}"
        );
    }

    #[test]
    fn volumes_per_step_on_rank_0() {
        // Rank 0, 2 steps: all-reduce 4,194,304 B, all-gather 524,288 B.
        let t = trace(&two_rank_example());
        assert_close(
            value(&t, "collective_vol_allreduce_gb", None),
            4_194_304.0 / 2.0 / 1e9,
        );
        assert_close(
            value(&t, "collective_vol_allgather_gb", None),
            524_288.0 / 2.0 / 1e9,
        );
        assert_close(
            value(&t, "collective_vol_total_gb", None),
            4_718_592.0 / 2.0 / 1e9,
        );
        // Sized collectives exist, none is an all-to-all: a true zero.
        assert_close(value(&t, "collective_vol_alltoall_gb", None), 0.0);
        // Rank 1: one step with the all-reduce.
        assert_close(
            value(&t, "collective_vol_total_gb", Some(1)),
            4_194_304.0 / 1e9,
        );
    }

    #[test]
    fn volumes_and_counts_from_an_execution_trace_alone() {
        use crate::model::exec_trace::{EtColl, EtRank};
        use crate::model::CollKind;
        use crate::model::Trace;
        // Rank 0's ET: all-reduce 400 B + 600 B, all-to-all 60 B; rank 1's is
        // ignored (single-rank metrics describe rank 0).
        let colls = vec![
            EtColl::sized(CollKind::AllReduce, 400),
            EtColl::sized(CollKind::AllToAll, 60),
            EtColl::sized(CollKind::AllReduce, 600),
        ];
        let et = |rank, colls| EtRank {
            rank,
            colls,
            ..EtRank::default()
        };
        let t = Trace {
            et: vec![et(0, colls), et(1, Vec::new())],
            ..Trace::default()
        };
        assert_close(value(&t, "coll_call_num", None), 3.0);
        assert_close(value(&t, "collective_vol_allreduce_gb", None), 1000.0 / 1e9);
        assert_close(value(&t, "collective_vol_alltoall_gb", None), 60.0 / 1e9);
        assert_close(value(&t, "collective_vol_total_gb", None), 1060.0 / 1e9);
        assert_close(value(&t, "collective_vol_allgather_gb", None), 0.0);
    }

    #[test]
    fn hockney_fit_recovers_alpha_beta() {
        // t = 10 µs + bytes / 100 GB/s over four sizes.
        let mut r = RankTrace::new(Some(0), 4, 10);
        let mut ts = 0.0;
        for nelems in [1u64 << 10, 1 << 16, 1 << 20, 1 << 22] {
            let bytes = nelems * 4;
            let dur_us = 10.0 + bytes as f64 / 100e9 * 1e6;
            let c = Coll::all_reduce_f32(nelems, 4);
            r.collective(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                ts,
                dur_us,
                20,
                &c,
            );
            ts += 1000.0;
        }
        let t = trace(&[r]);
        // µs → ns rounding in the trace leaves ~1e-12 s of noise.
        assert!((value(&t, "hockney_alpha_s", None) - 10e-6).abs() < 1e-9);
        assert!((value(&t, "hockney_beta_s_per_byte", None) - 1e-11).abs() < 1e-14);
        assert!((value(&t, "hockney_inverse_beta_Bps", None) / 100e9 - 1.0).abs() < 1e-3);
        // The two-rank example has one all-reduce size only.
        let t = trace(&two_rank_example());
        assert!(matches!(
            eval(&t, "hockney_alpha_s", None),
            Outcome::NotApplicable(_)
        ));
    }

    #[test]
    fn peer_to_peer_share_of_the_link() {
        // 1 MB sent in 10 µs = 800 Gb/s over a 3600 Gb/s scale-up link (one node).
        let mut r = RankTrace::new(Some(0), 2, 10);
        let c = Coll {
            name: "send",
            in_nelems: 250_000,
            out_nelems: 250_000,
            dtype: "Float",
            group_size: 2,
        };
        r.collective("ncclDevKernel_SendRecv", 0.0, 10.0, 20, &c);
        let mut t = trace(&[r]);
        assert!(matches!(
            eval(&t, "bandwidth_utilization_peertopeer_group_6", None),
            Outcome::NotApplicable(_)
        ));
        with_card(&mut t);
        assert_close(
            value(&t, "bandwidth_utilization_peertopeer_group_6", None),
            800.0 / 3600.0 * 100.0,
        );
    }
}
