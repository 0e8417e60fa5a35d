//! Derived per-rank data: what several metric families and views need of a
//! rank (busy unions, per-class sums, phase times, the per-step budget, the
//! collectives matched across ranks and the waits they imply). Computed once,
//! eagerly and in parallel, before any metric runs; it reads the model and
//! imports no metric family.

pub mod fit;
pub mod groups;
pub mod instances;
pub mod phases;
pub mod sm;

use std::collections::HashMap;

use rayon::prelude::*;

use crate::model::collectives::{self, Instance, WaitSplit};
use crate::model::{Interval, IntervalSet, KernelClass, Ns, RankTimeline, StrId, Trace};

/// Everything derived for the ranks in scope.
#[derive(Debug, Clone)]
pub struct Derived {
    /// Per rank in scope, in the scope's order.
    pub stats: Vec<RankStats>,
    /// Per rank in scope: where its steps went.
    pub rows: Vec<RankRow>,
    /// The collectives matched across every rank of the trace.
    pub instances: Vec<Instance>,
    /// Wait/transfer split per rank of the trace (indexed like `trace.ranks`).
    pub waits: Vec<WaitSplit>,
    /// Each matched collective as a row (same order as `instances`).
    pub collectives: Vec<instances::InstanceRow>,
    /// The process groups collectives were issued in, by name, with their roles.
    pub groups: Vec<groups::GroupInfo>,
}

impl Derived {
    /// Derives the data of `ranks` (a subset of `trace.ranks`); the
    /// cross-rank parts always use every rank of the trace.
    pub fn of(trace: &Trace, ranks: &[&RankTimeline]) -> Self {
        let (stats, (instances, groups)) = rayon::join(
            || {
                ranks
                    .par_iter()
                    .map(|t| RankStats::of(t))
                    .collect::<Vec<_>>()
            },
            || rayon::join(|| collectives::instances(trace), || groups::infer(trace)),
        );
        let ((waits, wait_sets), collectives) = rayon::join(
            || {
                rayon::join(
                    || collectives::wait_split(trace, &instances),
                    || collectives::wait_intervals(trace, &instances),
                )
            },
            || instances::rows(trace, &instances, &groups),
        );
        let rows = rank_rows(trace, ranks, &stats, &waits, &wait_sets);
        Self {
            stats,
            rows,
            instances,
            waits,
            collectives,
            groups,
        }
    }
}

/// Derived data of one rank.
#[derive(Debug, Clone)]
pub struct RankStats {
    pub rank: u32,
    /// Summed duration of all kernels.
    pub kernel_sum: Ns,
    /// Summed duration of every device op (kernels, memory copies and sets).
    pub op_sum: Ns,
    /// Summed kernel duration per class, indexed like `KernelClass::ALL`.
    pub kernel_class_sum: [Ns; KernelClass::ALL.len()],
    /// Summed duration of every op (any activity) per class.
    pub op_class_sum: [Ns; KernelClass::ALL.len()],
    /// Summed kernel duration per kernel name.
    pub by_name: HashMap<StrId, Ns>,
    /// Union of all device activity.
    pub busy: IntervalSet,
    /// Union of communication ops.
    pub comm: IntervalSet,
    /// Union of compute kernels (neither communication nor memory).
    pub compute: IntervalSet,
    /// Union of memory copies and sets (peer-to-peer copies count as communication).
    pub memory: IntervalSet,
    /// What the SM-coverage metrics need of the kernels with a known coverage.
    pub sm: sm::SmCoverage,
    /// Device time of each training phase, indexed like `Phase::ALL`.
    pub phases: [Option<Ns>; phases::Phase::ALL.len()],
}

impl RankStats {
    pub fn of(t: &RankTimeline) -> Self {
        let mut kernel_class_sum = [Ns::ZERO; KernelClass::ALL.len()];
        let mut op_class_sum = [Ns::ZERO; KernelClass::ALL.len()];
        let mut by_name = HashMap::new();
        let (mut kernel_sum, mut op_sum) = (Ns::ZERO, Ns::ZERO);
        for op in &t.ops {
            let c = class_index(op.class);
            op_sum += op.dur;
            op_class_sum[c] += op.dur;
            if op.is_kernel() {
                kernel_sum += op.dur;
                kernel_class_sum[c] += op.dur;
                *by_name.entry(op.name).or_insert(Ns::ZERO) += op.dur;
            }
        }
        Self {
            rank: t.rank,
            kernel_sum,
            op_sum,
            kernel_class_sum,
            op_class_sum,
            by_name,
            busy: t.busy(|_| true),
            comm: t.busy(|o| o.is_comm()),
            compute: t.busy(|o| o.is_compute()),
            memory: t.busy(|o| o.is_memory()),
            sm: sm::SmCoverage::of(t),
            phases: phases::phase_times(t),
        }
    }

    pub fn kernel_class(&self, c: KernelClass) -> Ns {
        self.kernel_class_sum[class_index(c)]
    }

    pub fn op_class(&self, c: KernelClass) -> Ns {
        self.op_class_sum[class_index(c)]
    }
}

pub fn class_index(c: KernelClass) -> usize {
    KernelClass::ALL
        .iter()
        .position(|&k| k == c)
        .expect("every class is in ALL")
}

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
    /// Exposed communication spent waiting for a late rank (the wait part of
    /// matched collectives, not overlapped by compute).
    pub waiting: Ns,
    /// Wait this rank made the others spend at collectives matched across
    /// ranks (see `WaitSplit::caused`), per step.
    pub caused: Ns,
    /// Matched collectives it started last, and all its matched ones, in the
    /// measured steps.
    pub last: usize,
    pub matched: usize,
}

impl RankRow {
    /// Where the step went, summing to `span`: compute only, compute
    /// overlapped with communication, exposed communication (of which
    /// `waiting` is waiting for a late rank), copies under neither, idle.
    pub fn budget(&self) -> [Ns; 5] {
        let overlapped = self.comm - self.exposed_comm;
        [
            self.compute - overlapped,
            overlapped,
            self.exposed_comm,
            self.busy - self.compute - self.exposed_comm,
            self.idle,
        ]
    }

    /// What ranks are compared by: busy − exposed communication, the time the
    /// rank spends on anything but communication it cannot hide.
    pub fn work(&self) -> Ns {
        self.busy - self.exposed_comm
    }
}

/// Where each rank in `ranks` (with its `stats`, same order) spent its
/// steps; `waits` and `wait_sets` are indexed like `trace.ranks`.
fn rank_rows(
    trace: &Trace,
    ranks: &[&RankTimeline],
    stats: &[RankStats],
    waits: &[WaitSplit],
    wait_sets: &[Vec<(u32, Interval)>],
) -> Vec<RankRow> {
    ranks
        .par_iter()
        .zip(stats)
        .map(|(t, s)| {
            let index = trace.ranks.iter().position(|r| r.rank == t.rank);
            let w = index
                .and_then(|i| waits.get(i))
                .copied()
                .unwrap_or_default();
            let wait_set = IntervalSet::from_iter_unsorted(
                index
                    .and_then(|i| wait_sets.get(i))
                    .into_iter()
                    .flatten()
                    .map(|(_, iv)| *iv),
            );
            let window = gpu_step_windows(t);
            let n = t.step_count() as i64;
            let within = |set: &IntervalSet| set.overlap_len(&window) / n;
            let busy = within(&s.busy);
            let comm = within(&s.comm);
            let exposed = s.comm.subtract(&s.compute);
            let exposed_comm = exposed.overlap_len(&window) / n;
            let waiting = exposed.intersect(&wait_set).overlap_len(&window) / n;
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
                waiting,
                caused: w.caused / n,
                last: w.last,
                matched: w.ops,
            }
        })
        .collect()
}

/// The device-side extent of each measured step (see `RankTimeline::measured`):
/// from the first start to the last end of the ops launched during it. Without
/// steps, the whole device window.
pub fn gpu_step_windows(t: &RankTimeline) -> IntervalSet {
    if t.steps.is_empty() {
        return t
            .device_window()
            .map(IntervalSet::single)
            .unwrap_or_default();
    }
    let mut hulls = gpu_step_hulls(t);
    let measured = t.measured();
    IntervalSet::from_iter_unsorted(hulls.drain(measured).flatten())
}

/// For each of the rank's steps (same index as `steps`), the hull of the device
/// ops launched during it; `None` for a step that launched nothing.
pub fn gpu_step_hulls(t: &RankTimeline) -> Vec<Option<Interval>> {
    let mut hulls: Vec<Option<Interval>> = vec![None; t.steps.len()];
    for op in &t.ops {
        if let Some(i) = op.step.get() {
            let h = &mut hulls[i as usize];
            *h = Some(match *h {
                Some(h) => Interval::new(h.start.min(op.start), h.end.max(op.end())),
                None => op.interval(),
            });
        }
    }
    hulls
}
