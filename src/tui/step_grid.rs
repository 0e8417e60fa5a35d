//! Every step of every rank, for the Stragglers tab's steps × ranks heatmap:
//! per (rank, step) the step time, the exposed communication and the wait
//! the rank caused the others, and each rank's spread over its steps.

use std::sync::OnceLock;

use rayon::prelude::*;

use crate::model::collectives::Arrivals;
use crate::model::{Interval, Ns, Trace};

/// What a heatmap cell shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Measure {
    /// The longer of the step's CPU range and the device work launched in it.
    Step,
    /// Communication not under compute, of the ops launched in the step.
    Exposed,
    /// The others' waiting at the step's matched collectives charged to the rank.
    Caused,
}

impl Measure {
    pub const ALL: [Measure; 3] = [Measure::Step, Measure::Exposed, Measure::Caused];

    pub fn next(self) -> Self {
        Self::ALL[(self as usize + 1) % Self::ALL.len()]
    }

    pub fn name(self) -> &'static str {
        match self {
            Measure::Step => "step time",
            Measure::Exposed => "exposed comm",
            Measure::Caused => "wait caused",
        }
    }

    pub fn about(self) -> &'static str {
        match self {
            Measure::Step => {
                "the longer of the step's CPU range and the device work launched in it"
            }
            Measure::Exposed => "communication not under compute, of the ops launched in the step",
            Measure::Caused => "the others' waiting at the step's collectives charged to the rank",
        }
    }
}

/// A rank's spread over its steps (nearest-rank percentiles).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Spread {
    pub p50: Ns,
    pub p95: Ns,
    pub max: Ns,
}

/// A step is an outlier of its rank when it exceeds the rank's median by
/// more than 3 scaled median absolute deviations, a tenth of the median and
/// this much (timer resolution, launch jitter).
const OUTLIER_FLOOR: Ns = Ns(10_000);
/// Outliers are looked for among at least this many steps of a rank.
const OUTLIER_STEPS: usize = 5;

/// What the grid holds of its own: the step time and exposed communication
/// cells (the wait caused is `Arrivals::late`, read where it is kept).
#[derive(Debug, Clone, Default)]
pub struct StepCells {
    /// Per rank index and column of `Arrivals::steps`; `None` where the
    /// rank lacks the step or the figure.
    step: Vec<Vec<Option<Ns>>>,
    /// Made when first shown: a pass over every op, not start-up work.
    exposed: OnceLock<Vec<Vec<Option<Ns>>>>,
    /// The exposed communication needs every op, which a lean summary lacks.
    no_ops: bool,
}

/// A rank's step keys paired with a figure each.
pub type Keyed<T> = Vec<((i64, u32), T)>;

impl StepCells {
    /// `hulls`: per rank index, the device work of each step; `ops_held`:
    /// every op of every rank is in `trace` (not in a lean summary), so
    /// exposed communication per step can be made; columns: `arrivals.steps`.
    pub fn of(
        trace: &Trace,
        hulls: &[Keyed<Interval>],
        ops_held: bool,
        arrivals: &Arrivals,
    ) -> Self {
        let steps = &arrivals.steps;
        let mut step = vec![vec![None; steps.len()]; trace.ranks.len()];
        for (ri, t) in trace.ranks.iter().enumerate() {
            for (key, s) in t.step_keys().into_iter().zip(&t.steps) {
                if let Some(c) = col(steps, key) {
                    step[ri][c] = Some(s.dur());
                }
            }
            for &(key, h) in hulls.get(ri).into_iter().flatten() {
                if let Some(c) = col(steps, key) {
                    let v = step[ri][c].get_or_insert(Ns::ZERO);
                    *v = (*v).max(h.len());
                }
            }
        }
        Self {
            step,
            exposed: OnceLock::new(),
            no_ops: !ops_held,
        }
    }

    /// The grid over `trace` with the wait caused from `arrivals` (the ones
    /// it was made with).
    pub fn with<'a>(&'a self, trace: &'a Trace, arrivals: &'a Arrivals) -> StepGrid<'a> {
        StepGrid {
            steps: &arrivals.steps,
            own: self,
            trace,
            arrivals,
        }
    }
}

/// The column of step `key` among `steps` (sorted by occurrence, then number).
fn col(steps: &[(i64, u32)], key: (i64, u32)) -> Option<usize> {
    steps
        .binary_search_by_key(&(key.1, key.0), |&(n, k)| (k, n))
        .ok()
}

/// Each rank's exposed communication per step (of the ops launched in it),
/// ranks in parallel.
fn exposed_cells(trace: &Trace, steps: &[(i64, u32)]) -> Vec<Vec<Option<Ns>>> {
    trace
        .ranks
        .par_iter()
        .map(|t| {
            let mut row = vec![None; steps.len()];
            let sums = crate::derive::steps::sums(t);
            for (key, s) in t.step_keys().into_iter().zip(sums) {
                if let (Some(c), true) = (col(steps, key), s.ops > 0) {
                    row[c] = Some(s.exposed_comm);
                }
            }
            row
        })
        .collect()
}

/// Every step of every rank in each measure, borrowed from where it is kept.
#[derive(Debug, Clone, Copy)]
pub struct StepGrid<'a> {
    /// Columns: steps as (number, occurrence), like `Arrivals::steps`.
    pub steps: &'a [(i64, u32)],
    own: &'a StepCells,
    trace: &'a Trace,
    arrivals: &'a Arrivals,
}

impl<'a> StepGrid<'a> {
    pub fn cells(&self, m: Measure) -> &'a [Vec<Option<Ns>>] {
        match m {
            Measure::Step => &self.own.step,
            Measure::Exposed if self.own.no_ops => &[],
            Measure::Exposed => self
                .own
                .exposed
                .get_or_init(|| exposed_cells(self.trace, self.steps)),
            Measure::Caused => &self.arrivals.late,
        }
    }

    /// Why `m` has nothing to show, if so.
    pub fn missing(&self, m: Measure) -> Option<&'static str> {
        match m {
            Measure::Step => None,
            Measure::Exposed => self.own.no_ops.then_some(
                "exposed communication per step needs the ops, which a lean summary does not hold",
            ),
            Measure::Caused => (self.arrivals.collectives == 0)
                .then_some("no collective is matched across ranks: nobody waits for anyone"),
        }
    }

    /// Rank `ri`'s spread of `m` over its steps.
    pub fn spread(&self, m: Measure, ri: usize) -> Option<Spread> {
        let mut v: Vec<Ns> = self.cells(m).get(ri)?.iter().flatten().copied().collect();
        if v.is_empty() {
            return None;
        }
        v.sort_unstable();
        let at = |p: f64| v[((p * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
        Some(Spread {
            p50: at(0.5),
            p95: at(0.95),
            max: v[v.len() - 1],
        })
    }

    /// The columns where rank `ri`'s `m` stands out from its other steps.
    pub fn outliers(&self, m: Measure, ri: usize) -> Vec<bool> {
        let Some(row) = self.cells(m).get(ri) else {
            return Vec::new();
        };
        let mut v: Vec<Ns> = row.iter().flatten().copied().collect();
        // Fewer steps say too little of what is usual for the rank.
        if v.len() < OUTLIER_STEPS {
            return vec![false; row.len()];
        }
        v.sort_unstable();
        let median = v[v.len() / 2];
        let mut dev: Vec<Ns> = v.iter().map(|&x| (x - median).abs()).collect();
        dev.sort_unstable();
        let mad = dev[dev.len() / 2];
        let margin = Ns((3.0 * 1.4826 * mad.as_f64()) as i64)
            .max(median / 10)
            .max(OUTLIER_FLOOR);
        row.iter()
            .map(|c| c.is_some_and(|x| x > median + margin))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{RankTimeline, Step};

    fn rank(rank: u32, steps: &[(i64, i64, i64)]) -> RankTimeline {
        let mut t = RankTimeline {
            rank,
            ..RankTimeline::default()
        };
        t.steps = steps
            .iter()
            .map(|&(number, start, end)| Step {
                number,
                start: Ns(start),
                end: Ns(end),
            })
            .collect();
        t
    }

    #[test]
    fn cells_spread_and_outliers() {
        // Rank 0: five 100 µs CPU steps; step 3's device work runs 400 µs.
        // Rank 1: the same steps but 4 and 5.
        let us = 1_000;
        let s = |n: i64| (n, n * 100 * us, (n + 1) * 100 * us);
        let mut trace = Trace::default();
        trace.ranks.push(rank(0, &[s(1), s(2), s(3), s(4), s(5)]));
        trace.ranks.push(rank(1, &[s(1), s(2), s(3)]));
        let hull = |n: i64, len: i64| {
            (
                (n, 0),
                Interval::new(Ns(n * 100 * us), Ns(n * 100 * us + len * us)),
            )
        };
        let hulls = vec![vec![hull(2, 90), hull(3, 400)], vec![hull(1, 50)]];
        let arrivals = Arrivals {
            steps: (1..=5).map(|n| (n, 0)).collect(),
            late: vec![vec![None; 5], vec![Some(Ns(7 * us)); 5]],
            last: vec![0, 0],
            last_by: vec![Ns::ZERO; 2],
            collectives: 3,
        };
        let cells = StepCells::of(&trace, &hulls, false, &arrivals);
        let g = cells.with(&trace, &arrivals);
        let ms = |v: i64| Some(Ns(v * us));
        assert_eq!(
            g.cells(Measure::Step)[0],
            vec![ms(100), ms(100), ms(400), ms(100), ms(100)]
        );
        assert_eq!(
            g.cells(Measure::Step)[1],
            vec![ms(100), ms(100), ms(100), None, None]
        );
        assert_eq!(g.cells(Measure::Caused)[1][4], ms(7));
        assert!(g.missing(Measure::Exposed).is_some());
        // Rank 0 sorted: 100 ×4, 400: p50 100, p95 400 (the 5th of 5).
        assert_eq!(
            g.spread(Measure::Step, 0),
            Some(Spread {
                p50: Ns(100 * us),
                p95: Ns(400 * us),
                max: Ns(400 * us)
            })
        );
        // Median 100, MAD 0: the margin is a tenth, 10 µs; only step 3 is out.
        assert_eq!(
            g.outliers(Measure::Step, 0),
            vec![false, false, true, false, false]
        );
        assert_eq!(g.outliers(Measure::Step, 1), vec![false; 5]);
    }
}
