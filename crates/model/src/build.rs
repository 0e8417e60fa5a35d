//! The one way readers fill a rank's timeline. The builder bounds every time
//! (beyond ±[`TIME_LIMIT`](super::time::TIME_LIMIT) an event is skipped and counted), keeps sums from
//! overflowing, interns names, and on `finish` establishes what the rest of
//! the tool takes for granted: ops and annotations sorted by start, steps
//! sorted and de-duplicated, each op in the step it was launched in, the
//! window covering every event kept.

use std::path::Path;
use std::sync::Arc;

use super::intervals::Interval;
use super::strings::{Interner, StrId};
use super::time::{in_range, Micros, Ns};
use super::timeline::{
    Annotation, CollMeta, CpuKind, CpuOp, CpuThread, DeviceInfo, DeviceOp, RankTimeline,
    SourceFormat, Step,
};
use super::warning::Warning;

/// Why an event's time was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TimeError {
    /// A start, end or duration beyond ±[`TIME_LIMIT`](super::time::TIME_LIMIT).
    OutOfRange,
    /// The event ends before it starts.
    Negative,
}

#[derive(Debug)]
pub struct TimelineBuilder {
    t: RankTimeline,
    /// Launch calls' (start, CPU duration), put into steps at the end.
    launch_spans: Vec<(Ns, Ns)>,
    /// Those of a process's CPU side shared with its other devices' ranks,
    /// already counted by step.
    shared_by_step: Vec<(u64, Ns)>,
    /// The CPU side came from [`Self::share`], steps decided there.
    cpu_shared: bool,
    out_of_range: u64,
    /// Summed duration of the ops kept, and ops left out to keep it bounded.
    op_time: Ns,
    too_long: u64,
    /// CPU ranges by thread id, and those left out past [`MAX_CPU_OPS`].
    cpu: std::collections::HashMap<u64, CpuThread>,
    cpu_ops: usize,
    cpu_dropped: u64,
    /// CPU lanes taken whole from a shared CPU side.
    threads: Vec<CpuThread>,
}

/// The most CPU ranges kept for one rank's CPU lanes (128 MiB of them): a
/// profile of a few steps has far fewer; past it they are counted, not kept.
pub(crate) const MAX_CPU_OPS: usize = 1 << 22;

/// A process's CPU-side events, shared by its devices' ranks (see
/// [`TimelineBuilder::into_shared`]).
#[derive(Debug, Default)]
pub struct SharedCpu {
    /// The names every rank that shares them starts from (held once).
    names: super::strings::Interner,
    annotations: Arc<Vec<Annotation>>,
    steps: Vec<Step>,
    /// The steps are inference engine steps found in the annotations.
    engine_steps: bool,
    /// Its launch calls counted by step (of `steps`): not kept one by one
    /// while its devices' ops are placed.
    launch_by_step: Vec<(u64, Ns)>,
    launch_calls: u64,
    launch_time: Ns,
    window: Option<Interval>,
    out_of_range: u64,
    /// The launching threads' CPU lanes, for the one device that takes them.
    threads: Vec<CpuThread>,
    cpu_dropped: u64,
}

/// The threads that launched device work, busiest first, each sorted with
/// enclosing ranges first and nesting depths set.
fn cpu_threads(by_tid: std::collections::HashMap<u64, CpuThread>) -> Vec<CpuThread> {
    let mut threads: Vec<CpuThread> = by_tid
        .into_values()
        .filter(|t| t.launches > 0)
        .map(|t| CpuThread::new(t.tid, t.launches, t.ops))
        .collect();
    threads.sort_by_key(|t| (std::cmp::Reverse(t.launches), t.tid));
    threads
}

/// The most device-op time one rank may sum to: 2^52 ns (52 days; a profile
/// covers seconds to minutes). Below it, sums over a rank's ops, and over
/// thousands of ranks, cannot overflow.
pub const MAX_OP_TIME: Ns = Ns(1 << 52);

impl TimelineBuilder {
    pub fn new(source: &Path, format: SourceFormat) -> Self {
        Self {
            t: RankTimeline {
                source: source.to_owned(),
                format,
                ..Default::default()
            },
            launch_spans: Vec::new(),
            shared_by_step: Vec::new(),
            cpu_shared: false,
            out_of_range: 0,
            op_time: Ns::ZERO,
            too_long: 0,
            cpu: std::collections::HashMap::new(),
            cpu_ops: 0,
            cpu_dropped: 0,
            threads: Vec::new(),
        }
    }

    /// Adds a CPU range (its span checked) on thread `tid`; `launch` when it
    /// is a kernel-launch call. Only threads with a launch are kept.
    pub fn push_cpu(
        &mut self,
        tid: u64,
        name: StrId,
        kind: CpuKind,
        start: Ns,
        dur: Ns,
        launch: bool,
    ) {
        if self.cpu_ops >= MAX_CPU_OPS {
            self.cpu_dropped += 1;
            return;
        }
        self.cpu_ops += 1;
        let th = self.cpu.entry(tid).or_insert_with(|| CpuThread {
            tid,
            ..CpuThread::default()
        });
        th.launches += u64::from(launch);
        th.ops.push(CpuOp {
            start,
            dur,
            name,
            kind,
            depth: 0,
            parent: super::timeline::NO_PARENT,
        });
    }

    pub fn intern(&mut self, s: &str) -> StrId {
        self.t.strings.intern(s)
    }

    pub fn strings(&self) -> &Interner {
        &self.t.strings
    }

    pub fn strings_mut(&mut self) -> &mut Interner {
        &mut self.t.strings
    }

    pub fn set_rank(&mut self, rank: u32) {
        self.t.rank = rank;
    }

    pub fn rank(&self) -> u32 {
        self.t.rank
    }

    /// The Unix time (ns) of the file's zero (see `RankTimeline::epoch`).
    pub fn set_epoch(&mut self, epoch: Option<Ns>) {
        self.t.epoch = epoch;
    }

    pub fn set_world_size(&mut self, world_size: Option<u32>) {
        self.t.world_size = world_size;
    }

    pub fn set_groups(&mut self, groups: Vec<super::timeline::ProcessGroup>) {
        self.t.groups = groups;
    }

    /// Checks an event lasting `dur` from `start` and widens the window to
    /// it; returns its end. A failure is counted (see [`Self::out_of_range`]).
    pub(crate) fn span(&mut self, start: Ns, dur: Ns) -> Result<Ns, TimeError> {
        if dur < Ns::ZERO {
            return Err(TimeError::Negative);
        }
        // Both within ±2^61, so the sum cannot overflow.
        if !in_range(start) || !in_range(dur) || !in_range(start + dur) {
            self.out_of_range += 1;
            return Err(TimeError::OutOfRange);
        }
        let end = start + dur;
        let w = Interval::new(start, end);
        self.t.window = Some(match self.t.window {
            Some(o) => Interval::new(o.start.min(start), o.end.max(end)),
            None => w,
        });
        Ok(end)
    }

    /// [`Self::span`] for an event timed in microseconds; returns its start
    /// and duration in nanoseconds.
    pub fn span_us(&mut self, start: Micros, dur: Micros) -> Result<(Ns, Ns), TimeError> {
        let (Some(start), Some(dur)) = (start.ns(), dur.ns()) else {
            self.out_of_range += 1;
            return Err(TimeError::OutOfRange);
        };
        self.span(start, dur)?;
        Ok((start, dur))
    }

    /// [`Self::span`] for an event given by its start and end; returns its
    /// duration (0 for an end before the start, which some exporters write
    /// for instantaneous events).
    pub fn between(&mut self, start: Ns, end: Ns) -> Result<Ns, TimeError> {
        if !in_range(start) || !in_range(end) {
            self.out_of_range += 1;
            return Err(TimeError::OutOfRange);
        }
        let dur = (end - start).max(Ns::ZERO);
        self.span(start, dur)?;
        Ok(dur)
    }

    /// Adds a device op whose span has not been checked yet.
    pub fn push_op(&mut self, op: DeviceOp) -> Result<(), TimeError> {
        if !in_range(op.launch) || !in_range(op.start) || !in_range(op.dur) {
            self.out_of_range += 1;
            return Err(TimeError::OutOfRange);
        }
        let total = self.op_time.saturating_add(op.dur);
        if total > MAX_OP_TIME {
            self.too_long += 1;
            return Err(TimeError::OutOfRange);
        }
        self.span(op.start, op.dur)?;
        self.op_time = total;
        self.t.ops.vec_mut().push(op);
        Ok(())
    }

    /// Adds collective metadata; returns its index for `DeviceOp::meta`.
    pub fn push_coll(&mut self, meta: CollMeta) -> u32 {
        self.t.colls.push(meta);
        (self.t.colls.len() - 1) as u32
    }

    /// Adds a step whose range went through [`Self::span`].
    pub fn push_step(&mut self, number: i64, start: Ns, end: Ns) {
        // A shared CPU side's launches were counted by its steps.
        debug_assert!(!self.cpu_shared, "a step added to a shared CPU side");
        self.t.steps.push(Step { number, start, end });
    }

    /// Adds an annotation whose range went through [`Self::span`].
    pub fn push_annotation(&mut self, name: StrId, start: Ns, end: Ns, on_gpu: bool) {
        Arc::make_mut(&mut self.t.annotations).push(Annotation {
            name,
            start,
            end,
            on_gpu,
        });
    }

    /// Counts a kernel-launch call (its span checked).
    pub fn launch_call(&mut self, start: Ns, dur: Ns) {
        self.t.launch_calls += 1;
        self.t.launch_time = self.t.launch_time.saturating_add(dur);
        self.launch_spans.push((start, dur));
    }

    /// Adds an op's recorded FLOPs, when a real count.
    pub fn add_flops(&mut self, flops: f64) {
        if flops.is_finite() && flops >= 0.0 {
            *self.t.flops.get_or_insert(0.0) += flops;
        }
    }

    pub fn push_device(&mut self, device: DeviceInfo) {
        self.t.devices.push(device);
    }

    /// The names, ops and collective metadata so far, for readers that link
    /// ops after reading (correlation ids, `record_param_comms`).
    pub fn parts(&mut self) -> (&Interner, &mut [DeviceOp], &mut Vec<CollMeta>) {
        (&self.t.strings, &mut self.t.ops, &mut self.t.colls)
    }

    pub fn op_count(&self) -> usize {
        self.t.ops.len()
    }

    /// Room for `n` more device ops, where a reader knows how many are
    /// coming: a vector grown by doubling holds its old and new buffers at
    /// once, half again the ops' memory at the peak. Nothing is reserved if
    /// that much memory cannot be (the ops then grow as they come).
    pub fn reserve_ops(&mut self, n: usize) {
        let _ = self.t.ops.vec_mut().try_reserve_exact(n);
    }

    /// Room for `n` more launch calls (see [`Self::reserve_ops`]).
    pub fn reserve_launch_calls(&mut self, n: usize) {
        let _ = self.launch_spans.try_reserve_exact(n);
    }

    /// Drops every event added so far, keeping the rank, its devices and the
    /// names interned (a second event array replaces the first).
    pub fn drop_events(&mut self) {
        let t = &mut self.t;
        t.ops.vec_mut().clear();
        t.colls.clear();
        t.steps.clear();
        t.annotations = Arc::default();
        t.window = None;
        t.flops = None;
        t.launch_calls = 0;
        t.launch_time = Ns::ZERO;
        self.cpu.clear();
        self.cpu_ops = 0;
        self.cpu_dropped = 0;
        self.launch_spans.clear();
        self.out_of_range = 0;
        self.op_time = Ns::ZERO;
        self.too_long = 0;
    }

    /// Events skipped so far for times beyond ±[`TIME_LIMIT`](super::time::TIME_LIMIT).
    pub fn out_of_range(&self) -> u64 {
        self.out_of_range
    }

    /// The CPU side built so far (annotations, steps, launch calls), to be
    /// shared by the ranks of every device one process drives: built once,
    /// referred to by each, not copied per device. For a builder given only
    /// CPU events.
    pub fn into_shared(mut self) -> SharedCpu {
        let t = &mut self.t;
        if !t.annotations.is_sorted_by_key(|a| a.start) {
            Arc::make_mut(&mut t.annotations).sort_by_key(|a| a.start);
        }
        settle_steps(&mut t.steps);
        // Found once here, not by every rank sharing them.
        let engine_steps = engine_steps(t);
        let launch_by_step = launches_by_step(&t.steps, self.launch_spans.iter());
        SharedCpu {
            names: std::mem::take(&mut t.strings).into_shared(),
            engine_steps,
            annotations: std::mem::take(&mut t.annotations),
            steps: std::mem::take(&mut t.steps),
            launch_by_step,
            launch_calls: t.launch_calls,
            launch_time: t.launch_time,
            window: t.window,
            out_of_range: self.out_of_range,
            threads: cpu_threads(std::mem::take(&mut self.cpu)),
            cpu_dropped: self.cpu_dropped,
        }
    }

    /// Takes a process's shared CPU side; first, on a fresh builder, so that
    /// the shared annotations' names have the same ids here. Its CPU lanes,
    /// if it has any, go to the first rank that takes it.
    pub fn share(&mut self, cpu: &mut SharedCpu) {
        self.cpu_dropped += std::mem::take(&mut cpu.cpu_dropped);
        self.threads = std::mem::take(&mut cpu.threads);
        debug_assert!(self.t.strings.is_empty() && self.t.annotations.is_empty());
        self.t.strings = cpu.names.clone();
        self.t.annotations = Arc::clone(&cpu.annotations);
        self.t.steps.clone_from(&cpu.steps);
        self.t.engine_steps = cpu.engine_steps;
        self.cpu_shared = true;
        self.shared_by_step.clone_from(&cpu.launch_by_step);
        self.t.launch_calls = cpu.launch_calls;
        self.t.launch_time = cpu.launch_time;
        self.t.window = cpu.window;
        self.out_of_range += cpu.out_of_range;
    }

    /// The finished timeline, and a warning when events were skipped.
    pub fn finish(mut self) -> (RankTimeline, Vec<Warning>) {
        let t = &mut self.t;
        settle_steps(&mut t.steps);
        // (Found once in `into_shared` for a shared CPU side.)
        if !self.cpu_shared {
            t.engine_steps = engine_steps(t);
        }
        // Annotations come in any order; programs are found in start order.
        if !t.annotations.is_sorted_by_key(|a| a.start) {
            Arc::make_mut(&mut t.annotations).sort_by_key(|a| a.start);
        }
        // Steps from the program's runs are on the device's clock: an op is
        // in the run it ran in, not where its launch fell (the launcher runs
        // ahead, into the run before). Step ranges on the CPU take an op by
        // its launch, as the profiler's own step accounting does.
        let device_steps = t.steps.is_empty() && t.format == super::timeline::SourceFormat::Xla;
        if device_steps {
            t.steps = super::program::program_steps(&t.annotations, &t.strings);
        }
        for op in &mut t.ops {
            let at = if device_steps { op.start } else { op.launch };
            op.step = step_at(&t.steps, at).into();
        }
        t.launch_by_step = launches_by_step(&t.steps, self.launch_spans.iter());
        // A shared side's steps are these (settled there, none added since).
        for (own, shared) in t.launch_by_step.iter_mut().zip(&self.shared_by_step) {
            own.0 += shared.0;
            own.1 = own.1.saturating_add(shared.1);
        }
        // The timeline is kept for the whole run; growth slack is not.
        t.ops.vec_mut().shrink_to_fit();
        sort_ops(&mut t.ops);
        t.cpu = if self.threads.is_empty() {
            cpu_threads(std::mem::take(&mut self.cpu))
        } else {
            std::mem::take(&mut self.threads)
        };
        let mut warnings = Vec::new();
        if self.cpu_dropped > 0 {
            warnings.push(Warning::ignored(format!(
                "{}: {} CPU range(s) past the first {MAX_CPU_OPS} left out of the CPU lanes",
                t.source.display(),
                self.cpu_dropped,
            )));
        }
        if self.too_long > 0 {
            warnings.push(Warning::damaged(format!(
                "{}: {} device op(s) skipped as damaged: with them the rank's ops would sum past 2^52 ns (52 days)",
                t.source.display(),
                self.too_long,
            )));
        }
        if self.out_of_range > 0 {
            warnings.push(Warning::damaged(format!(
                "{}: {} event(s) with a time beyond ±2^61 ns (±73 years) skipped as damaged",
                t.source.display(),
                self.out_of_range,
            )));
        }
        (self.t, warnings)
    }
}

/// Index of the step whose range contains `t` (steps are sorted and do not overlap).
/// Ops in start order (then end, device, stream, name, launch, so that the
/// order does not depend on the file's). In place: a stable sort would need
/// half the ops again as scratch (72 MB per million ops), and ops mostly
/// arrive sorted already.
pub(super) fn sort_ops(ops: &mut [DeviceOp]) {
    let key = |o: &DeviceOp| (o.start, o.end(), o.device, o.stream, o.name, o.launch);
    if !ops.is_sorted_by_key(key) {
        ops.sort_unstable_by_key(key);
    }
}

/// A serving trace has no ProfilerStep: its engine steps are the steps.
/// Whether that is so (and `t.steps` became them).
fn engine_steps(t: &mut RankTimeline) -> bool {
    t.steps.is_empty() && {
        t.steps = super::engine::as_steps(&t.annotations, &t.strings);
        !t.steps.is_empty()
    }
}

pub(crate) fn step_at(steps: &[Step], t: Ns) -> Option<u32> {
    let i = steps.partition_point(|s| s.start <= t);
    let s = steps.get(i.checked_sub(1)?)?;
    (t < s.end).then_some((i - 1) as u32)
}

/// Kernel-launch calls (start, CPU duration) counted and summed per step,
/// by the step during which each call started.
/// Steps in time order, each once: the same range recorded twice is one
/// step; the same number at another time is a second instance (a restarted
/// profiler), kept as its own step.
fn settle_steps(steps: &mut Vec<Step>) {
    steps.sort_by_key(|s| (s.start, s.number));
    steps.dedup_by_key(|s| (s.number, s.start));
}

fn launches_by_step<'a>(
    steps: &[Step],
    calls: impl Iterator<Item = &'a (Ns, Ns)>,
) -> Vec<(u64, Ns)> {
    let mut out: Vec<(u64, Ns)> = vec![(0, Ns::ZERO); steps.len()];
    for &(start, dur) in calls {
        if let Some(i) = step_at(steps, start) {
            let o = &mut out[i as usize];
            o.0 += 1;
            o.1 = o.1.saturating_add(dur);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::TIME_LIMIT;
    use crate::{Activity, KernelClass};

    fn op(b: &mut TimelineBuilder, start: Ns, dur: Ns, launch: Ns) -> DeviceOp {
        let name = b.intern("k");
        DeviceOp {
            stream: 7,
            launch,
            ..DeviceOp::new(name, Activity::Kernel, KernelClass::Gemm, start, dur)
        }
    }

    #[test]
    fn times_beyond_2_pow_61_ns_are_skipped_and_counted() {
        let mut b = TimelineBuilder::new(Path::new("r.json"), SourceFormat::PyTorch);
        // ±8.9e15 µs = ±8.9e18 ns: within i64, but its window's length is not.
        assert_eq!(
            b.span(Ns(-8_900_000_000_000_000_000), Ns(10)),
            Err(TimeError::OutOfRange)
        );
        assert_eq!(
            b.span(Ns(8_900_000_000_000_000_000), Ns(10)),
            Err(TimeError::OutOfRange)
        );
        assert_eq!(
            b.span(Ns(100), Ns(4_000_000_000_000_000_000)),
            Err(TimeError::OutOfRange)
        );
        assert_eq!(
            b.span(TIME_LIMIT - Ns(5), Ns(10)),
            Err(TimeError::OutOfRange)
        );
        assert_eq!(b.span(Ns::ZERO, Ns(-1)), Err(TimeError::Negative));
        assert_eq!(
            b.between(Ns(i64::MIN), Ns::ZERO),
            Err(TimeError::OutOfRange)
        );
        assert_eq!(b.span(Ns(100), Ns(50)), Ok(Ns(150)));
        assert_eq!(b.between(Ns(200), Ns(180)), Ok(Ns(0)));
        assert_eq!(b.out_of_range(), 5);
        let (t, warnings) = b.finish();
        assert_eq!(t.window, Some(Interval::new(Ns(100), Ns(200))));
        assert_eq!(warnings.len(), 1);
        assert!(
            warnings[0].text.contains("r.json: 5 event(s)"),
            "{warnings:?}"
        );
        assert_eq!(warnings[0].kind, crate::warning::Kind::Damaged);
    }

    #[test]
    fn a_ranks_op_time_stays_summable() {
        let mut b = TimelineBuilder::new(Path::new("r.json"), SourceFormat::PyTorch);
        // Five 73-year kernels would sum past i64; the cap keeps none of them.
        for _ in 0..5 {
            let big = op(&mut b, -TIME_LIMIT / 2, TIME_LIMIT, Ns::ZERO);
            assert_eq!(b.push_op(big), Err(TimeError::OutOfRange));
        }
        let ok = op(&mut b, Ns::ZERO, Ns(10), Ns::ZERO);
        assert_eq!(b.push_op(ok), Ok(()));
        let (t, warnings) = b.finish();
        assert_eq!(t.ops.len(), 1);
        assert!(
            warnings[0].text.contains("5 device op(s) skipped"),
            "{warnings:?}"
        );
    }

    /// A builder with steps 1 (0-100) and 2 (100-200), out of order and
    /// step 2 recorded twice.
    fn with_steps() -> TimelineBuilder {
        let mut b = TimelineBuilder::new(Path::new("r.sqlite"), SourceFormat::Nsys);
        for (n, s, e) in [(2, 100, 200), (1, 0, 100), (2, 100, 200)] {
            b.span(Ns(s), Ns(e - s)).unwrap();
            b.push_step(n, Ns(s), Ns(e));
        }
        b
    }

    /// A shared CPU side's launch calls are counted by its steps where it
    /// is made; a rank sharing it adds its own calls to those counts.
    #[test]
    fn shared_launch_calls_are_counted_by_step_with_the_rank_s_own() {
        let mut cpu = with_steps();
        for (start, dur) in [(120, 5), (10, 3), (500, 1)] {
            cpu.launch_call(Ns(start), Ns(dur));
        }
        let mut shared = cpu.into_shared();
        let mut rank = TimelineBuilder::new(Path::new("r.sqlite"), SourceFormat::Nsys);
        rank.share(&mut shared);
        rank.launch_call(Ns(150), Ns(7));
        let (t, _) = rank.finish();
        assert_eq!(t.steps.len(), 2);
        assert_eq!(t.launch_by_step, vec![(1, Ns(3)), (2, Ns(12))]);
    }

    #[test]
    fn finish_sorts_and_places_ops_in_their_launch_step() {
        let mut b = with_steps();
        let late = op(&mut b, Ns(150), Ns(10), Ns(50));
        b.push_op(late).unwrap();
        let early = op(&mut b, Ns(20), Ns(10), Ns(10));
        b.push_op(early).unwrap();
        let stray = op(&mut b, Ns(300), Ns(10), Ns(300));
        b.push_op(stray).unwrap();
        b.span(Ns(120), Ns(5)).unwrap();
        b.launch_call(Ns(120), Ns(5));
        b.launch_call(Ns(10), Ns(i64::MAX));
        let (t, warnings) = b.finish();
        assert!(warnings.is_empty());
        assert_eq!(t.steps.len(), 2);
        assert_eq!((t.steps[0].number, t.steps[1].number), (1, 2));
        let starts: Vec<_> = t.ops.iter().map(|o| (o.start, o.step.get())).collect();
        // Launched at 50 (step 1) though it ran in step 2's range.
        assert_eq!(
            starts,
            vec![(Ns(20), Some(0)), (Ns(150), Some(0)), (Ns(300), None)]
        );
        assert_eq!(t.launch_by_step, vec![(1, Ns::MAX), (1, Ns(5))]);
        assert_eq!(t.launch_time, Ns(i64::MAX), "sums saturate");
        assert_eq!(t.window, Some(Interval::new(Ns::ZERO, Ns(310))));
    }
}
