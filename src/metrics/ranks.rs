//! Per-rank comparison rows for the Stragglers tab: where each rank's step time
//! went. Every time is a mean per profiled step, over the device-side step
//! windows (first to last op launched in each step; the device window without
//! steps), so ranks are compared over the same work.
//!
//! Ranks are ranked by *work*: busy time minus exposed communication. In a
//! synchronous job every rank's step time is the same (collectives end together),
//! so step time cannot name the straggler; the straggler is the rank with the
//! most work, and the others spend the difference waiting inside communication.

use super::ctx::{gpu_step_windows, Ctx};
use crate::model::time::median;
use crate::model::Ns;

#[derive(Debug, Clone, PartialEq)]
pub struct RankRow {
    pub rank: u32,
    pub steps: usize,
    /// Mean `ProfilerStep` duration (CPU side); `None` without steps.
    pub step_time: Option<Ns>,
    /// Device-side step window.
    pub span: Ns,
    /// Any device activity.
    pub busy: Ns,
    /// Compute kernels (union).
    pub compute: Ns,
    /// Communication (union).
    pub comm: Ns,
    /// Communication not overlapped by compute: comm − comm ∩ compute.
    pub exposed_comm: Ns,
    /// No device activity: span − busy.
    pub idle: Ns,
}

impl RankRow {
    /// What ranks are compared by: busy − exposed communication, the time the
    /// rank spends on anything but communication it cannot hide.
    pub fn work(&self) -> Ns {
        self.busy - self.exposed_comm
    }
}

pub fn rank_rows(ctx: &Ctx) -> Vec<RankRow> {
    ctx.each()
        .map(|(t, s)| {
            let window = gpu_step_windows(t);
            let n = t.step_count() as Ns;
            let within = |set: &crate::model::IntervalSet| set.overlap_len(&window) / n;
            let busy = within(&s.busy);
            let comm = within(&s.comm);
            let exposed_comm = s.comm.subtract(&s.compute).overlap_len(&window) / n;
            let span = window.total() / n;
            RankRow {
                rank: t.rank,
                steps: t.measured().len(),
                step_time: (!t.steps.is_empty())
                    .then(|| t.measured_steps().iter().map(|st| st.dur()).sum::<Ns>() / n),
                span,
                busy,
                compute: within(&s.compute),
                comm,
                exposed_comm,
                idle: span - busy,
            }
        })
        .collect()
}

/// The slowest rank's index in `rows` by [`RankRow::work`] (the lowest rank
/// among equals), and the median work.
pub fn slowest(rows: &[RankRow]) -> Option<(usize, Ns)> {
    let (i, _) = rows
        .iter()
        .enumerate()
        .max_by_key(|(i, r)| (r.work(), std::cmp::Reverse(*i)))?;
    Some((i, median(rows.iter().map(RankRow::work).collect())))
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
        let rows = rank_rows(&ctx);
        let r0 = &rows[0];
        assert_eq!(r0.step_time, Some(100_000));
        assert_eq!(
            (
                r0.span,
                r0.busy,
                r0.compute,
                r0.comm,
                r0.exposed_comm,
                r0.idle
            ),
            (65_000, 65_000, 42_500, 30_000, 17_500, 0)
        );
        let r1 = &rows[1];
        assert_eq!(r1.step_time, Some(200_000));
        assert_eq!(
            (r1.span, r1.compute, r1.comm, r1.exposed_comm, r1.idle),
            (200_000, 100_000, 100_000, 100_000, 0)
        );
        // Work = busy − exposed: rank 0 65 − 17.5 = 47.5 µs, rank 1 200 − 100 = 100.
        assert_eq!((r0.work(), r1.work()), (47_500, 100_000));
        // Slowest: rank 1; median of {47.5, 100} = 73.75 µs.
        assert_eq!(slowest(&rows), Some((1, 73_750)));
    }
}
