//! The evaluation context: the ranks in scope, the user's options, and the
//! derived data (see `crate::derive`), computed when the context is made.

pub use crate::derive::{class_index, gpu_step_hulls, gpu_step_windows, RankRow, RankStats};
use crate::derive::{Derived, Made};
use crate::model::{Ns, RankTimeline, Trace};

/// What the user told us about the run, beyond the trace.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Options {
    /// Devices the run spans (`--n-chips`); default: the workload card's
    /// `total_count`, else the ranks in the trace.
    pub n_chips: Option<u32>,
    /// Model parameters (`--model-params`); default: the card's `num_params`.
    pub model_params: Option<f64>,
}

/// Per collective kind, over its ops on the ranks in scope that took time
/// in a group of 2 or more: Σ size × bus factor, Σ size, Σ time and how
/// many; and whether any op of any kind had a size (`collectives` makes
/// them).
#[derive(Debug, Default)]
pub(crate) struct BusSums {
    pub(crate) any_sized: bool,
    pub(crate) by_kind: Vec<(crate::model::CollKind, BusSum)>,
}

#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct BusSum {
    pub(crate) bytes: f64,
    pub(crate) alg_bytes: u64,
    pub(crate) time: Ns,
    pub(crate) ops: usize,
}

pub struct Ctx<'a> {
    pub trace: &'a Trace,
    pub opts: Options,
    /// Ranks in scope: all of them, or the one chosen with `--rank`.
    pub ranks: Vec<&'a RankTimeline>,
    /// The rank that single-rank metrics describe: `--rank`, else rank 0 (or the lowest).
    pub focus: Option<&'a RankTimeline>,
    /// The rank asked for with `--rank` in a run without timelines (its
    /// execution trace or memory snapshot is what describes it).
    only: Option<u32>,
    derived: Derived,
    /// Sums over every sized collective, made by the first metric that
    /// asks: four metrics read them, each a pass over every communication
    /// op otherwise (4.4 million in a run of 64 ranks).
    bus: std::sync::OnceLock<BusSums>,
    /// The all-reduces' Hockney fit, made once for the three metrics of it.
    hockney: std::sync::OnceLock<Result<(f64, f64, usize), String>>,
}

impl<'a> Ctx<'a> {
    /// A context over all ranks, or only `rank` when given.
    pub fn new(trace: &'a Trace, rank: Option<u32>) -> Result<Self, String> {
        Self::with_made(trace, rank, Made::default())
    }

    /// [`Ctx::new`] with every rank's stats made while it was loaded (indexed
    /// like `trace.ranks`), as a lean load keeps them (see `load::Lean`).
    pub fn with_stats(
        trace: &'a Trace,
        rank: Option<u32>,
        stats: Option<Vec<RankStats>>,
    ) -> Result<Self, String> {
        Self::with_made(
            trace,
            rank,
            Made {
                stats,
                matched: None,
            },
        )
    }

    /// [`Ctx::new`] with what loading derived of the trace (see [`Made`]).
    pub fn with_made(trace: &'a Trace, rank: Option<u32>, made: Made) -> Result<Self, String> {
        let Made { stats, matched } = made;
        // Without timelines, the ranks are those of the execution traces and
        // memory snapshots read.
        let annotated = || {
            let mut r: Vec<u32> = (trace.et.iter().map(|e| e.rank))
                .chain(trace.memory.iter().map(|m| m.rank))
                .collect();
            r.sort_unstable();
            r.dedup();
            r
        };
        let ranks: Vec<&RankTimeline> = match rank {
            None => trace.ranks.iter().collect(),
            Some(r) if trace.ranks.is_empty() && annotated().contains(&r) => Vec::new(),
            Some(r) => vec![trace.rank(r).ok_or_else(|| {
                let have: Vec<u32> = match trace.ranks.is_empty() {
                    true => annotated(),
                    false => trace.ranks.iter().map(|t| t.rank).collect(),
                };
                let have: Vec<String> = have.iter().map(u32::to_string).collect();
                format!("rank {r} is not in the trace (ranks: {})", have.join(", "))
            })?],
        };
        let only = rank.filter(|_| trace.ranks.is_empty());
        let focus = ranks.first().copied();
        let stats = stats.map(|all| {
            let mut all: Vec<Option<RankStats>> = all.into_iter().map(Some).collect();
            ranks
                .iter()
                .map(|t| {
                    let i = trace.ranks.iter().position(|r| r.rank == t.rank);
                    i.and_then(|i| all.get_mut(i)?.take())
                        .expect("one stats per rank of the trace")
                })
                .collect()
        });
        let derived = Derived::with_made(trace, &ranks, Made { stats, matched });
        Ok(Self {
            trace,
            opts: Options::default(),
            ranks,
            focus,
            only,
            derived,
            bus: Default::default(),
            hockney: Default::default(),
        })
    }

    #[must_use]
    pub fn with_options(mut self, opts: Options) -> Self {
        self.opts = opts;
        self
    }

    /// Devices the run spans: `--n-chips`, the card's `total_count`, else ranks.
    pub(crate) fn n_chips(&self) -> u32 {
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
    pub(crate) fn model_params(&self) -> Option<f64> {
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

    /// The sums over every sized collective (see the `bus` field), made
    /// by `make` the first time: without rayon, so that a metric waiting
    /// for them blocks only until they are.
    pub(crate) fn bus_sums(&self, make: impl FnOnce() -> BusSums) -> &BusSums {
        self.bus.get_or_init(make)
    }

    /// The all-reduces' Hockney fit, made by `make` the first time (as
    /// [`Ctx::bus_sums`]).
    pub(crate) fn hockney(
        &self,
        make: impl FnOnce() -> Result<(f64, f64, usize), String>,
    ) -> &Result<(f64, f64, usize), String> {
        self.hockney.get_or_init(make)
    }

    /// Derived data of every rank in scope, in the same order as `ranks`.
    pub fn stats(&self) -> &[RankStats] {
        &self.derived.stats
    }

    /// Per-step time breakdown of every rank in scope, same order as `ranks`.
    /// The derived data, the context given up: a view keeping rows and
    /// collectives takes them rather than holding a second copy.
    pub fn into_derived(self) -> crate::derive::Derived {
        self.derived
    }

    pub fn rank_rows(&self) -> &[RankRow] {
        &self.derived.rows
    }

    /// Wait/transfer split of the matched collectives of every rank of the
    /// trace (indexed like `trace.ranks`, not like `ranks`).
    pub fn waits(&self) -> &[crate::model::collectives::WaitSplit] {
        &self.derived.waits
    }

    /// The collectives matched across every rank of the trace (see
    /// `model::collectives::instances`).
    pub fn instances(&self) -> &crate::model::collectives::Instances {
        &self.derived.instances
    }

    /// When the last member of each matched collective started, found from
    /// a rank's ops (see `LastStarts::each_wait`).
    pub(crate) fn last_starts(&self) -> &crate::model::collectives::LastStarts {
        &self.derived.last_starts
    }

    /// Each matched collective as a row: members, waits, the last to arrive.
    pub fn collective_rows(&self) -> &crate::derive::instances::Rows {
        &self.derived.collectives
    }

    /// The members of a row of [`Ctx::collective_rows`].
    pub(crate) fn members(
        &self,
        row: &crate::derive::instances::InstanceRow,
    ) -> impl ExactSizeIterator<Item = crate::derive::instances::Member> + '_ {
        row.members(self.trace, self.instances())
    }

    /// Calls `f` with each row of [`Ctx::collective_rows`] and its members,
    /// in order (a pass over them all: see `derive::instances::with_members`).
    pub fn each_with_members<'s>(
        &'s self,
        f: impl FnMut(&crate::derive::instances::InstanceRow<'s>, &[crate::derive::instances::Member]),
    ) {
        crate::derive::instances::with_members(
            self.trace,
            self.instances(),
            self.collective_rows(),
            f,
        );
    }

    /// The process groups collectives were issued in, with their roles.
    pub fn groups(&self) -> &[crate::derive::groups::GroupInfo] {
        &self.derived.groups
    }

    /// The execution trace of the focus rank (of the rank asked for, else the
    /// first with one, for a trace without timelines).
    pub(crate) fn focus_et(&self) -> Option<&'a crate::model::exec_trace::EtRank> {
        match (self.focus, self.only) {
            (Some(t), _) => self.trace.et.iter().find(|e| e.rank == t.rank),
            (None, Some(r)) => self.trace.et.iter().find(|e| e.rank == r),
            (None, None) => self.trace.et.first(),
        }
    }

    /// The rank asked for in a run without timelines (see `only`).
    pub(crate) fn only_rank(&self) -> Option<u32> {
        self.only
    }

    /// Pairs of (timeline, stats) for the ranks in scope.
    pub(crate) fn each(&self) -> impl Iterator<Item = (&'a RankTimeline, &RankStats)> {
        self.ranks.iter().copied().zip(self.stats())
    }

    pub(crate) fn has_kernels(&self) -> bool {
        self.stats().iter().any(|s| s.kernel_sum > Ns::ZERO)
    }
}
