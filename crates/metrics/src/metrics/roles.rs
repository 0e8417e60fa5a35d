//! Communication per parallel group role (tp, dp, pp, ...; see
//! `derive::groups`): time, wait and bandwidth split by the role of the
//! process group each collective ran in, and Hockney fits per kind and role.
//! Each metric's value is the whole (all groups); its parts are the roles.

use std::collections::HashMap;

use rayon::prelude::*;

use super::ctx::Ctx;
use super::outcome::Outcome;
use crate::derive::instances::{fits, FitRow};
use crate::model::collectives::group_of;
use crate::model::time::ns_to_s;
use crate::model::{DeviceOp, Ns, RankTimeline};

const NO_COMM: &str = "the trace has no communication kernels";
const NO_MATCHES: &str =
    "no collective is seen on two or more ranks (needs the traces of several ranks of one run)";

/// The labels breakdowns use (roles in a fixed order, then groups without
/// one by name), and each group's label index.
struct Labels {
    names: Vec<String>,
    of_group: HashMap<String, usize>,
    /// Which groups each label covers and how their roles were inferred.
    note: String,
}

fn labels(ctx: &Ctx) -> Labels {
    let mut keyed: Vec<(Option<crate::derive::groups::Role>, String)> = ctx
        .groups()
        .iter()
        .map(|g| (g.role.map(|r| r.0), g.label()))
        .collect();
    keyed.sort();
    keyed.dedup();
    let names: Vec<String> = keyed.into_iter().map(|k| k.1).collect();
    let index = |label: &str| names.iter().position(|n| n == label).unwrap_or(0);
    let of_group = ctx
        .groups()
        .iter()
        .map(|g| (g.name.clone(), index(&g.label())))
        .collect();
    let note = names
        .iter()
        .map(|label| {
            let gs: Vec<_> = ctx
                .groups()
                .iter()
                .filter(|g| g.label() == *label)
                .collect();
            let mut shown: Vec<String> = gs.iter().take(3).map(|g| g.name.clone()).collect();
            if gs.len() > 3 {
                shown.push(format!("+{}", gs.len() - 3));
            }
            let basis = gs[0]
                .role
                .map_or(String::new(), |r| format!(", by {}", r.1.name()));
            let n = gs[0].ranks.len();
            let ranks = format!("{n} rank{}{basis}", if n == 1 { "" } else { "s" });
            if gs[0].name == crate::model::collectives::DEFAULT {
                return format!("{label}: collectives recording no process group ({ranks})");
            }
            format!(
                "{label}: group{} {} ({ranks})",
                if gs.len() > 1 { "s" } else { "" },
                shown.join(", "),
            )
        })
        .collect::<Vec<_>>()
        .join("; ");
    Labels {
        names,
        of_group,
        note,
    }
}

/// The outcome of per-rank, per-label values: the value is the mean over
/// ranks of their sums, each part the mean over ranks of that label.
fn per_label(per_rank: Vec<(u32, Vec<f64>)>, l: &Labels, why: &str) -> Outcome {
    if per_rank.is_empty() {
        return Outcome::na(why);
    }
    let n = per_rank.len() as f64;
    let parts = l
        .names
        .iter()
        .enumerate()
        .map(|(i, name)| {
            (
                name.clone(),
                per_rank.iter().map(|r| r.1[i]).sum::<f64>() / n,
            )
        })
        .collect();
    Outcome::rank_mean(
        per_rank.iter().map(|(r, v)| (*r, Some(v.iter().sum()))),
        why,
    )
    .with_parts(parts)
    .with_note(l.note.clone())
}

/// One rank's time summed per label of its ops' groups.
struct LabelSums<'a> {
    labels: &'a Labels,
    t: &'a RankTimeline,
    sums: Vec<Ns>,
    /// Label by the op's collective record (the last place: ops without
    /// one), found once per record: a rank has a few and thousands of ops.
    index: Vec<usize>,
}

impl<'a> LabelSums<'a> {
    fn new(labels: &'a Labels, t: &'a RankTimeline) -> Self {
        Self {
            labels,
            t,
            sums: vec![Ns::ZERO; labels.names.len()],
            index: vec![usize::MAX; t.colls.len() + 1],
        }
    }

    fn add(&mut self, op: &DeviceOp, d: Ns) {
        let (t, l) = (self.t, self.labels);
        let record = (op.meta.get().map(|m| m as usize))
            .filter(|&m| m < t.colls.len())
            .unwrap_or(t.colls.len());
        let i = &mut self.index[record];
        if *i == usize::MAX {
            *i = l.of_group.get(group_of(t, op)).copied().unwrap_or(0);
        }
        self.sums[*i] += d;
    }

    /// Seconds per measured step, per label.
    fn per_step(&self) -> Vec<f64> {
        let steps = self.t.step_count() as f64;
        self.sums.iter().map(|&s| ns_to_s(s) / steps).collect()
    }
}

/// Communication kernel time per step by group role, per rank (kernels
/// launched in measured steps / steps), averaged over ranks with kernels.
pub(crate) fn comm_time_by_role(ctx: &Ctx) -> Outcome {
    let l = labels(ctx);
    if l.names.is_empty() {
        return Outcome::na(NO_COMM);
    }
    // Ranks in parallel: a pass over every collective of the run.
    let per_rank = (ctx.ranks.par_iter().zip(ctx.stats()))
        .filter(|(_, s)| s.kernels > 0)
        .map(|(t, _)| {
            let mut sums = LabelSums::new(&l, t);
            for op in t.kernels().filter(|k| k.is_comm() && t.counts(k.step)) {
                sums.add(op, op.dur);
            }
            (t.rank, sums.per_step())
        })
        .collect();
    per_label(per_rank, &l, NO_COMM)
}

/// Time waiting inside matched collectives for their last member, per step,
/// by group role; averaged over the ranks with matched collectives.
pub(crate) fn comm_wait_by_role(ctx: &Ctx) -> Outcome {
    let l = labels(ctx);
    // Ranks in parallel, each from its own ops and the collectives' last
    // starts: a member's wait is the same as a pass over every member makes.
    let per_rank: Vec<(u32, Vec<f64>)> = ctx
        .ranks
        .par_iter()
        .filter_map(|t| {
            let mut sums = LabelSums::new(&l, t);
            let mut matched = false;
            ctx.last_starts().each_wait(t, |op, wait| {
                if t.counts(op.step) {
                    sums.add(op, wait);
                    matched = true;
                }
            });
            matched.then(|| (t.rank, sums.per_step()))
        })
        .collect();
    per_label(per_rank, &l, NO_MATCHES)
}

/// Bus bandwidth of the transfer (once every member has arrived) by group
/// role: Σ S × bus factor / Σ transfer over matched collectives with a size,
/// in GB/s; with `--rank`, the collectives that rank took part in.
pub(crate) fn busbw_by_role(ctx: &Ctx) -> Outcome {
    let l = labels(ctx);
    let whole = ctx.ranks.len() == ctx.trace.ranks.len();
    // Whether each rank index is asked for: a collective's members are its
    // group's ranks, known without reading their ops.
    let asked: Vec<bool> = ctx
        .trace
        .ranks
        .iter()
        .map(|t| ctx.ranks.iter().any(|r| r.rank == t.rank))
        .collect();
    let mut moved = vec![0.0; l.names.len()];
    let mut time = vec![0.0; l.names.len()];
    for c in ctx.collective_rows() {
        if !whole
            && !ctx
                .instances()
                .get(c.id)
                .ranks()
                .iter()
                .any(|&r| asked[r as usize])
        {
            continue;
        }
        if let Some(bw) = c.busbw().filter(|_| c.transfer > Ns::ZERO) {
            let i = l.of_group.get(c.group).copied().unwrap_or(0);
            let secs = ns_to_s(c.transfer);
            moved[i] += bw * secs;
            time[i] += secs;
        }
    }
    let total: f64 = time.iter().sum();
    if total <= 0.0 {
        return Outcome::na(
            "no collective matched across ≥ 2 ranks has a known size (Kineto collective args)",
        );
    }
    let parts = l
        .names
        .iter()
        .zip(moved.iter().zip(&time))
        .filter(|(_, (_, &t))| t > 0.0)
        .map(|(name, (&m, &t))| (name.clone(), m / t / 1e9))
        .collect();
    Outcome::value(moved.iter().sum::<f64>() / total / 1e9)
        .with_parts(parts)
        .with_note(l.note)
}

/// The Hockney fits per kind and role; the value is the fit over the most
/// instances, each fit a part labelled `kind role`.
fn fit_parts(ctx: &Ctx, pick: fn(&FitRow) -> f64) -> Outcome {
    let fs = fits(ctx.collective_rows().iter());
    let Some(main) = fs.iter().max_by_key(|f| f.line.points) else {
        return Outcome::na(
            "needs collectives matched across ≥ 2 ranks of one kind and group role in at least 2 distinct sizes",
        );
    };
    let label = |f: &FitRow| {
        let base = format!("{} {}", f.kind.name(), f.role);
        // One kind and role in groups of several sizes: tell them apart.
        if fs
            .iter()
            .filter(|g| g.kind == f.kind && g.role == f.role)
            .count()
            > 1
        {
            format!("{base} n{}", f.size)
        } else {
            base
        }
    };
    Outcome::value(pick(main))
        .with_parts(fs.iter().map(|f| (label(f), pick(f))).collect())
        .with_note(format!(
            "{}: transfer over {} instances of {} sizes (the value); {} fit(s) in all",
            label(main),
            main.line.points,
            main.sizes,
            fs.len()
        ))
}

pub(crate) fn hockney_alpha_by_role(ctx: &Ctx) -> Outcome {
    fit_parts(ctx, |f| f.line.alpha)
}

pub(crate) fn hockney_beta_by_role(ctx: &Ctx) -> Outcome {
    fit_parts(ctx, |f| f.line.beta)
}

pub(crate) fn hockney_residual_by_role(ctx: &Ctx) -> Outcome {
    fit_parts(ctx, |f| f.line.residual)
}

#[cfg(test)]
mod tests {
    use crate::metrics::testing::{assert_close, eval, trace, value, with_card};
    use crate::metrics::Outcome;
    use crate::synth::{late_pair, tp_dp_grid};

    fn parts(t: &crate::model::Trace, name: &str) -> Vec<(String, f64)> {
        match eval(t, name, None) {
            Outcome::Value(m) => m.parts,
            na => panic!("{name}: {na:?}"),
        }
    }

    fn part(p: &[(String, f64)], label: &str) -> f64 {
        p.iter()
            .find(|x| x.0 == label)
            .unwrap_or_else(|| panic!("no part {label} in {p:?}"))
            .1
    }

    #[test]
    fn time_wait_and_bandwidth_per_role() {
        for descs in [true, false] {
            let t = trace(&tp_dp_grid(descs));
            // tp: ranks 0, 2 20 µs per step, ranks 1, 3 15 µs; dp: (30 + 50) / 2 µs.
            let p = parts(&t, "comm_time_by_role_s");
            assert_eq!(p.len(), 2, "{p:?}");
            assert_close(part(&p, "tp"), 17.5e-6);
            assert_close(part(&p, "dp"), 40e-6);
            assert_close(value(&t, "comm_time_by_role_s", None), 57.5e-6);
            assert_close(
                value(&t, "comm_time_by_role_s", None),
                value(&t, "total_communication_time", None),
            );
            // Ranks 0 and 2 wait 5 µs per step for their late tp partner.
            let p = parts(&t, "comm_wait_by_role_s");
            assert_close(part(&p, "tp"), 2.5e-6);
            assert_close(part(&p, "dp"), 0.0);
            assert_close(
                value(&t, "comm_wait_by_role_s", None),
                value(&t, "comm_wait_time_s", None),
            );
            assert_close(value(&t, "comm_wait_by_role_s", Some(0)), 5e-6);
            // Bus factor 1 (all-reduce of 2): tp 1 MiB in 15 µs; dp 3 MiB
            // per group in 80 µs; all: 10 MiB in 220 µs.
            let p = parts(&t, "busbw_by_role_gbps");
            assert_close(part(&p, "tp"), 1_048_576.0 / 15e-6 / 1e9);
            assert_close(part(&p, "dp"), 3_145_728.0 / 80e-6 / 1e9);
            assert_close(
                value(&t, "busbw_by_role_gbps", None),
                10_485_760.0 / 220e-6 / 1e9,
            );
        }
    }

    /// A send/recv pair's wait belongs to its group's role: matched by its
    /// (group, source, destination) channel, it is labelled by the group,
    /// as its time is (it went to whichever label came first before).
    #[test]
    fn a_point_to_point_wait_is_its_groups() {
        use crate::synth::{Coll, RankTrace};
        let ranks: Vec<RankTrace> = (0..2u32)
            .map(|rank| {
                let mut r = RankTrace::new(Some(rank), 2, 10);
                r.process_group("1", "mesh_tp", &[0, 1]);
                r.process_group("2", "mesh_pp", &[0, 1]);
                r.step(1, 0.0, 100.0);
                let tp = Coll::all_reduce_f32(1 << 18, 2);
                let ar = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
                r.collective_in(ar, 10.0, 10.0, 20, &tp, ("1", &[0, 1]));
                // Rank 0 sends at 30 µs, rank 1 receives from 40: rank 0
                // waits 10 µs; both end at 50.
                let (send, at) = (rank == 0, if rank == 0 { 30.0 } else { 40.0 });
                r.p2p(send, Some(1 - rank), at, 50.0 - at, 2);
                r.last_in_group("2");
                r
            })
            .collect();
        let t = trace(&ranks);
        let p = parts(&t, "comm_wait_by_role_s");
        assert_close(part(&p, "pp"), 5e-6);
        assert_close(part(&p, "tp"), 0.0);
        let p = parts(&t, "comm_time_by_role_s");
        assert_close(part(&p, "pp"), 15e-6);
        assert_close(part(&p, "tp"), 10e-6);
    }

    #[test]
    fn roles_say_how_they_were_inferred() {
        let note = |t: &crate::model::Trace| match eval(t, "comm_time_by_role_s", None) {
            Outcome::Value(m) => m.note.unwrap_or_default(),
            na => panic!("{na:?}"),
        };
        let t = trace(&tp_dp_grid(true));
        assert_eq!(
            note(&t),
            "tp: groups 1, 2 (2 ranks, by pg_desc); dp: groups 3, 4 (2 ranks, by pg_desc)"
        );
        let mut t = trace(&tp_dp_grid(false));
        assert!(note(&t).contains("by layout"), "{}", note(&t));
        // The card's tp 2 × dp_shard 2 names them instead.
        with_card(&mut t);
        let card = t.card.as_mut().unwrap();
        card.executor.model_plan_parallelization.tp = Some(2.0);
        card.executor.model_plan_parallelization.dp_shard = Some(2.0);
        assert!(note(&t).contains("tp: groups 1, 2 (2 ranks, by workload card)"));
    }

    #[test]
    fn hockney_per_kind_and_role() {
        // dp: 1 MiB in 30 µs, 2 MiB in 50 µs on both dp groups: α = 10 µs,
        // β = 20 µs / MiB; tp has one size, so no fit.
        let t = trace(&tp_dp_grid(false));
        assert_close(value(&t, "hockney_alpha_by_role_s", None), 10e-6);
        assert_close(
            value(&t, "hockney_beta_by_role_s_per_byte", None),
            20e-6 / 1_048_576.0,
        );
        assert!(value(&t, "hockney_residual_by_role_s", None) < 1e-12);
        let p = parts(&t, "hockney_alpha_by_role_s");
        assert_eq!(p.len(), 1, "{p:?}");
        assert_eq!(p[0].0, "all_reduce dp");
        let na = eval(&trace(&late_pair()), "hockney_alpha_by_role_s", None);
        assert!(matches!(na, Outcome::NotApplicable(_)), "{na:?}");
    }
}
