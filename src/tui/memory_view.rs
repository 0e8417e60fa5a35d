//! A memory snapshot made ready to draw: each allocator event's time on the
//! clock the Memory tab shows, and the bytes live by phase after it. On the
//! Timeline's clock when the rank's trace states the Unix time of its zero
//! and the history falls within the trace; else on the allocator's own.

use crate::model::memory::{by_phase, MemoryTimeline, Phase};
use crate::model::{Interval, Ns, Trace};

/// Which clock a snapshot's times are on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum MemClock {
    /// The Timeline's: the rank is `trace.ranks[rank_index]`.
    Trace { rank_index: usize },
    /// The allocator's own, and why not the Timeline's.
    Own(String),
}

#[derive(Debug, Clone)]
pub(crate) struct MemView {
    pub clock: MemClock,
    /// Each sample's time (ns) on `clock`, never decreasing.
    pub times: Vec<Ns>,
    /// Bytes live by phase after each sample (see `model::memory::by_phase`).
    pub phases: Vec<[i64; 5]>,
    /// Bytes reserved after each sample.
    pub reserved: Vec<i64>,
    /// The largest reserved or allocated bytes, for the chart's height.
    pub top: i64,
}

/// A history time (µs, Unix) on a timeline whose zero is `epoch` (Unix ns):
/// `None` past what a nanosecond count holds.
fn on_trace(time_us: i64, epoch: Ns) -> Option<Ns> {
    time_us.checked_mul(1000)?.checked_sub(epoch.get()).map(Ns)
}

impl MemView {
    pub(crate) fn of(trace: &Trace, m: &MemoryTimeline) -> Self {
        let (clock, times) = match trace_times(trace, m) {
            Ok((rank_index, times)) => (MemClock::Trace { rank_index }, times),
            Err(why) => (
                MemClock::Own(why),
                m.samples
                    .iter()
                    .map(|s| Ns(s.time_us.saturating_mul(1000)))
                    .collect(),
            ),
        };
        // An event logged out of order is drawn at the time before it.
        let mut last = Ns(i64::MIN);
        let times = times
            .into_iter()
            .map(|t| {
                last = last.max(t);
                last
            })
            .collect();
        let top = m
            .samples
            .iter()
            .map(|s| s.reserved.max(s.allocated))
            .max()
            .unwrap_or(0)
            .max(1);
        Self {
            clock,
            times,
            phases: by_phase(&m.samples),
            reserved: m.samples.iter().map(|s| s.reserved).collect(),
            top,
        }
    }

    /// The span of the recorded history on this view's clock.
    pub(crate) fn span(&self) -> Option<Interval> {
        let (a, b) = (*self.times.first()?, *self.times.last()?);
        Some(Interval::new(a, b.max(a + Ns(1))))
    }

    /// The sample whose state holds at `t`: the last at or before it.
    pub(crate) fn at(&self, t: Ns) -> Option<usize> {
        self.times.partition_point(|&x| x <= t).checked_sub(1)
    }

    /// For each column between consecutive `edges` (times, ascending), the
    /// sample it shows: the one with the most allocated bytes among those
    /// in the column (so a peak narrower than a column shows), else the
    /// state carried into it; `None` before the first sample and after the
    /// last.
    pub(crate) fn columns(&self, edges: &[Ns]) -> Vec<Option<usize>> {
        let Some(span) = self.span() else {
            return vec![None; edges.len().saturating_sub(1)];
        };
        edges
            .windows(2)
            .map(|w| {
                let (lo, hi) = (w[0], w[1]);
                if hi <= span.start || lo > span.end {
                    return None;
                }
                let i0 = self.times.partition_point(|&x| x < lo);
                let i1 = self.times.partition_point(|&x| x < hi);
                if i0 < i1 {
                    (i0..i1).max_by_key(|&i| (self.allocated(i), std::cmp::Reverse(i)))
                } else {
                    i0.checked_sub(1)
                }
            })
            .collect()
    }

    pub(crate) fn allocated(&self, i: usize) -> i64 {
        self.phases.get(i).map_or(0, |p| p.iter().sum())
    }
}

/// The snapshot's times on its rank's timeline, or why they cannot be.
fn trace_times(trace: &Trace, m: &MemoryTimeline) -> Result<(usize, Vec<Ns>), String> {
    let rank_index = trace
        .ranks
        .iter()
        .position(|t| t.rank == m.rank)
        .ok_or_else(|| format!("no trace of rank {} to share its clock", m.rank))?;
    let t = &trace.ranks[rank_index];
    let epoch = t.epoch.ok_or_else(|| {
        "its trace states no Unix time for its clock (Kineto's baseTimeNanoseconds)".to_owned()
    })?;
    let times = m
        .samples
        .iter()
        .map(|s| on_trace(s.time_us, epoch))
        .collect::<Option<Vec<Ns>>>()
        .ok_or("allocator times out of range")?;
    let (Some(&first), Some(&last), Some(w)) = (times.first(), times.last(), t.window) else {
        return Err("no allocator history or no trace window".into());
    };
    // Another run's snapshot, or another machine's clock: nothing in common.
    if last < w.start || first > w.end {
        return Err(format!(
            "the allocator history ({} to {} on the trace's clock) is outside the trace",
            crate::model::time::human(first - w.start),
            crate::model::time::human(last - w.start)
        ));
    }
    Ok((rank_index, times))
}

/// The phase ranges a rank's CPU annotations mark (`forward`, `backward`,
/// `optimizer`, `Optimizer.step#…`), outermost kept where they nest, in
/// start order.
pub(crate) fn phase_marks(t: &crate::model::RankTimeline) -> Vec<(Ns, Ns, Phase)> {
    let mut out: Vec<(Ns, Ns, Phase)> = t
        .annotations
        .iter()
        .filter(|a| !a.on_gpu)
        .filter_map(|a| {
            let name = t.name(a.name).to_ascii_lowercase();
            let phase = if name.contains("backward") {
                Phase::Backward
            } else if name.starts_with("optimizer") {
                Phase::Optimizer
            } else if name.contains("forward") {
                Phase::Forward
            } else {
                return None;
            };
            Some((a.start, a.end, phase))
        })
        .collect();
    out.sort_by_key(|&(s, e, _)| (s, std::cmp::Reverse(e)));
    let mut kept: Vec<(Ns, Ns, Phase)> = Vec::with_capacity(out.len());
    for m in out {
        if kept.last().is_some_and(|k| m.1 <= k.1) {
            continue;
        }
        kept.push(m);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::memory::{replay, MemState};
    use crate::model::RankTimeline;

    fn snapshot(rank: u32) -> MemoryTimeline {
        let end = MemState {
            allocated: 100,
            reserved: 400,
            ..MemState::default()
        };
        // Unix µs 1_000_000 + k.
        let ev = [
            (1_000_010, 50, 0, Phase::Forward),
            (1_000_020, 30, 0, Phase::Backward),
            (1_000_030, -50, 0, Phase::Forward),
            (1_000_040, 20, 0, Phase::Optimizer),
        ];
        MemoryTimeline {
            rank,
            samples: replay(end, ev.iter().copied()),
            end,
            ..MemoryTimeline::default()
        }
    }

    fn trace(epoch: Option<Ns>, window: (i64, i64)) -> Trace {
        Trace {
            ranks: vec![RankTimeline {
                rank: 0,
                epoch,
                window: Some(Interval::new(Ns(window.0), Ns(window.1))),
                ..RankTimeline::default()
            }],
            ..Trace::default()
        }
    }

    /// Zero at Unix 1 s - 5 µs: the event at 1_000_010 µs is at 15 µs on the
    /// trace's clock.
    #[test]
    fn history_on_the_traces_clock() {
        let m = snapshot(0);
        let v = MemView::of(&trace(Some(Ns(999_995_000)), (0, 100_000)), &m);
        assert_eq!(v.clock, MemClock::Trace { rank_index: 0 });
        let t: Vec<i64> = v.times.iter().map(|t| t.get()).collect();
        assert_eq!(t, [15_000, 15_000, 25_000, 35_000, 45_000]);
        // The history adds 50 to reach the end's 100: 50 from before it.
        assert_eq!(v.phases[4], [50, 0, 30, 20, 0]);
        assert_eq!(v.allocated(2), 130);
        assert_eq!(v.at(Ns(30_000)), Some(2));
        assert_eq!(v.at(Ns(1)), None);
        // 10 µs columns from 10 µs: the column holding two samples shows the
        // larger; the next carries it; past the last, nothing.
        let edges: Vec<Ns> = (1..=7).map(|k| Ns(k * 10_000)).collect();
        let cols = v.columns(&edges);
        assert_eq!(cols, [Some(1), Some(2), Some(3), Some(4), None, None]);

        // No stated zero, another rank, a history outside the trace: own clock.
        for (t, rank) in [
            (trace(None, (0, 100_000)), 0),
            (trace(Some(Ns(999_995_000)), (0, 100_000)), 3),
            (trace(Some(Ns(0)), (0, 100_000)), 0),
        ] {
            let v = MemView::of(&t, &snapshot(rank));
            assert!(matches!(v.clock, MemClock::Own(_)), "{:?}", v.clock);
            assert_eq!(v.times[1], Ns(1_000_010_000));
        }
    }

    #[test]
    fn phase_marks_keep_the_outermost() {
        use crate::model::timeline::Annotation;
        let mut t = RankTimeline::default();
        let mut a = |name: &str, s: i64, e: i64, on_gpu: bool| Annotation {
            name: t.strings.intern(name),
            start: Ns(s),
            end: Ns(e),
            on_gpu,
        };
        let list = vec![
            a("forward", 0, 10, false),
            a("backward", 10, 30, false),
            a("optimizer", 30, 40, false),
            a("Optimizer.step#AdamW.step", 31, 39, false),
            a("forward", 0, 12, true),
            a("ProfilerStep#2", 0, 40, false),
        ];
        t.annotations = std::sync::Arc::new(list);
        assert_eq!(
            phase_marks(&t),
            [
                (Ns(0), Ns(10), Phase::Forward),
                (Ns(10), Ns(30), Phase::Backward),
                (Ns(30), Ns(40), Phase::Optimizer)
            ]
        );
    }
}
