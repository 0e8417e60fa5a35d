//! Everything the tabs show that does not change while browsing, computed once
//! after loading: metric outcomes, per-rank rows, timeline lanes with coverage
//! indexes, step spans.

use std::collections::BTreeMap;

use rayon::prelude::*;

use crate::derive::lanes::LaneSets;
use crate::derive::RankRow;
use crate::load::LoadReport;
use crate::metrics::breakdown::RankKernels;
use crate::metrics::ranks::{verdict, Verdict};
use crate::metrics::{eval_all, Ctx, Metric, Options, Outcome, METRICS};
use crate::model::collectives::{arrivals, wait_intervals, Arrivals, Instance};
use crate::model::{Coverage, CpuKind, CpuThread, DeviceOp, Interval, IntervalSet, Ns, Trace};

pub struct Data {
    pub trace: Trace,
    pub warnings: Vec<String>,
    /// What was found beside the traces and whether it was read.
    pub inputs: Vec<String>,
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
    /// Step instances in start order: the hull of their device windows over
    /// all ranks. A number repeated on a rank (a restarted profiler) is a
    /// second instance, matched across ranks by its occurrence.
    pub steps: Vec<StepSpan>,
    /// Everything drawn on the timeline: first to last device op of any rank.
    pub span: Interval,
    /// Who arrives late at collectives, per rank and step.
    pub arrivals: Arrivals,
    /// The collectives matched across ranks, and for each member op (rank
    /// index, op index) its instance, for the Timeline's details.
    pub instances: Vec<Instance>,
    /// Each matched collective as a row (the Collectives tab).
    pub collectives: Vec<crate::derive::instances::InstanceRow>,
    pub instance_of: std::collections::HashMap<(usize, usize), usize>,
    /// The straggler verdict every tab shows (see `metrics::ranks::verdict`).
    pub verdict: Verdict,
    /// Longest op of each rank (by rank index), to bound the search for the op
    /// under the cursor.
    pub max_dur: Vec<Ns>,
    /// Per memory snapshot (same order as `trace.memory`): allocated and
    /// reserved GB over ms, thinned once for the Memory tab's chart.
    pub memory: Vec<[Vec<(f64, f64)>; 2]>,
}

/// A timeline row: what a rank (or one of its streams) was doing, as coverage
/// indexes so a screen column is drawn in O(log n).
pub struct Lane {
    pub rank_index: usize,
    pub rank: u32,
    pub stream: Option<u32>,
    /// A CPU lane: (thread id, its place among the rank's launching threads).
    /// Its `compute` is then the thread's operators, `comm` its runtime calls.
    pub cpu: Option<(u64, usize)>,
    pub compute: Coverage,
    pub comm: Coverage,
    /// compute ∩ comm.
    pub overlap: Coverage,
    pub memory: Coverage,
    /// The part of collectives spent waiting for the last rank to arrive.
    pub wait: Coverage,
    /// compute ∪ comm ∪ memory: how much of a column the device was busy.
    pub busy: Coverage,
}

impl Lane {
    fn of<'a>(
        rank_index: usize,
        rank: u32,
        stream: Option<u32>,
        ops: impl Iterator<Item = &'a DeviceOp> + Clone,
        wait: IntervalSet,
    ) -> Self {
        let sets = LaneSets::of(ops);
        Self {
            rank_index,
            rank,
            stream,
            cpu: None,
            busy: Coverage::new(sets.busy),
            memory: Coverage::new(sets.memory),
            compute: Coverage::new(sets.compute),
            comm: Coverage::new(sets.comm),
            overlap: Coverage::new(sets.overlap),
            wait: Coverage::new(wait),
        }
    }

    /// The lane of one launching thread (the `k`-th busiest) of a rank:
    /// operators and runtime calls (annotations are named, not shaded: a
    /// `ProfilerStep` range would cover the whole lane).
    fn cpu_of(rank_index: usize, rank: u32, k: usize, th: &CpuThread) -> Self {
        let set = |kind: CpuKind| {
            IntervalSet::from_iter_unsorted(
                th.ops
                    .iter()
                    .filter(|o| o.kind == kind)
                    .map(|o| Interval::new(o.start, o.end())),
            )
        };
        let ops = set(CpuKind::Op);
        let runtime = set(CpuKind::Runtime);
        Self {
            rank_index,
            rank,
            stream: None,
            cpu: Some((th.tid, k)),
            busy: Coverage::new(ops.union(&runtime)),
            compute: Coverage::new(ops),
            comm: Coverage::new(runtime),
            overlap: Coverage::default(),
            memory: Coverage::default(),
            wait: Coverage::default(),
        }
    }

    pub fn label(&self) -> String {
        match (self.cpu, self.stream) {
            (Some((_, 0)), _) => format!("r{} cpu", self.rank),
            (Some((_, k)), _) => format!("r{} cpu{}", self.rank, k + 1),
            (None, Some(s)) => format!("r{} s{s}", self.rank),
            (None, None) => format!("rank {}", self.rank),
        }
    }

    /// The rank's launching thread this CPU lane shows.
    pub fn thread<'a>(&self, data: &'a Data) -> Option<&'a CpuThread> {
        let (_, k) = self.cpu?;
        data.trace.ranks.get(self.rank_index)?.cpu.get(k)
    }
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

impl Data {
    pub fn new(trace: Trace, report: LoadReport, opts: Options) -> Self {
        let ctx = Ctx::new(&trace, None)
            .expect("no rank filter")
            .with_options(opts);
        let summary = METRICS.iter().zip(eval_all(&ctx)).collect();
        let ranks = ctx.rank_rows().to_vec();
        let verdict = verdict(&ctx);
        let kernels = trace.ranks.par_iter().map(RankKernels::of).collect();
        let mut lanes = Vec::new();
        let mut stream_lanes = Vec::new();
        let mut steps: BTreeMap<(i64, u32), Interval> = BTreeMap::new();
        let mut max_dur = Vec::new();
        // Wait intervals of matched collectives, per rank: (stream, interval).
        let matched = ctx.instances();
        let arrivals = arrivals(&trace, matched);
        let waits = wait_intervals(&trace, matched);
        let instances = matched.to_vec();
        let collectives = ctx.collective_rows().to_vec();
        let instance_of = instances
            .iter()
            .enumerate()
            .flat_map(|(k, i)| i.members.iter().map(move |&m| (m, k)))
            .collect();
        // The metrics' per-rank unions are not needed past here.
        drop(ctx);
        // Lanes of each rank, built in parallel: unions of up to millions of ops.
        let per_rank: Vec<_> = trace
            .ranks
            .par_iter()
            .zip(&waits)
            .enumerate()
            .map(|(i, (t, waits))| {
                let wait_of = |stream: Option<u32>| {
                    IntervalSet::from_iter_unsorted(
                        waits
                            .iter()
                            .filter(|(s, _)| stream.is_none_or(|x| x == *s))
                            .map(|(_, iv)| *iv),
                    )
                };
                let lane = Lane::of(i, t.rank, None, t.ops.iter(), wait_of(None));
                let by_stream: Vec<Lane> = crate::derive::lanes::by_stream(&t.ops)
                    .into_iter()
                    .map(|(s, ops)| {
                        Lane::of(i, t.rank, Some(s), ops.iter().copied(), wait_of(Some(s)))
                    })
                    .collect();
                let cpu: Vec<Lane> = t
                    .cpu
                    .iter()
                    .enumerate()
                    .map(|(k, th)| Lane::cpu_of(i, t.rank, k, th))
                    .collect();
                let max_dur = t.ops.iter().map(|o| o.dur).max().unwrap_or(Ns::ZERO);
                let hulls: Vec<((i64, u32), Interval)> = t
                    .step_keys()
                    .into_iter()
                    .zip(crate::metrics::ctx::gpu_step_hulls(t))
                    .filter_map(|(key, hull)| Some((key, hull?)))
                    .collect();
                (lane, by_stream, cpu, max_dur, hulls)
            })
            .collect();
        let mut cpu_lanes = Vec::new();
        for (lane, by_stream, cpu, dur, hulls) in per_rank {
            lanes.push(lane);
            stream_lanes.extend(by_stream);
            cpu_lanes.extend(cpu);
            max_dur.push(dur);
            for (key, h) in hulls {
                steps
                    .entry(key)
                    .and_modify(|s| *s = Interval::new(s.start.min(h.start), s.end.max(h.end)))
                    .or_insert(h);
            }
        }
        let span = trace
            .ranks
            .iter()
            .filter_map(|t| t.device_window())
            .reduce(|a, b| Interval::new(a.start.min(b.start), a.end.max(b.end)))
            .map_or(Interval::new(Ns::ZERO, Ns(1)), |s| {
                Interval::new(s.start, s.end.max(s.start + Ns(1)))
            });
        // Enough points for a wide terminal's Braille chart (2 dots per cell).
        const CHART_POINTS: usize = 2048;
        let memory = trace
            .memory
            .iter()
            .map(|m| {
                [
                    series(&m.samples, |s| s.allocated, CHART_POINTS),
                    series(&m.samples, |s| s.reserved, CHART_POINTS),
                ]
            })
            .collect();
        let mut steps: Vec<StepSpan> = steps
            .into_iter()
            .map(|((number, occurrence), span)| StepSpan {
                number,
                occurrence,
                span,
            })
            .collect();
        steps.sort_by_key(|s| (s.span.start, s.number, s.occurrence));
        Self {
            memory,
            inputs: report.input_lines(),
            warnings: report.warnings,
            files: report.files.len(),
            events: report.events,
            bytes: report.bytes,
            summary,
            ranks,
            kernels,
            lanes,
            stream_lanes,
            cpu_lanes,
            steps,
            span,
            max_dur,
            instances,
            instance_of,
            collectives,
            arrivals,
            verdict,
            trace,
        }
    }

    /// The ops of rank `rank_index` running at `t` (on `stream` when given),
    /// the latest to start first: the one a cursor put on an op's start names.
    pub fn ops_at(&self, rank_index: usize, stream: Option<u32>, t: Ns) -> Vec<&DeviceOp> {
        let at = Interval::new(t, t.saturating_add(Ns(1)));
        let mut ops = self
            .ops_in(rank_index, stream, at, usize::MAX)
            .unwrap_or_default();
        ops.reverse();
        ops
    }
}

impl Data {
    /// The ops of rank `rank_index` overlapping `view` (on `stream` when
    /// given), or `None` when there are more than `max` candidates (a view too
    /// wide to show names in anyway).
    pub fn ops_in(
        &self,
        rank_index: usize,
        stream: Option<u32>,
        view: Interval,
        max: usize,
    ) -> Option<Vec<&DeviceOp>> {
        let r = self.trace.ranks.get(rank_index)?;
        let earliest = view.start.saturating_sub(self.max_dur[rank_index]);
        let end = r.ops.partition_point(|o| o.start < view.end);
        let begin = r.ops[..end].partition_point(|o| o.start < earliest);
        if end - begin > max {
            return None;
        }
        Some(
            r.ops[begin..end]
                .iter()
                .filter(|o| o.end() > view.start && stream.is_none_or(|s| o.stream == s))
                .collect(),
        )
    }
}

/// At most `max` points keeping each bucket's highest value, so a peak narrower
/// than a screen column still shows. x: ms since the first sample; y: GB.
pub fn series(
    samples: &[crate::model::memory::MemSample],
    value: fn(&crate::model::memory::MemSample) -> i64,
    max: usize,
) -> Vec<(f64, f64)> {
    let Some(first) = samples.first() else {
        return Vec::new();
    };
    let t0 = first.time_us;
    let point = |s: &crate::model::memory::MemSample| {
        ((s.time_us - t0) as f64 / 1e3, value(s) as f64 / 1e9)
    };
    let per = samples.len().div_ceil(max.max(1)).max(1);
    samples
        .chunks(per)
        .map(|c| {
            let top = c.iter().max_by_key(|s| value(s)).unwrap_or(&c[0]);
            (point(&c[0]).0, point(top).1)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::MemSample;

    #[test]
    fn series_keeps_peaks_when_thinning() {
        let s: Vec<MemSample> = [1, 9, 2, 3, 4, 2]
            .iter()
            .enumerate()
            .map(|(i, &a)| MemSample {
                time_us: 1000 * i as i64,
                allocated: a * 1_000_000_000,
                reserved: 10_000_000_000,
            })
            .collect();
        // Two samples per point: (0,1)→9 at 0 ms, (2,3)→3 at 2 ms, (4,5)→4 at 4 ms.
        assert_eq!(
            series(&s, |x| x.allocated, 3),
            vec![(0.0, 9.0), (2.0, 3.0), (4.0, 4.0)]
        );
        assert_eq!(series(&s, |x| x.allocated, 100).len(), 6);
        assert!(series(&[], |x| x.allocated, 10).is_empty());
    }
}
