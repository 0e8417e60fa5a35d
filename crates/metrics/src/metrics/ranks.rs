//! Per-rank comparison rows for the Stragglers tab: where each rank's step time
//! went. Every time is a mean per profiled step, over the device-side step
//! windows (first to last op launched in each step; the device window without
//! steps), so ranks are compared over the same work.
//!
//! Ranks are ranked by *work*: busy time minus exposed communication. In a
//! synchronous job every rank's step time is the same (collectives end together),
//! so step time cannot name the straggler; the straggler is the rank with the
//! most work, and the others spend the difference waiting inside communication.

use super::ctx::Ctx;
use crate::derive::RankRow;
use crate::model::time::{human, median};
use crate::model::Ns;

/// The slowest rank's index in `rows` by [`RankRow::work`] (the lowest rank
/// among equals), and the median work.
pub(crate) fn slowest(rows: &[RankRow]) -> Option<(usize, Ns)> {
    let (i, _) = rows
        .iter()
        .enumerate()
        .max_by_key(|(i, r)| (r.work(), std::cmp::Reverse(*i)))?;
    Some((i, median(rows.iter().map(RankRow::work).collect())))
}

/// A rank holds the others up only when the wait it causes is more than this
/// share of the step ...
const NOISE_SHARE: f64 = 0.02;
/// ... and more than this (timer resolution, launch jitter).
const NOISE_FLOOR: Ns = Ns(10_000);

/// Who holds the others up, decided once so that every view (the
/// `straggler_wait_share` and `slowest_rank` metrics, the Stragglers tab, the
/// Summary, the what-if) says the same.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Fewer than two ranks in scope.
    OneRank,
    /// No rank stands out beyond noise; the sentence says by how little.
    NoStraggler(String),
    /// `index` into the rank rows: the rank charged most.
    Straggler {
        index: usize,
        rank: u32,
        basis: Basis,
    },
    /// The ranks loaded cannot support a verdict on who holds the others up
    /// (`why`, e.g. 2 of 128 ranks, doubtful clocks); `work` compares the
    /// ranks' work instead, which needs neither.
    Unknown { why: String, work: String },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Basis {
    /// The others waited for it at the collectives matched across ranks. A
    /// rank late on the CPU side (launches, data loading) has little GPU
    /// work yet makes everyone wait, so arrival decides.
    Arrival {
        /// The ranks late together (rank numbers, ascending; the straggler
        /// among them): each charged at least half of what the most-charged
        /// one is.
        set: Vec<u32>,
        /// The waiting charged to the set per step, per other rank.
        caused: Ns,
        /// The other ranks' mean wait per step inside matched collectives.
        waiting: Ns,
        /// Matched collectives a member of the set started last, and the
        /// straggler's matched collectives (measured steps).
        last: usize,
        matched: usize,
        /// The median step.
        step: Ns,
    },
    /// No collective matched across ranks: the most work (busy − exposed
    /// communication) per step against the median rank's.
    Work { work: Ns, median: Ns },
}

impl Verdict {
    /// 1 + the waiting the straggler (or late set) causes per step per
    /// other rank / the step by arrival (the others' collectives wait that
    /// share of the step for it, overlapped with their compute or not: not
    /// a claim about a step without it), its work / the median's by work; 1
    /// without a straggler; none when unknown.
    pub(crate) fn ratio(&self) -> Option<f64> {
        match self {
            Verdict::OneRank | Verdict::Unknown { .. } => None,
            Verdict::NoStraggler(_) => Some(1.0),
            Verdict::Straggler { basis, .. } => match *basis {
                Basis::Arrival { caused, step, .. } => {
                    (step > Ns::ZERO).then(|| 1.0 + caused.as_f64() / step.as_f64())
                }
                Basis::Work { work, median } => {
                    (median > Ns::ZERO).then(|| work.as_f64() / median.as_f64())
                }
            },
        }
    }

    /// The late ranks (the straggler alone, or its set).
    pub(crate) fn late_set(&self) -> Vec<u32> {
        match self {
            Verdict::Straggler {
                basis: Basis::Arrival { set, .. },
                ..
            } => set.clone(),
            Verdict::Straggler { rank, .. } => vec![*rank],
            _ => Vec::new(),
        }
    }

    /// One sentence for headlines: who, and the evidence.
    pub fn sentence(&self) -> String {
        match self {
            Verdict::OneRank => "one rank: nothing to compare".into(),
            Verdict::NoStraggler(why) => format!("no straggler: {why}"),
            Verdict::Unknown { why, work } => format!("unknown ({why}); by work: {work}"),
            Verdict::Straggler { rank, basis, .. } => match basis {
                Basis::Arrival {
                    set,
                    caused,
                    waiting,
                    last,
                    matched,
                    step,
                } if set.len() == 1 => format!(
                    "rank {rank}: the others wait {} per step for it ({:.1} % of the step; {} \
                     in all); it starts last at {last} of its {matched} collectives matched \
                     across ranks",
                    human(*caused),
                    share(*caused, *step),
                    human(*waiting),
                ),
                Basis::Arrival {
                    set,
                    caused,
                    waiting,
                    last,
                    step,
                    ..
                } => format!(
                    "{} arrive late together: the others wait {} per step for them ({:.1} % \
                     of the step; {} in all); one of them starts last at {last} collectives \
                     matched across ranks (rank {rank} most)",
                    ranks_label(set),
                    human(*caused),
                    share(*caused, *step),
                    human(*waiting),
                ),
                Basis::Work { work, median } => format!(
                    "rank {rank}: {} of work per step vs the median {} (+{:.1} %)",
                    human(*work),
                    human(*median),
                    share(*work - *median, *median),
                ),
            },
        }
    }
}

/// `ranks {1, 2}`, or `ranks 8-15 (8 consecutive ranks: one node's worth)`
/// for a run of 8 or 16 starting at a multiple of it (a slow node).
fn ranks_label(set: &[u32]) -> String {
    let n = set.len() as u32;
    let consecutive = set.windows(2).all(|w| w[1] == w[0] + 1);
    match (set.first(), set.last()) {
        (Some(&a), Some(&b)) if consecutive && matches!(n, 8 | 16) && a % n == 0 => {
            format!("ranks {a}-{b} ({n} consecutive ranks: one node's worth)")
        }
        _ => {
            let shown: Vec<String> = set.iter().map(u32::to_string).collect();
            format!("ranks {{{}}}", shown.join(", "))
        }
    }
}

fn share(part: Ns, whole: Ns) -> f64 {
    if whole > Ns::ZERO {
        part.as_f64() / whole.as_f64() * 100.0
    } else {
        0.0
    }
}

/// Beyond noise: more than `NOISE_SHARE` of `of` and more than `NOISE_FLOOR`.
fn stands_out(excess: Ns, of: Ns) -> bool {
    excess > NOISE_FLOOR && excess.as_f64() > NOISE_SHARE * of.as_f64()
}

/// Why the ranks loaded cannot say who holds the others up, if they cannot:
/// fewer ranks than the run's world size, or clocks too uncertain to order
/// arrivals.
fn cannot_tell(ctx: &Ctx) -> Option<String> {
    let loaded = ctx.trace.ranks.len();
    let world = ctx.trace.ranks.iter().filter_map(|t| t.world_size).max();
    if let Some(w) = world.filter(|&w| w as usize > loaded) {
        return Some(format!(
            "{loaded} of {w} ranks: the others' arrivals are not in the trace"
        ));
    }
    if let Some(g) = ungrouped_subgroup(ctx.trace) {
        return Some(format!(
            "collectives name no process group yet involve {g} of the {loaded} ranks: which \
             ranks took part in each is not recorded"
        ));
    }
    ctx.trace.clock_doubt.clone()
}

/// The size of a collective that names no process group but is smaller
/// than the ranks loaded: matched by position among all of them, such
/// calls pair ranks that never met.
fn ungrouped_subgroup(trace: &crate::model::Trace) -> Option<u32> {
    let n = trace.ranks.len();
    trace
        .ranks
        .iter()
        .flat_map(|t| &t.colls)
        .filter(|m| m.pg_name.is_none())
        .filter_map(|m| m.group_size)
        .find(|&g| g >= 1 && (g as usize) < n)
}

/// The busiest rank by work against the median, for a verdict by work.
fn by_work(rows: &[RankRow]) -> Option<(usize, Ns, Ns)> {
    let (index, median) = slowest(rows)?;
    Some((index, rows[index].work(), median))
}

/// The straggler among the ranks in scope: by the waiting charged to each
/// at matched collectives, else (no collective matched) by work; unknown
/// when the ranks loaded cannot tell.
pub fn verdict(ctx: &Ctx) -> Verdict {
    let rows = ctx.rank_rows();
    if rows.len() < 2 {
        return Verdict::OneRank;
    }
    if let Some(why) = cannot_tell(ctx) {
        let work = match by_work(rows) {
            Some((i, work, median)) if stands_out(work - median, median) => format!(
                "rank {} works {} per step vs the median {} (+{:.1} %)",
                rows[i].rank,
                human(work),
                human(median),
                share(work - median, median)
            ),
            Some((_, work, median)) => format!(
                "no rank stands out (the busiest works {} per step, {:.1} % over the median)",
                human(work),
                share(work - median, median)
            ),
            None => "no rank to compare".into(),
        };
        return Verdict::Unknown { why, work };
    }
    if rows.iter().any(|r| r.matched > 0) {
        let step = median(rows.iter().map(|r| r.step_time.unwrap_or(r.span)).collect());
        let n = rows.len() as i64;
        let mean_wait = rows.iter().map(|r| r.wait).sum::<Ns>() / n;
        // The waiting itself decides noise: the most any rank waits.
        let most_wait = rows.iter().map(|r| r.wait).max().unwrap_or(Ns::ZERO);
        if !stands_out(most_wait, step) {
            return Verdict::NoStraggler(format!(
                "the most any rank waits at collectives matched across ranks is {} per step \
                 ({:.1} % of the step), within noise",
                human(most_wait),
                share(most_wait, step)
            ));
        }
        let (index, top) = rows
            .iter()
            .enumerate()
            .max_by_key(|(i, r)| (r.caused, std::cmp::Reverse(*i)))
            .expect("two or more rows");
        // Late together: charged at least half what the top one is.
        let late: Vec<&RankRow> = rows.iter().filter(|r| r.caused * 2 >= top.caused).collect();
        if late.len() * 2 > rows.len() {
            return Verdict::NoStraggler(format!(
                "ranks wait {} per step on average at collectives ({:.1} % of the step), but \
                 {} of the {} ranks share the blame about equally: each is late at some \
                 collectives, none holds the others up",
                human(mean_wait),
                share(mean_wait, step),
                late.len(),
                rows.len()
            ));
        }
        let others = (rows.len() - late.len()).max(1) as i64;
        let caused = late.iter().map(|r| r.caused).sum::<Ns>() / others;
        let waiting = rows
            .iter()
            .filter(|r| !late.iter().any(|l| l.rank == r.rank))
            .map(|r| r.wait)
            .sum::<Ns>()
            / others;
        let mut set: Vec<u32> = late.iter().map(|r| r.rank).collect();
        set.sort_unstable();
        return Verdict::Straggler {
            index,
            rank: top.rank,
            basis: Basis::Arrival {
                set,
                caused,
                waiting,
                last: late.iter().map(|r| r.last).sum(),
                matched: top.matched,
                step,
            },
        };
    }
    let Some((index, work, median)) = by_work(rows) else {
        return Verdict::OneRank;
    };
    if !stands_out(work - median, median) {
        return Verdict::NoStraggler(format!(
            "the busiest rank works {} per step, {:.1} % over the median {}, within noise",
            human(work),
            share(work - median, median),
            human(median)
        ));
    }
    Verdict::Straggler {
        index,
        rank: rows[index].rank,
        basis: Basis::Work { work, median },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::{assert_close, eval, trace, value};
    use crate::metrics::Outcome;
    use crate::synth::{two_rank_example, Coll, RankTrace};

    /// `n` ranks of a `world`-rank run, one 200 µs step and one all-reduce
    /// each, ending together at 194 µs: the ranks in `late` compute until
    /// 10 + `late_us` and start it then (20 µs of transfer); the others
    /// compute until 10, start it at 10 and wait.
    fn barrier(n: u32, world: u32, late: &[u32], late_us: f64) -> Vec<RankTrace> {
        let c = Coll::all_reduce_f32(1 << 20, n);
        (0..n)
            .map(|r| {
                let mut t = RankTrace::new(Some(r), world, 10);
                t.step(1, 0.0, 200.0);
                let arrive = if late.contains(&r) {
                    10.0 + late_us
                } else {
                    10.0
                };
                t.kernel("sm90_xmma_gemm_bf16", 0.0, arrive, 7, 10);
                t.collective(
                    "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                    arrive,
                    10.0 + late_us + 20.0 - arrive,
                    20,
                    &c,
                );
                t
            })
            .collect()
    }

    /// Ranks 1 and 2 of 4 arrive 164 µs late together. Ranks 0 and 3 each
    /// wait 164 µs, shared by the two late ones: 164 µs charged to each,
    /// 164 µs per step per other rank, 1 + 164 / 200. (Charging only the
    /// last one's margin over the next-latest charged nothing.) Without
    /// their delay the all-reduce starts 164 µs sooner: ranks 0 and 3 save
    /// 164 of their 184 µs exposed, ranks 1 and 2 their whole 20 µs: steps
    /// 36, 180, 180, 36 µs, mean 108.
    #[test]
    fn a_late_pair_is_named_together() {
        let t = trace(&barrier(4, 4, &[1, 2], 164.0));
        let ctx = Ctx::new(&t, None).unwrap();
        let v = verdict(&ctx);
        assert_eq!(v.late_set(), [1, 2]);
        assert!(
            v.sentence()
                .starts_with("ranks {1, 2} arrive late together: the others wait 164 µs"),
            "{}",
            v.sentence()
        );
        assert_close(value(&t, "straggler_wait_share", None), 1.0 + 164.0 / 200.0);
        assert_close(value(&t, "slowest_rank", None), 1.0);
        assert_close(value(&t, "whatif_no_straggler_step_s", None), 108e-6);
    }

    /// Ranks 8-15 of 16 (a node) arrive 100 µs late: each of ranks 0-7
    /// waits 100 µs, an eighth of it charged to each late rank: 8 x 100 µs
    /// over the 8 others, 100 µs per other rank per step.
    #[test]
    fn a_late_node_is_named_as_one() {
        let late: Vec<u32> = (8..16).collect();
        let t = trace(&barrier(16, 16, &late, 100.0));
        let ctx = Ctx::new(&t, None).unwrap();
        let v = verdict(&ctx);
        assert_eq!(v.late_set(), late);
        assert!(
            v.sentence()
                .starts_with("ranks 8-15 (8 consecutive ranks: one node's worth) arrive late"),
            "{}",
            v.sentence()
        );
        assert_close(value(&t, "straggler_wait_share", None), 1.0 + 100.0 / 200.0);
    }

    /// Ranks 0 and 1 of a 128-rank run: who the other 126 waited for is not
    /// in the trace. The verdict is unknown, with the work comparison.
    #[test]
    fn two_of_128_ranks_cannot_name_a_straggler() {
        let t = trace(&barrier(2, 128, &[1], 100.0));
        let ctx = Ctx::new(&t, None).unwrap();
        let v = verdict(&ctx);
        assert!(matches!(v, Verdict::Unknown { .. }), "{v:?}");
        assert!(
            v.sentence().starts_with("unknown (2 of 128 ranks"),
            "{}",
            v.sentence()
        );
        // Rank 1 computes 110 µs, rank 0 10: the work comparison names it.
        assert!(
            v.sentence().contains("by work: rank 1 works"),
            "{}",
            v.sentence()
        );
        for m in [
            "slowest_rank",
            "straggler_wait_share",
            "whatif_no_straggler_step_s",
        ] {
            match eval(&t, m, None) {
                Outcome::NotApplicable(why) => assert!(why.contains("2 of 128 ranks"), "{why}"),
                o => panic!("{m}: {o:?}"),
            }
        }
    }

    /// Four ranks whose all-reduces name no group but record a group size
    /// of 2: two pairs, not one call of four; position cannot tell which.
    #[test]
    fn ungrouped_subgroups_give_no_verdict() {
        let mut ranks = barrier(4, 4, &[2], 100.0);
        let c = Coll::all_reduce_f32(1, 2);
        for t in &mut ranks {
            t.collective(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                150.0,
                10.0,
                20,
                &c,
            );
            t.without_groups();
        }
        let v = verdict(&Ctx::new(&trace(&ranks), None).unwrap());
        assert!(
            v.sentence()
                .starts_with("unknown (collectives name no process group yet involve 2 of the 4"),
            "{v:?}"
        );
    }

    /// A trace whose clocks the tool doubts gives no verdict either.
    #[test]
    fn doubtful_clocks_give_no_verdict() {
        let mut t = trace(&barrier(4, 4, &[2], 100.0));
        t.clock_doubt = Some("clock offsets too uncertain to apply (rank 2 ±3 ms)".into());
        let v = verdict(&Ctx::new(&t, None).unwrap());
        assert!(
            v.sentence()
                .starts_with("unknown (clock offsets too uncertain"),
            "{v:?}"
        );
    }

    /// Everyone a little late at some collective: waiting within noise.
    #[test]
    fn small_waits_are_noise() {
        let t = trace(&barrier(4, 4, &[3], 2.0));
        let v = verdict(&Ctx::new(&t, None).unwrap());
        assert!(matches!(v, Verdict::NoStraggler(_)), "{v:?}");
    }

    #[test]
    fn where_step_time_went() {
        // Rank 0 (2 steps): windows [10,70) + [110,180) = 130 µs; compute
        // [10,45)+[110,150)+[170,180) = 85; comm [30,60)+[140,170) = 60; exposed
        // [45,60)+[150,170) = 35; busy 130; per step: half of each.
        // Rank 1 (1 step): window [0,200); compute 100, comm 100 all exposed.
        let t = trace(&two_rank_example());
        let ctx = Ctx::new(&t, None).unwrap();
        let rows = ctx.rank_rows();
        let r0 = &rows[0];
        assert_eq!(r0.step_time, Some(Ns(100_000)));
        assert_eq!(
            (
                r0.span,
                r0.busy,
                r0.compute,
                r0.comm,
                r0.exposed_comm,
                r0.idle
            ),
            (
                Ns(65_000),
                Ns(65_000),
                Ns(42_500),
                Ns(30_000),
                Ns(17_500),
                Ns::ZERO
            )
        );
        let r1 = &rows[1];
        assert_eq!(r1.step_time, Some(Ns(200_000)));
        assert_eq!(
            (r1.span, r1.compute, r1.comm, r1.exposed_comm, r1.idle),
            (Ns(200_000), Ns(100_000), Ns(100_000), Ns(100_000), Ns::ZERO)
        );
        // Work = busy − exposed: rank 0 65 − 17.5 = 47.5 µs, rank 1 200 − 100 = 100.
        assert_eq!((r0.work(), r1.work()), (Ns(47_500), Ns(100_000)));
        // Slowest: rank 1; median of {47.5, 100} = 73.75 µs.
        assert_eq!(slowest(rows), Some((1, Ns(73_750))));
        // The budget sums to the step: rank 0 compute only 42.5 − overlap
        // 12.5 = 30, overlap 30 − 17.5 = 12.5, exposed 17.5, the copy
        // [60, 70) under neither 10 / 2 steps = 5, idle 0.
        assert_eq!(r0.budget(), [30_000, 12_500, 17_500, 5_000, 0].map(Ns));
        assert_eq!(r0.budget().iter().sum::<Ns>(), r0.span);
        // Rank 1: gemm then all-reduce, nothing overlapped.
        assert_eq!(r1.budget(), [100_000, 0, 100_000, 0, 0].map(Ns));
    }
}
