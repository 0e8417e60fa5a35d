//! Per-step partial sums of a rank's ops: for each step, the unions of the
//! ops launched in it. They add up across ranks and steps without the ops
//! (a summary's `steps` table), and give the regression gate one sample per
//! step.

use crate::model::{DeviceOp, IntervalSet, Ns, RankTimeline};

/// The device time of the ops launched in one step (ns): the union of all
/// of them, of compute kernels, of communication ops, and communication not
/// under compute.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepSums {
    pub ops: u64,
    pub busy: Ns,
    pub compute: Ns,
    pub comm: Ns,
    pub exposed_comm: Ns,
}

/// One [`StepSums`] per step of `t` (indexed like `t.steps`); ops launched
/// outside every step count in none.
pub fn sums(t: &RankTimeline) -> Vec<StepSums> {
    let n = t.steps.len();
    let mut by_step: Vec<Vec<&DeviceOp>> = vec![Vec::new(); n];
    for o in &t.ops {
        if let Some(i) = o.step.get().filter(|&i| (i as usize) < n) {
            by_step[i as usize].push(o);
        }
    }
    by_step
        .iter()
        .map(|ops| {
            let set = |keep: &dyn Fn(&DeviceOp) -> bool| {
                IntervalSet::from_iter_unsorted(
                    ops.iter().filter(|o| keep(o)).map(|o| o.interval()),
                )
            };
            let (compute, comm) = (set(&|o| o.is_compute()), set(&|o| o.is_comm()));
            StepSums {
                ops: ops.len() as u64,
                busy: set(&|_| true).total(),
                compute: compute.total(),
                comm: comm.total(),
                exposed_comm: comm.subtract(&compute).total(),
            }
        })
        .collect()
}
