//! The evaluation context: the ranks in scope plus derived per-rank data (busy
//! unions, per-class sums) computed once and shared by every metric.

use std::collections::HashMap;
use std::sync::OnceLock;

use rayon::prelude::*;

use crate::model::{Interval, IntervalSet, KernelClass, Ns, RankTimeline, StrId, Trace};

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
    pub sm: super::kernel::SmCoverage,
    /// Device time of each training phase, indexed like `Phase::ALL`.
    pub phases: [Option<Ns>; super::phases::Phase::ALL.len()],
}

impl RankStats {
    pub fn of(t: &RankTimeline) -> Self {
        let mut kernel_class_sum = [0; KernelClass::ALL.len()];
        let mut op_class_sum = [0; KernelClass::ALL.len()];
        let mut by_name = HashMap::new();
        let (mut kernel_sum, mut op_sum) = (0, 0);
        for op in &t.ops {
            let c = class_index(op.class);
            op_sum += op.dur;
            op_class_sum[c] += op.dur;
            if op.is_kernel() {
                kernel_sum += op.dur;
                kernel_class_sum[c] += op.dur;
                *by_name.entry(op.name).or_insert(0) += op.dur;
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
            sm: super::kernel::SmCoverage::of(t),
            phases: super::phases::phase_times(t),
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

/// What the user told us about the run, beyond the trace.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Options {
    /// Devices the run spans (`--n-chips`); default: the workload card's
    /// `total_count`, else the ranks in the trace.
    pub n_chips: Option<u32>,
    /// Model parameters (`--model-params`); default: the card's `num_params`.
    pub model_params: Option<f64>,
}

pub struct Ctx<'a> {
    pub trace: &'a Trace,
    pub opts: Options,
    /// Ranks in scope: all of them, or the one chosen with `--rank`.
    pub ranks: Vec<&'a RankTimeline>,
    /// The rank that single-rank metrics describe: `--rank`, else rank 0 (or the lowest).
    pub focus: Option<&'a RankTimeline>,
    // Every lazily built cache is filled by `warm`.
    stats: OnceLock<Vec<RankStats>>,
    rows: OnceLock<Vec<super::ranks::RankRow>>,
    waits: OnceLock<Vec<crate::model::collectives::WaitSplit>>,
    instances: OnceLock<Vec<crate::model::collectives::Instance>>,
}

impl<'a> Ctx<'a> {
    /// A context over all ranks, or only `rank` when given.
    pub fn new(trace: &'a Trace, rank: Option<u32>) -> Result<Self, String> {
        let ranks: Vec<&RankTimeline> = match rank {
            None => trace.ranks.iter().collect(),
            Some(r) => vec![trace.rank(r).ok_or_else(|| {
                let have: Vec<String> = trace.ranks.iter().map(|t| t.rank.to_string()).collect();
                format!("rank {r} is not in the trace (ranks: {})", have.join(", "))
            })?],
        };
        let focus = ranks.first().copied();
        Ok(Self {
            trace,
            opts: Options::default(),
            rows: OnceLock::new(),
            waits: OnceLock::new(),
            instances: OnceLock::new(),
            ranks,
            focus,
            stats: OnceLock::new(),
        })
    }

    #[must_use]
    pub fn with_options(mut self, opts: Options) -> Self {
        self.opts = opts;
        self
    }

    /// Devices the run spans: `--n-chips`, the card's `total_count`, else ranks.
    pub fn n_chips(&self) -> u32 {
        self.opts
            .n_chips
            .or_else(|| {
                let c = self
                    .trace
                    .card
                    .as_ref()?
                    .workload
                    .hardware
                    .xpu_spec
                    .total_count?;
                (c >= 1.0).then_some(c as u32)
            })
            .unwrap_or(self.trace.ranks.len() as u32)
            .max(1)
    }

    /// Model parameters: `--model-params`, else the card's `num_params`.
    pub fn model_params(&self) -> Option<f64> {
        self.opts.model_params.or_else(|| {
            self.trace
                .card
                .as_ref()?
                .workload
                .model
                .model_arch
                .num_params
        })
    }

    /// Fills the shared caches (each built in parallel) before metrics run
    /// concurrently; see [`super::eval_all`].
    pub fn warm(&self) {
        self.stats();
        self.rank_rows();
        self.instances();
        self.waits();
    }

    /// Derived data of every rank in scope, in the same order as `ranks`.
    pub fn stats(&self) -> &[RankStats] {
        self.stats
            .get_or_init(|| self.ranks.par_iter().map(|t| RankStats::of(t)).collect())
    }

    /// Per-step time breakdown of every rank in scope (see `metrics::ranks`).
    pub fn rank_rows(&self) -> &[super::ranks::RankRow] {
        self.rows.get_or_init(|| super::ranks::rank_rows(self))
    }

    /// Wait/transfer split of the matched collectives of every rank of the
    /// trace (indexed like `trace.ranks`, not like `ranks`).
    pub fn waits(&self) -> &[crate::model::collectives::WaitSplit] {
        self.waits
            .get_or_init(|| crate::model::collectives::wait_split(self.trace, self.instances()))
    }

    /// The collectives matched across every rank of the trace (see
    /// `model::collectives::instances`).
    pub fn instances(&self) -> &[crate::model::collectives::Instance] {
        self.instances
            .get_or_init(|| crate::model::collectives::instances(self.trace))
    }

    /// Pairs of (timeline, stats) for the ranks in scope.
    /// The execution trace of the focus rank (of the first rank with one, for
    /// a trace without timelines).
    pub fn focus_et(&self) -> Option<&'a crate::model::exec_trace::EtRank> {
        match self.focus {
            Some(t) => self.trace.et.iter().find(|e| e.rank == t.rank),
            None => self.trace.et.first(),
        }
    }

    pub fn each(&self) -> impl Iterator<Item = (&'a RankTimeline, &RankStats)> {
        self.ranks.iter().copied().zip(self.stats())
    }

    pub fn has_kernels(&self) -> bool {
        self.stats().iter().any(|s| s.kernel_sum > 0)
    }
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
        if let Some(i) = op.step {
            let h = &mut hulls[i as usize];
            *h = Some(match *h {
                Some(h) => Interval::new(h.start.min(op.start), h.end.max(op.end())),
                None => op.interval(),
            });
        }
    }
    hulls
}
