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
pub fn slowest(rows: &[RankRow]) -> Option<(usize, Ns)> {
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

/// Who holds the others up, decided once so that every view (the `straggler`
/// and `slowest_rank` metrics, the Stragglers tab, the Summary) says the same.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// Fewer than two ranks in scope.
    OneRank,
    /// No rank stands out beyond noise; the sentence says by how little.
    NoStraggler(String),
    /// `index` into the rank rows.
    Straggler {
        index: usize,
        rank: u32,
        basis: Basis,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub enum Basis {
    /// The others waited for it at the collectives matched across ranks: the
    /// wait it caused per step, how many collectives it started last, and the
    /// median step time. A rank late on the CPU side (launches, data loading)
    /// has little GPU work yet makes everyone wait, so arrival decides.
    Arrival {
        caused: Ns,
        last: usize,
        /// The rank's matched collectives in the measured steps.
        matched: usize,
        step: Ns,
    },
    /// No collective matched across ranks: the most work (busy − exposed
    /// communication) per step against the median rank's.
    Work { work: Ns, median: Ns },
}

impl Verdict {
    /// 1 + the straggler's wait per step / the step by arrival (the others'
    /// collectives wait that share of the step for it, overlapped with their
    /// compute or not: not a claim about a step without it), its work / the
    /// median's by work; 1 without a straggler.
    pub fn ratio(&self) -> Option<f64> {
        match self {
            Verdict::OneRank => None,
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

    /// One sentence for headlines: who, and the evidence.
    pub fn sentence(&self) -> String {
        match self {
            Verdict::OneRank => "one rank: nothing to compare".into(),
            Verdict::NoStraggler(why) => format!("no straggler: {why}"),
            Verdict::Straggler { rank, basis, .. } => match *basis {
                Basis::Arrival {
                    caused,
                    last,
                    matched,
                    step,
                } => format!(
                    "rank {rank}: the others wait {} per step for it ({:.1} % of the step); \
                     it starts last at {last} of its {matched} collectives matched across ranks",
                    human(caused),
                    share(caused, step),
                ),
                Basis::Work { work, median } => format!(
                    "rank {rank}: {} of work per step vs the median {} (+{:.1} %)",
                    human(work),
                    human(median),
                    share(work - median, median),
                ),
            },
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

/// The straggler among the ranks in scope: by the wait each caused at matched
/// collectives, else (no collective matched) by work.
pub fn verdict(ctx: &Ctx) -> Verdict {
    let rows = ctx.rank_rows();
    if rows.len() < 2 {
        return Verdict::OneRank;
    }
    if rows.iter().any(|r| r.last > 0) {
        let step = median(rows.iter().map(|r| r.step_time.unwrap_or(r.span)).collect());
        let (index, row) = rows
            .iter()
            .enumerate()
            .max_by_key(|(i, r)| (r.caused, std::cmp::Reverse(*i)))
            .expect("two or more rows");
        let (most, last, matched) = (row.caused, row.last, row.matched);
        if !stands_out(most, step) {
            return Verdict::NoStraggler(format!(
                "the most any rank makes the others wait at collectives is {} per step ({:.1} % \
                 of the step), within noise",
                human(most),
                share(most, step)
            ));
        }
        return Verdict::Straggler {
            index,
            rank: rows[index].rank,
            basis: Basis::Arrival {
                caused: most,
                last,
                matched,
                step,
            },
        };
    }
    let Some((index, median)) = slowest(rows) else {
        return Verdict::OneRank;
    };
    let work = rows[index].work();
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
    use crate::metrics::testing::trace;
    use crate::synth::two_rank_example;

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
