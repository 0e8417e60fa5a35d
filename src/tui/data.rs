//! Everything the tabs show that does not change while browsing, computed once
//! after loading: metric outcomes, per-rank rows, timeline lanes with coverage
//! indexes, step spans.

use std::collections::BTreeMap;

use rayon::prelude::*;

use crate::derive::RankRow;
use crate::metrics::breakdown::RankKernels;
use crate::metrics::ranks::{verdict, Verdict};
use crate::metrics::{eval_all, Ctx, Metric, Options, Outcome, METRICS};
use crate::model::collectives::{arrivals, Arrivals, Instances, LastStarts};
use crate::model::Warning;
use crate::model::{DeviceOp, Interval, Ns, RankTimeline, Trace};
use crate::session::load::LoadReport;
pub use crate::tui::lane::{bin_lanes, wait_of, Lane, Shown};
use crate::tui::step_grid::{StepCells, StepGrid};

pub struct Data {
    pub trace: Trace,
    /// The load's, in the order said; the Summary says those that put a
    /// verdict in doubt (by their kind) under it too.
    pub warnings: Vec<Warning>,
    /// What was found beside the traces and whether it was read.
    pub inputs: Vec<String>,
    /// How the run is held (in pages, collectives on disk): a line each.
    pub notes: Vec<String>,
    pub files: usize,
    pub events: u64,
    pub bytes: u64,
    pub summary: Vec<(&'static Metric, Outcome)>,
    pub ranks: Vec<RankRow>,
    /// Device time per kernel name and class, by rank index.
    pub kernels: Vec<RankKernels>,
    /// One lane per rank.
    pub lanes: Vec<Lane>,
    /// One lane per (rank, stream).
    pub stream_lanes: Vec<Lane>,
    /// Per rank (in rank order), a lane per thread that launched device work.
    pub cpu_lanes: Vec<Lane>,
    /// Per rank with CPU lanes, the lane of its launch queue, and by rank
    /// index the queue it draws (`None` without launches or CPU lanes).
    pub queue_lanes: Vec<Lane>,
    pub(crate) queues: Vec<Option<crate::tui::queue::Queue>>,
    /// Step instances in start order: the hull of their device windows over
    /// all ranks. A number repeated on a rank (a restarted profiler) is a
    /// second instance, matched across ranks by its occurrence.
    pub steps: Vec<StepSpan>,
    /// Everything drawn on the timeline: first to last device op of any rank.
    pub span: Interval,
    /// Who arrives late at collectives, per rank and step.
    pub arrivals: Arrivals,
    /// Every step of every rank: the steps × ranks heatmap's own cells
    /// (see [`Data::step_grid`]).
    pub step_cells: StepCells,
    /// The collectives matched across ranks (a member op finds its own
    /// with `Instances::of_op`, for the Timeline's details).
    pub instances: Instances,
    /// Each matched collective as a row (the Collectives tab).
    pub collectives: crate::derive::instances::Rows,
    /// When each matched collective's last member started: a rank's waits
    /// in them are made from it as its lanes are (not held for every rank).
    pub last_starts: LastStarts,
    /// The straggler verdict every tab shows (see `metrics::ranks::verdict`).
    pub verdict: Verdict,
    /// Longest op of each rank (by rank index), to bound the search for the op
    /// under the cursor.
    pub max_dur: Vec<Ns>,
    /// Per memory snapshot (same order as `trace.memory`): its times on the
    /// clock the Memory tab shows and its bytes by phase.
    pub(crate) memory: Vec<crate::tui::memory_view::MemView>,
    /// A summary opened lean: lanes and ops read a window at a time.
    pub paged: Option<crate::tui::paged::Paged>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepSpan {
    pub number: i64,
    /// 0 for the first `ProfilerStep#number` on a rank, 1 for its repeat, ...
    pub occurrence: u32,
    pub span: Interval,
}

impl StepSpan {
    /// "step 3", or "step 3 (2nd)" for the second instance of that number.
    pub fn label(&self) -> String {
        match self.occurrence {
            0 => format!("step {}", self.number),
            k => format!("step {} ({})", self.number, ordinal(k + 1)),
        }
    }
}

fn ordinal(n: u32) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// What every view of a run shows whatever holds its ops: the figures and
/// the collectives matched across ranks.
struct Common {
    summary: Vec<(&'static Metric, Outcome)>,
    ranks: Vec<RankRow>,
    verdict: Verdict,
    arrivals: Arrivals,
    instances: Instances,
    collectives: crate::derive::instances::Rows,
    /// When each matched collective's last member started: a rank's waits
    /// in them, made as its lanes are (not held for every rank at once).
    last_starts: LastStarts,
}

impl Common {
    /// What the tabs keep of `ctx`, which is given up: its rows and
    /// collectives are moved, not copied (a copy doubled the peak).
    fn of(ctx: Ctx, trace: &Trace) -> Self {
        let summary = METRICS.iter().zip(eval_all(&ctx)).collect();
        let verdict = verdict(&ctx);
        let arrivals = arrivals(trace, ctx.instances());
        let derived = ctx.into_derived();
        Self {
            summary,
            ranks: derived.rows,
            verdict,
            arrivals,
            last_starts: derived.last_starts,
            collectives: derived.collectives,
            instances: derived.instances,
        }
    }
}

/// Step instances over all ranks from each rank's (key, hull) pairs.
fn step_spans(per_rank: impl IntoIterator<Item = Vec<((i64, u32), Interval)>>) -> Vec<StepSpan> {
    let mut steps: BTreeMap<(i64, u32), Interval> = BTreeMap::new();
    for (key, h) in per_rank.into_iter().flatten() {
        steps
            .entry(key)
            .and_modify(|s| *s = Interval::new(s.start.min(h.start), s.end.max(h.end)))
            .or_insert(h);
    }
    let mut steps: Vec<StepSpan> = steps
        .into_iter()
        .map(|((number, occurrence), span)| StepSpan {
            number,
            occurrence,
            span,
        })
        .collect();
    steps.sort_by_key(|s| (s.span.start, s.number, s.occurrence));
    steps
}

/// A rank's step keys paired with their hulls (steps with none left out).
fn keyed_hulls(t: &RankTimeline, hulls: &[Option<Interval>]) -> Vec<((i64, u32), Interval)> {
    t.step_keys()
        .into_iter()
        .zip(hulls)
        .filter_map(|(key, hull)| Some((key, (*hull)?)))
        .collect()
}

/// The lanes of every rank: (rank lane, stream lanes, CPU lanes, longest
/// op, step hulls, launch queue).
type RankLanes = (
    Lane,
    Vec<Lane>,
    Vec<Lane>,
    Ns,
    Vec<((i64, u32), Interval)>,
    Option<crate::tui::queue::Queue>,
);

impl Data {
    /// Where each step starts and its label: the marks the Timeline's and
    /// Memory's rulers draw.
    pub(crate) fn step_marks(&self) -> Vec<(Ns, String)> {
        self.steps
            .iter()
            .map(|s| (s.span.start, s.label()))
            .collect()
    }

    /// The data of a run held whole; `matched`: what its load's clock check
    /// matched (see `derive::Made`), not matched again.
    pub fn new(
        trace: Trace,
        report: LoadReport,
        matched: Option<crate::derive::Matched>,
        opts: Options,
    ) -> Self {
        let made = crate::derive::Made {
            stats: None,
            matched,
        };
        let ctx = Ctx::with_made(&trace, None, made)
            .expect("no rank filter")
            .with_options(opts);
        let kernels = trace.ranks.par_iter().map(RankKernels::of).collect();
        // The metrics' per-rank unions are not needed past here.
        let common = Common::of(ctx, &trace);
        // Lanes of each rank, built in parallel: unions of up to millions of ops.
        let per_rank: Vec<RankLanes> = trace
            .ranks
            .par_iter()
            .enumerate()
            .map(|(i, t)| {
                let waits = &common.last_starts.waits_of(t);
                let lane = Lane::of(i, t.rank, None, t.ops.iter(), wait_of(waits, None));
                let by_stream: Vec<Lane> = crate::derive::lanes::by_stream(&t.ops)
                    .into_iter()
                    .map(|(s, ops)| {
                        let wait = wait_of(waits, Some(s));
                        Lane::of(i, t.rank, Some(s), ops.iter().copied(), wait)
                    })
                    .collect();
                let cpu: Vec<Lane> = t
                    .cpu
                    .iter()
                    .enumerate()
                    .map(|(k, th)| Lane::cpu_of(i, t.rank, k, th))
                    .collect();
                let max_dur = t.ops.iter().map(|o| o.dur).max().unwrap_or(Ns::ZERO);
                let hulls = keyed_hulls(t, &crate::metrics::ctx::gpu_step_hulls(t));
                // Only beside CPU lanes: the launches they hold explain it.
                let queue = if cpu.is_empty() {
                    None
                } else {
                    crate::tui::queue::Queue::of(t.ops.iter())
                };
                (lane, by_stream, cpu, max_dur, hulls, queue)
            })
            .collect();
        let span = trace.ranks.iter().filter_map(|t| t.device_window());
        let span = hull_of(span);
        // Exposed communication per step needs every op of the rank (made
        // when the heatmap first shows it).
        let ops_held = trace.ranks.iter().all(|t| !t.comm_only);
        Self::assemble(
            trace, report, common, kernels, per_rank, span, None, ops_held,
        )
    }

    /// A run the session held in pages (`session::Need::Screen`): its
    /// figures from the ranks' stats, its lanes from the summary's coarsest
    /// bins, finer bins and ops read a window at a time as the Timeline
    /// zooms. `Err` when a table cannot be read.
    pub(crate) fn paged(run: crate::session::Run, opts: Options) -> Result<Self, String> {
        use crate::tui::paged::Paged;
        let crate::session::Run {
            trace,
            report,
            stats,
            pages,
            matched,
            clock: _,
        } = run;
        let (Some(stats), Some(pages)) = (stats, pages) else {
            return Err("not held in pages".into());
        };
        let hulls: Vec<Vec<((i64, u32), Interval)>> = trace
            .ranks
            .iter()
            .zip(&stats)
            .map(|(t, s)| {
                let h = s
                    .step_hulls
                    .as_ref()
                    .ok_or("the summary stores no step hulls")?;
                Ok(keyed_hulls(t, h))
            })
            .collect::<Result<_, &str>>()?;
        let kernels: Vec<RankKernels> = stats.iter().map(|s| s.kernel_table.clone()).collect();
        let span = hull_of(stats.iter().filter_map(|s| s.device_window));
        let longest: Vec<Ns> = stats
            .iter()
            .map(|s| s.kernel_table.names.iter().map(|n| n.3.max).max())
            .map(|m| m.unwrap_or(Ns::ZERO))
            .collect();
        let made = crate::derive::Made {
            stats: Some(stats),
            matched,
        };
        let ctx = Ctx::with_made(&trace, None, made)?.with_options(opts);
        let common = Common::of(ctx, &trace);
        // A rank's coarsest bins are read, made into its lanes and given
        // up, ranks in parallel: only the lanes stay.
        let built: Vec<(RankLanes, Option<(u32, Ns)>)> = trace
            .ranks
            .par_iter()
            .zip(hulls.into_par_iter().zip(longest))
            .enumerate()
            .map(|(i, (t, (hulls, longest)))| {
                let bins = pages.rank(i).expect("a page per rank").top_bins()?;
                let waits = common.last_starts.waits_of(t);
                let (lane, streams) = bin_lanes(i, t.rank, &bins, &waits);
                let top = bins.first().map(|b| (b.level, b.len));
                Ok(((lane, streams, Vec::new(), longest, hulls, None), top))
            })
            .collect::<Result<_, String>>()?;
        let (per_rank, top): (Vec<RankLanes>, Vec<_>) = built.into_iter().unzip();
        let paged = Paged::new(pages, top);
        Ok(Self::assemble(
            trace,
            report,
            common,
            kernels,
            per_rank,
            span,
            Some(paged),
            false,
        ))
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        trace: Trace,
        report: LoadReport,
        common: Common,
        kernels: Vec<RankKernels>,
        per_rank: Vec<RankLanes>,
        span: Interval,
        paged: Option<crate::tui::paged::Paged>,
        ops_held: bool,
    ) -> Self {
        let (mut lanes, mut stream_lanes, mut cpu_lanes) = (Vec::new(), Vec::new(), Vec::new());
        let (mut max_dur, mut hulls) = (Vec::new(), Vec::new());
        let (mut queue_lanes, mut queues) = (Vec::new(), Vec::new());
        for (lane, by_stream, cpu, dur, h, queue) in per_rank {
            if queue.is_some() {
                queue_lanes.push(Lane::queue_of(lane.rank_index, lane.rank));
            }
            queues.push(queue);
            lanes.push(lane);
            stream_lanes.extend(by_stream);
            cpu_lanes.extend(cpu);
            max_dur.push(dur);
            hulls.push(h);
        }
        let memory = trace
            .memory
            .iter()
            .map(|m| crate::tui::memory_view::MemView::of(&trace, m))
            .collect();
        let step_cells = StepCells::of(&trace, &hulls, ops_held, &common.arrivals);
        Self {
            step_cells,
            memory,
            inputs: report.input_lines(),
            notes: Vec::new(),
            warnings: report.warnings,
            files: report.files.len(),
            events: report.events,
            bytes: report.bytes,
            summary: common.summary,
            ranks: common.ranks,
            kernels,
            lanes,
            stream_lanes,
            cpu_lanes,
            queue_lanes,
            queues,
            steps: step_spans(hulls),
            span,
            max_dur,
            instances: common.instances,
            last_starts: common.last_starts,
            collectives: common.collectives,
            arrivals: common.arrivals,
            verdict: common.verdict,
            trace,
            paged,
        }
    }

    /// Every step of every rank in each measure (the Stragglers heatmap).
    pub fn step_grid(&self) -> StepGrid<'_> {
        self.step_cells.with(&self.trace, &self.arrivals)
    }

    /// The ops of rank `rank_index` running at `t` (on `stream` when given),
    /// the latest to start first: the one a cursor put on an op's start names.
    pub(crate) fn ops_at(&self, rank_index: usize, stream: Option<u32>, t: Ns) -> Vec<DeviceOp> {
        let at = Interval::new(t, t.saturating_add(Ns(1)));
        let mut ops = self
            .ops_in(rank_index, stream, at, usize::MAX)
            .unwrap_or_default();
        ops.reverse();
        ops
    }

    /// The ops of rank `rank_index` overlapping `view` (on `stream` when
    /// given), or `None` when there are more than `max` candidates (a view too
    /// wide to show names in anyway).
    pub fn ops_in(
        &self,
        rank_index: usize,
        stream: Option<u32>,
        view: Interval,
        max: usize,
    ) -> Option<Vec<DeviceOp>> {
        if let Some(p) = &self.paged {
            return p.ops_in(self.run(), rank_index, stream, view, max);
        }
        let ops = self.resident_candidates(rank_index, view)?;
        if ops.len() > max {
            return None;
        }
        Some(
            ops.iter()
                .filter(|o| o.end() > view.start && stream.is_none_or(|s| o.stream == s))
                .cloned()
                .collect(),
        )
    }

    /// Each op of rank `rank_index` overlapping `view` to `f`, in start
    /// order; in pages, a row group at a time, whatever the view's width.
    pub(crate) fn visit_ops(
        &self,
        rank_index: usize,
        view: Interval,
        f: &mut dyn FnMut(&DeviceOp),
    ) -> Result<(), String> {
        if let Some(p) = &self.paged {
            return p.visit(self.run(), rank_index, view, f);
        }
        if let Some(ops) = self.resident_candidates(rank_index, view) {
            ops.iter().filter(|o| o.end() > view.start).for_each(f);
        }
        Ok(())
    }

    /// The resident ops of rank `rank_index` that may overlap `view`: those
    /// starting before its end and at most the rank's longest op before it.
    fn resident_candidates(&self, rank_index: usize, view: Interval) -> Option<&[DeviceOp]> {
        let r = self.trace.ranks.get(rank_index)?;
        let earliest = view.start.saturating_sub(self.max_dur[rank_index]);
        let end = r.ops.partition_point(|o| o.start < view.end);
        let begin = r.ops[..end].partition_point(|o| o.start < earliest);
        Some(&r.ops[begin..end])
    }

    /// Where `op` (one of rank `rank_index`'s, read from anywhere) sits in
    /// the rank's resident ops: every op, or in pages its collectives.
    pub(crate) fn op_index(&self, rank_index: usize, op: &DeviceOp) -> Option<usize> {
        self.trace.ranks.get(rank_index)?.find_op(op)
    }

    /// What reading pages needs of the run.
    fn run(&self) -> crate::tui::paged::Run<'_> {
        crate::tui::paged::Run {
            trace: &self.trace,
            last_starts: &self.last_starts,
        }
    }

    /// The lane as drawn over `view` at `width` columns: itself, or in
    /// pages one from bins fine enough for the zoom or from the window's
    /// ops.
    pub fn shown<'a>(&'a self, lane: &'a Lane, view: Interval, width: u16) -> Shown<'a> {
        match &self.paged {
            Some(p) if lane.cpu.is_none() => p.shown(self.run(), lane, view, width),
            _ => Shown::Resident(lane),
        }
    }

    /// Reads what [`Data::shown`] will need for each (rank index, view),
    /// ranks in parallel.
    pub(crate) fn prefetch(&self, views: &[(usize, Interval)], width: u16) {
        if let Some(p) = &self.paged {
            p.prefetch(self.run(), views, width);
        }
    }

    /// Keeps an error reading pages for the Timeline to show.
    pub(crate) fn page_failed(&self, e: String) {
        if let Some(p) = &self.paged {
            p.fail(e);
        }
    }

    /// The last error reading pages (a summary changed or damaged since
    /// it was opened): it stays on screen, the view being incomplete.
    pub fn page_error(&self) -> Option<String> {
        self.paged.as_ref().and_then(|p| p.error())
    }
}

/// The hull of `spans`, at least 1 ns long (a run with no op: [0, 1)).
fn hull_of(spans: impl Iterator<Item = Interval>) -> Interval {
    spans
        .reduce(|a, b| Interval::new(a.start.min(b.start), a.end.max(b.end)))
        .map_or(Interval::new(Ns::ZERO, Ns(1)), |s| {
            Interval::new(s.start, s.end.max(s.start + Ns(1)))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each member op finds its collective; any other op, none: the sample
    /// run's 8 ranks and 51 collectives, and a third all-reduce on one rank
    /// of a pair (the other's trace cut off).
    #[test]
    fn instance_of_finds_each_member() {
        use crate::metrics::testing::trace;
        use crate::model::collectives::instances;
        let t = trace(&crate::synth::training_run(&Default::default()));
        let inst = instances(&t);
        let of = |t: &RankTimeline, o: usize| inst.of_op(t, o);
        let mut members = 0;
        for (k, i) in inst.iter().enumerate() {
            for (r, o) in i.pairs() {
                assert_eq!(of(&t.ranks[r], o), Some(k));
                members += 1;
            }
        }
        let ops: usize = t.ranks.iter().map(|r| r.ops.len()).sum();
        let found = t
            .ranks
            .iter()
            .map(|r| (0..r.ops.len()).filter(|&o| of(r, o).is_some()).count())
            .sum::<usize>();
        assert_eq!((members, found), (8 * 51, 8 * 51));
        assert!(ops > found);
        assert_eq!(of(&t.ranks[0], usize::MAX), None);

        let mut ranks = crate::synth::late_pair();
        let c = crate::synth::Coll::all_reduce_f32(1, 2);
        ranks[0].collective("ncclDevKernel_AllReduce_Sum_f32_RING_LL", 70.0, 5.0, 20, &c);
        let t = trace(&ranks);
        let inst = instances(&t);
        let matched = |r: usize| {
            let t = &t.ranks[r];
            (0..t.ops.len())
                .filter_map(|o| inst.of_op(t, o))
                .collect::<Vec<_>>()
        };
        assert_eq!((matched(0), matched(1)), (vec![0], vec![0]));
    }
}
