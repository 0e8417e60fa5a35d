//! Derived per-rank data: what several metric families and views need of a
//! rank (busy unions, per-class sums, phase times, the per-step budget, the
//! collectives matched across ranks and the waits they imply). Computed once,
//! eagerly and in parallel, before any metric runs; it reads the model and
//! imports no metric family.

pub mod fit;
pub mod groups;
pub mod instances;
pub mod kernels;
pub mod lanes;
pub mod phases;
pub mod sm;
pub mod steps;

use std::collections::HashMap;

use rayon::prelude::*;

use crate::model::collectives::{self, Instances, WaitSplit};
use crate::model::intervals::{difference, Lengths, Meeting, Merging};
use crate::model::{Activity, Interval, IntervalSet, KernelClass, Ns, RankTimeline, StrId, Trace};

/// Everything derived for the ranks in scope.
#[derive(Debug, Clone)]
pub struct Derived {
    /// Per rank in scope, in the scope's order.
    pub stats: Vec<RankStats>,
    /// Per rank in scope: where its steps went.
    pub rows: Vec<RankRow>,
    /// The collectives matched across every rank of the trace.
    pub instances: Instances,
    /// Wait/transfer split per rank of the trace (indexed like `trace.ranks`).
    pub waits: Vec<WaitSplit>,
    /// Each matched collective as a row (same order as `instances`).
    pub collectives: instances::Rows,
    /// The process groups collectives were issued in, by name, with their roles.
    pub groups: Vec<groups::GroupInfo>,
    /// When the last member of each matched collective started.
    pub last_starts: collectives::LastStarts,
}

/// What loading already derived of a trace, so that the metrics' context
/// does not derive it again.
#[derive(Debug, Default)]
pub struct Made {
    /// Every rank's stats, indexed like `trace.ranks`, made while it was read
    /// (a lean load keeps them; a slim timeline cannot make them again).
    pub stats: Option<Vec<RankStats>>,
    /// What the clock check found before it aligned the clocks.
    pub matched: Option<Matched>,
}

/// The collectives matched across every rank of a trace and the process
/// groups they were issued in. Neither reads a time, so putting the ranks
/// on one clock leaves them as they were: a load finds them once, both at
/// once, for its clock check and then for the metrics.
#[derive(Debug, Clone, Default)]
pub struct Matched {
    pub instances: Instances,
    pub groups: Vec<groups::GroupInfo>,
}

impl Matched {
    pub fn of(trace: &Trace) -> Self {
        // Each rank's sequences side by side: made one rank after another,
        // they were the longest part of an open that uses one core.
        let matched = || {
            let spill = trace.spilled_to();
            let per_rank = (0..trace.ranks.len())
                .into_par_iter()
                .map(|ri| collectives::sequences_of(trace, ri, spill))
                .collect();
            collectives::instances_of(trace, per_rank)
        };
        let (instances, groups) = rayon::join(matched, || groups::infer(trace));
        Self { instances, groups }
    }
}

impl Derived {
    /// Derives the data of `ranks` (a subset of `trace.ranks`); the
    /// cross-rank parts always use every rank of the trace.
    #[cfg(test)]
    pub(crate) fn of(trace: &Trace, ranks: &[&RankTimeline]) -> Self {
        Self::with_made(trace, ranks, Made::default())
    }

    /// [`Derived::of`] from what loading made (its stats in the order of
    /// `ranks`), as it must be for timelines kept slim.
    pub(crate) fn with_made(trace: &Trace, ranks: &[&RankTimeline], made: Made) -> Self {
        let Made { stats, matched } = made;
        let (stats, Matched { instances, groups }) = rayon::join(
            || {
                stats.unwrap_or_else(|| {
                    assert!(
                        ranks.iter().all(|t| !t.comm_only),
                        "a slim timeline's stats are made before it is slimmed"
                    );
                    ranks.par_iter().map(|t| RankStats::of(t)).collect()
                })
            },
            || matched.unwrap_or_else(|| Matched::of(trace)),
        );
        // Two walks over every member of every collective, one per core;
        // the last starts are read off the rows.
        let (waits, (collectives, last_starts)) = rayon::join(
            || collectives::wait_split(trace, &instances),
            || {
                let rows = instances::rows(trace, &instances, &groups);
                let last_starts = rows.last_starts(&instances);
                (rows, last_starts)
            },
        );
        let rows = rank_rows(trace, ranks, &stats, &waits, &last_starts);
        Self {
            stats,
            rows,
            instances,
            waits,
            collectives,
            groups,
            last_starts,
        }
    }
}

/// Derived data of one rank: every figure the metrics need of its device
/// ops, so that once it is made the rank can keep only its communication ops
/// (see [`RankStats::slim`]). Unions of ops are reduced here to their lengths
/// (over the whole trace and within the measured steps' device windows),
/// except the small sets cross-rank figures still need.
#[derive(Debug, Clone)]
pub struct RankStats {
    pub rank: u32,
    /// Device ops (kernels, memory copies and sets), and of them kernels.
    pub ops: usize,
    pub kernels: usize,
    /// Summed duration of all kernels.
    pub kernel_sum: Ns,
    /// Summed duration of every device op (kernels, memory copies and sets).
    pub op_sum: Ns,
    /// Summed kernel duration per class, indexed like `KernelClass::ALL`.
    pub kernel_class_sum: [Ns; KernelClass::ALL.len()],
    /// Summed duration of every op (any activity) per class.
    pub op_class_sum: [Ns; KernelClass::ALL.len()],
    /// Summed duration per class of the ops that count for per-step figures
    /// (launched in a measured step; all of them without steps).
    pub counted_class_sum: [Ns; KernelClass::ALL.len()],
    /// Summed duration per name of the ops no class rule recognises.
    pub unclassified: HashMap<StrId, Ns>,
    /// Bytes and time of the memory copies with a byte count and a duration.
    pub copied: (u64, Ns),
    /// First op start to last op end.
    pub device_window: Option<Interval>,
    /// First kernel start to last kernel end (CCL-Bench's trace span);
    /// `None` without kernels, or from a summary made before it was stored.
    pub kernel_window: Option<Interval>,
    /// CCL-Bench group 1's iteration marks: the rank's `RedistributeBackward`
    /// CPU ops (`traffic_window` counts iterations by them).
    pub iteration_marks: Vec<Interval>,
    /// The measured steps' device-side extents (see [`gpu_step_windows`]).
    pub window: IntervalSet,
    /// Lengths of unions of ops over the whole trace.
    pub whole: Unions,
    /// The same, within `window`.
    pub in_window: Unions,
    /// CCL-Bench's `compute_comm_overlap` terms: communication kernels under
    /// compute kernels, and communication kernels, within the measured
    /// steps' CPU ranges (`ProfilerStep`, each op clipped to them); over
    /// the whole trace without steps.
    pub step_overlap: (Ns, Ns),
    /// Communication not under compute (comm − compute): the wait parts of
    /// matched collectives are cut from it once every rank is known.
    pub exposed: IntervalSet,
    /// What the SM-coverage metrics need of the kernels with a known coverage.
    pub sm: sm::SmCoverage,
    /// Device time of each training phase, indexed like `Phase::ALL`.
    pub phases: [Option<Ns>; phases::Phase::ALL.len()],
    /// Device time per (name, activity) and per class: the kernel table's.
    pub kernel_table: kernels::RankKernels,
    /// Per step (indexed like the rank's steps), the hull of the device ops
    /// launched in it (see [`gpu_step_hulls`]): the Timeline's step marks
    /// without the ops. `None` when a summary made before they were stored.
    pub step_hulls: Option<Vec<Option<Interval>>>,
}

/// A rank's unions of ops: their covered lengths, or (while stats are made)
/// the sets themselves.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Unions<T = Ns> {
    /// Any device activity.
    pub busy: T,
    /// Communication ops.
    pub comm: T,
    /// Compute kernels (neither communication nor memory).
    pub compute: T,
    /// Compute kernels or memory copies and sets (peer-to-peer copies count
    /// as communication).
    pub compute_or_memory: T,
    /// Communication under compute: comm ∩ compute.
    pub comm_under_compute: T,
    /// Communication not under compute: comm − compute.
    pub exposed_comm: T,
    /// Memory copies and sets not under compute: memory − compute.
    pub exposed_memory: T,
}

impl<T: Copy> Unions<T> {
    /// The figures in the order the fields are declared.
    pub fn to_array(&self) -> [T; 7] {
        [
            self.busy,
            self.comm,
            self.compute,
            self.compute_or_memory,
            self.comm_under_compute,
            self.exposed_comm,
            self.exposed_memory,
        ]
    }

    /// [`Unions::to_array`] read back.
    pub fn from_array(a: [T; 7]) -> Self {
        let [busy, comm, compute, compute_or_memory, comm_under_compute, exposed_comm, exposed_memory] =
            a;
        Self {
            busy,
            comm,
            compute,
            compute_or_memory,
            comm_under_compute,
            exposed_comm,
            exposed_memory,
        }
    }
}

/// A rank's unions of ops, measured over the whole trace and within
/// `window` (lengths, whole and within), in two walks through its ops in
/// time order that merge them as they come: a device's millions of ops
/// make unions of millions of intervals, which were built (twice over, to
/// sort them) only to be measured. The first walk measures the unions of
/// all ops, compute, and compute or memory, and builds those of memory,
/// communication and communication kernels (a few of a rank's ops); the
/// second meets each of those with compute as compute is merged. Also gives
/// comm − compute, the one set later figures keep, and the step overlap.
fn measured_unions(t: &RankTimeline, window: &IntervalSet) -> Measured {
    let steps = step_window(t);
    let (mut busy, mut compute, mut compute_or_memory) = (
        Measuring::new(window),
        Measuring::new(window),
        Measuring::new(window),
    );
    let (mut memory, mut comm, mut comm_kernels) = (Vec::new(), Vec::new(), Vec::new());
    t.each_op_by_start(|o| {
        let i = o.interval();
        busy.push(i);
        if o.is_compute() {
            compute.push(i);
        }
        if o.is_compute() || o.is_memory() {
            compute_or_memory.push(i);
        }
        if o.is_memory() {
            memory.push(i);
        }
        if o.is_comm() {
            comm.push(i);
            if o.is_kernel() {
                comm_kernels.push(i);
            }
        }
    });
    let [memory, comm, comm_kernels] = [memory, comm, comm_kernels].map(IntervalSet::from_unsorted);
    // Each of those under compute.
    let (mut memory_under, mut comm_under, mut kernels_under) = (
        Lengths::within(window),
        Lengths::within(window),
        Lengths::within(&steps),
    );
    let mut comm_under_set = Vec::new();
    let (mut meet_memory, mut meet_comm, mut meet_kernels) = (
        Meeting::new(&memory),
        Meeting::new(&comm),
        Meeting::new(&comm_kernels),
    );
    let mut under_compute = |c: Interval| {
        meet_memory.meet(c, |i| memory_under.add(i));
        meet_comm.meet(c, |i| {
            comm_under.add(i);
            comm_under_set.push(i);
        });
        meet_kernels.meet(c, |i| kernels_under.add(i));
    };
    let mut merging = Merging::default();
    t.each_op_by_start(|o| {
        if o.is_compute() {
            merging.push(o.interval(), &mut under_compute);
        }
    });
    merging.finish(&mut under_compute);
    let minus = |(a, b): (Ns, Ns), (c, d): (Ns, Ns)| (a - c, b - d);
    let mut m = Measured::default();
    let mut measure = |(all, within): (Ns, Ns), field: fn(&mut Unions) -> &mut Ns| {
        *field(&mut m.whole) = all;
        *field(&mut m.in_window) = within;
    };
    measure(busy.lengths(), |u| &mut u.busy);
    measure(compute.lengths(), |u| &mut u.compute);
    measure(compute_or_memory.lengths(), |u| &mut u.compute_or_memory);
    // What is not under compute is the rest of the set.
    measure(minus(memory.lengths(window), memory_under.both()), |u| {
        &mut u.exposed_memory
    });
    measure(comm.lengths(window), |u| &mut u.comm);
    measure(comm_under.both(), |u| &mut u.comm_under_compute);
    let exposed = difference(comm.walk(), comm_under_set.into_iter());
    measure(exposed.lengths(window), |u| &mut u.exposed_comm);
    m.exposed = exposed;
    m.step_overlap = if t.steps.is_empty() {
        (kernels_under.both().0, comm_kernels.total())
    } else {
        (kernels_under.both().1, comm_kernels.lengths(&steps).1)
    };
    m
}

/// What [`measured_unions`] gives.
#[derive(Default)]
struct Measured {
    whole: Unions,
    in_window: Unions,
    /// Communication not under compute.
    exposed: IntervalSet,
    /// (communication kernels under compute kernels, communication
    /// kernels) within the measured steps' CPU ranges ([`step_window`]);
    /// the whole trace without steps. Kernels only: copies are neither.
    step_overlap: (Ns, Ns),
}

/// A union measured as its intervals come, merged (see [`Merging`]).
struct Measuring<'w> {
    merging: Merging,
    lengths: Lengths<'w>,
}

impl<'w> Measuring<'w> {
    fn new(window: &'w IntervalSet) -> Self {
        Self {
            merging: Merging::default(),
            lengths: Lengths::within(window),
        }
    }

    fn push(&mut self, i: Interval) {
        let lengths = &mut self.lengths;
        self.merging.push(i, |m| lengths.add(m));
    }

    fn lengths(mut self) -> (Ns, Ns) {
        let lengths = &mut self.lengths;
        self.merging.finish(|m| lengths.add(m));
        self.lengths.both()
    }
}

/// The window of the step overlap: the measured steps' CPU ranges, as
/// CCL-Bench's `compute_comm_overlap` clips kernels to each step; none
/// (the whole trace) without steps.
fn step_window(t: &RankTimeline) -> IntervalSet {
    IntervalSet::from_iter_unsorted(
        t.measured_steps()
            .iter()
            .map(|s| Interval::new(s.start, s.end)),
    )
}

/// The CPU ops CCL-Bench's `traffic_window` counts iterations by.
fn iteration_marks(t: &RankTimeline) -> Vec<Interval> {
    let Some(id) = t.strings.id("RedistributeBackward") else {
        return Vec::new();
    };
    t.cpu
        .iter()
        .flat_map(|th| &th.ops)
        .filter(|o| o.kind == crate::model::CpuKind::Op && o.name == id)
        .map(|o| Interval::new(o.start, o.end()))
        .collect()
}

impl RankStats {
    pub fn of(t: &RankTimeline) -> Self {
        let mut kernel_class_sum = [Ns::ZERO; KernelClass::ALL.len()];
        let (mut op_class_sum, mut counted_class_sum) = (kernel_class_sum, kernel_class_sum);
        let mut unclassified = HashMap::new();
        let (mut kernel_sum, mut op_sum, mut kernels) = (Ns::ZERO, Ns::ZERO, 0);
        let mut copied = (0u64, Ns::ZERO);
        let mut kernel_window: Option<Interval> = None;
        for op in &t.ops {
            let c = class_index(op.class);
            op_sum += op.dur;
            op_class_sum[c] += op.dur;
            if t.counts(op.step) {
                counted_class_sum[c] += op.dur;
            }
            if op.class == KernelClass::Other {
                *unclassified.entry(op.name).or_insert(Ns::ZERO) += op.dur;
            }
            if op.is_kernel() {
                kernels += 1;
                kernel_sum += op.dur;
                kernel_class_sum[c] += op.dur;
                let (a, b) = kernel_window.map_or((op.start, op.end()), |w| {
                    (w.start.min(op.start), w.end.max(op.end()))
                });
                kernel_window = Some(Interval::new(a, b));
            }
            if let (Activity::Memcpy, Some(b), true) = (op.activity, op.bytes(), op.dur > Ns::ZERO)
            {
                copied.0 += b;
                copied.1 += op.dur;
            }
        }
        let window = gpu_step_windows(t);
        let Measured {
            whole,
            in_window,
            exposed,
            step_overlap,
        } = measured_unions(t, &window);
        Self {
            rank: t.rank,
            ops: t.ops.len(),
            kernels,
            kernel_sum,
            op_sum,
            kernel_class_sum,
            op_class_sum,
            counted_class_sum,
            unclassified,
            copied,
            device_window: t.device_window(),
            kernel_window,
            iteration_marks: iteration_marks(t),
            whole,
            in_window,
            step_overlap,
            window,
            exposed,
            sm: sm::SmCoverage::of(t),
            phases: phases::phase_times(t),
            kernel_table: kernels::RankKernels::of(t),
            step_hulls: Some(gpu_step_hulls(t)),
        }
    }

    /// Moves the rank's absolute times by `d`, as clock alignment moves its
    /// timeline (every length is unchanged).
    pub fn shift(&mut self, d: Ns) {
        let by = |w: Interval| Interval::new(w.start + d, w.end + d);
        self.device_window = self.device_window.map(by);
        self.kernel_window = self.kernel_window.map(by);
        for m in &mut self.iteration_marks {
            *m = by(*m);
        }
        self.window.shift(d);
        self.exposed.shift(d);
        for h in self.step_hulls.iter_mut().flatten().flatten() {
            *h = Interval::new(h.start + d, h.end + d);
        }
    }

    pub(crate) fn kernel_class(&self, c: KernelClass) -> Ns {
        self.kernel_class_sum[class_index(c)]
    }

    pub(crate) fn op_class(&self, c: KernelClass) -> Ns {
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
    /// Time inside matched collectives spent waiting for later members
    /// (overlapped with compute or not), per step.
    pub wait: Ns,
    /// Wait this rank made the others spend at collectives matched across
    /// ranks (see `WaitSplit::caused`), per step.
    pub caused: Ns,
    /// Matched collectives it started last, and all its matched ones, in the
    /// measured steps.
    pub last: usize,
    pub matched: usize,
    /// How far the device runs behind the CPU at the end of a step: the end
    /// of the last op launched in the step − the end of the step's CPU
    /// range, averaged over the measured steps that launched any (positive:
    /// the CPU runs ahead); `None` without steps.
    pub ahead: Option<Ns>,
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
/// steps; `waits` is indexed like `trace.ranks`; a rank's waits inside
/// collectives are made from `last_starts` as its row is.
fn rank_rows(
    trace: &Trace,
    ranks: &[&RankTimeline],
    stats: &[RankStats],
    waits: &[WaitSplit],
    last_starts: &collectives::LastStarts,
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
                last_starts.waits_of(t).into_iter().map(|(_, iv)| iv),
            );
            let n = t.step_count() as i64;
            let u = s.in_window;
            let waiting = s.exposed.intersect(&wait_set).overlap_len(&s.window) / n;
            let (span, busy) = (s.window.total() / n, u.busy / n);
            RankRow {
                rank: t.rank,
                steps: t.measured().len(),
                step_time: (!t.steps.is_empty())
                    .then(|| t.measured_steps().iter().map(|st| st.dur()).sum::<Ns>() / n),
                span,
                busy,
                compute: u.compute / n,
                comm: u.comm / n,
                exposed_comm: u.exposed_comm / n,
                idle: span - busy,
                waiting,
                wait: w.wait / n,
                caused: w.caused / n,
                last: w.last,
                matched: w.ops,
                ahead: s.step_hulls.as_deref().and_then(|h| ahead(t, h)),
            }
        })
        .collect()
}

/// See [`RankRow::ahead`]; `hulls` indexed like `t.steps`.
fn ahead(t: &RankTimeline, hulls: &[Option<Interval>]) -> Option<Ns> {
    let leads: Vec<Ns> = t
        .measured()
        .filter_map(|i| Some(hulls.get(i).copied().flatten()?.end - t.steps.get(i)?.end))
        .collect();
    (!leads.is_empty()).then(|| leads.iter().copied().sum::<Ns>() / leads.len() as i64)
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::trace;
    use crate::synth::RankTrace;

    /// Steps of 100 µs; the middle one is the only one measured. Step 1:
    /// gemm [10, 30). Step 2: gemm [110, 150), an all-reduce [140, 170), a
    /// 1,000-byte copy [160, 180), an unrecognised kernel [185, 190). Step 3:
    /// gemm [210, 220).
    fn rank() -> RankTimeline {
        let mut r = RankTrace::new(Some(0), 1, 10);
        for (n, at) in [(1, 0.0), (2, 100.0), (3, 200.0)] {
            r.step(n, at, 100.0);
        }
        r.kernel("sm90_gemm_bf16", 10.0, 20.0, 7, 1);
        r.kernel("sm90_gemm_bf16", 110.0, 40.0, 7, 1);
        r.kernel(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            140.0,
            30.0,
            20,
            1,
        );
        r.memcpy("Memcpy DtoD (Device -> Device)", 160.0, 20.0, 9, 1000);
        r.kernel("mystery", 185.0, 5.0, 7, 1);
        r.kernel("sm90_gemm_bf16", 210.0, 10.0, 7, 1);
        trace(&[r]).ranks.remove(0)
    }

    const US: i64 = 1000;

    /// Lengths in µs, in the order `Unions` declares them.
    fn unions(us: [i64; 7]) -> Unions {
        Unions::from_array(us.map(|v| Ns(v * US)))
    }

    #[test]
    fn rank_stats_by_hand() {
        let t = rank();
        let s = RankStats::of(&t);
        assert_eq!((s.ops, s.kernels), (6, 5));
        // Whole trace: busy [10, 30) + [110, 180) + [185, 190) + [210, 220);
        // compute is the gemms and the unrecognised kernel, the copy memory.
        assert_eq!(s.whole, unions([105, 30, 75, 95, 10, 20, 20]));
        // Within step 2's device window [110, 190).
        assert_eq!(
            s.window.intervals(),
            &[Interval::new(Ns(110 * US), Ns(190 * US))]
        );
        assert_eq!(s.in_window, unions([75, 30, 45, 65, 10, 20, 20]));
        let class = |c| s.counted_class_sum[class_index(c)];
        assert_eq!(class(KernelClass::Gemm), Ns(40 * US));
        assert_eq!(class(KernelClass::Communication), Ns(30 * US));
        assert_eq!(class(KernelClass::Memory), Ns(20 * US));
        assert_eq!(class(KernelClass::Other), Ns(5 * US));
        let unclassified: Vec<(&str, Ns)> = s
            .unclassified
            .iter()
            .map(|(n, d)| (t.name(*n), *d))
            .collect();
        assert_eq!(unclassified, [("mystery", Ns(5 * US))]);
        assert_eq!(s.copied, (1000, Ns(20 * US)));
        assert_eq!(
            s.device_window,
            Some(Interval::new(Ns(10 * US), Ns(220 * US)))
        );
        assert_eq!(
            s.exposed.intervals(),
            &[Interval::new(Ns(150 * US), Ns(170 * US))]
        );
    }

    #[test]
    fn a_slim_rank_keeps_its_collectives_and_its_stats_move_with_its_clock() {
        let mut t = rank();
        let mut s = RankStats::of(&t);
        t.slim();
        assert!(t.comm_only && t.cpu.is_empty());
        assert_eq!(t.ops.len(), 1);
        assert!(t.ops[0].is_comm());
        assert_eq!(t.steps.len(), 3);
        let whole = s.whole;
        s.shift(Ns(US));
        assert_eq!(s.whole, whole);
        assert_eq!(
            s.window.intervals(),
            &[Interval::new(Ns(111 * US), Ns(191 * US))]
        );
        assert_eq!(
            s.exposed.intervals(),
            &[Interval::new(Ns(151 * US), Ns(171 * US))]
        );
        assert_eq!(
            s.device_window,
            Some(Interval::new(Ns(11 * US), Ns(221 * US)))
        );
    }

    /// [`measured_unions`] as the sets it no longer builds define it.
    fn unions_built(t: &RankTimeline, window: &IntervalSet) -> Measured {
        let busy = t.busy(|_| true);
        let compute = t.busy(|o| o.is_compute());
        let memory = t.busy(|o| o.is_memory());
        let comm = t.busy(|o| o.is_comm());
        let kernels = t.busy(|o| o.is_kernel() && o.is_comm());
        let exposed = comm.subtract(&compute);
        let sets = [
            &busy,
            &comm,
            &compute,
            &compute.union(&memory),
            &comm.intersect(&compute),
            &exposed,
            &memory.subtract(&compute),
        ];
        let steps = step_window(t);
        let under = kernels.intersect(&compute);
        Measured {
            whole: Unions::from_array(sets.map(IntervalSet::total)),
            in_window: Unions::from_array(sets.map(|s| s.overlap_len(window))),
            step_overlap: if t.steps.is_empty() {
                (under.total(), kernels.total())
            } else {
                (under.overlap_len(&steps), kernels.overlap_len(&steps))
            },
            exposed,
        }
    }

    proptest::proptest! {
        /// Ops of every kind overlapping at random, in time order and not,
        /// with or without steps: the walks give what the sets built give.
        #[test]
        fn unions_walked_are_those_of_the_sets_built(
            ops in proptest::collection::vec((0u8..5, 0u32..300, 0u32..40), 0..40),
            steps in proptest::collection::vec(0u32..100, 0..5),
            window in proptest::collection::vec((0i64..300, 0i64..80), 0..4),
            shuffle in proptest::prelude::any::<u64>(),
        ) {
            let mut r = RankTrace::new(Some(0), 1, 10);
            for (n, &d) in steps.iter().enumerate() {
                r.step(n as u32 + 1, 100.0 * n as f64, f64::from(d) + 1.0);
            }
            for &(kind, at, dur) in &ops {
                let (at, dur) = (f64::from(at), f64::from(dur));
                match kind {
                    0 => r.kernel("sm90_gemm_bf16", at, dur, 7, 1),
                    1 => r.kernel("ncclDevKernel_AllReduce_Sum_f32_RING_LL", at, dur, 20, 1),
                    2 => r.memcpy("Memcpy DtoD (Device -> Device)", at, dur, 9, 1000),
                    3 => r.kernel("mystery", at, dur, 8, 1),
                    _ => r.kernel("ncclDevKernel_SendRecv", at, dur, 21, 1),
                };
            }
            let mut t = trace(&[r]).ranks.remove(0);
            let window = IntervalSet::from_iter_unsorted(
                window.iter().map(|&(s, l)| Interval::new(Ns(s * US), Ns((s + l) * US))),
            );
            let built = unions_built(&t, &window);
            let check = |t: &RankTimeline| {
                let walked = measured_unions(t, &window);
                proptest::prop_assert_eq!(walked.whole, built.whole);
                proptest::prop_assert_eq!(walked.in_window, built.in_window);
                proptest::prop_assert_eq!(&walked.exposed, &built.exposed);
                proptest::prop_assert_eq!(walked.step_overlap, built.step_overlap);
                Ok(())
            };
            check(&t)?;
            // Out of time order: walked through a sorted list of places.
            let n = t.ops.len();
            if n > 1 {
                t.ops.rotate_left((shuffle % n as u64) as usize);
                t.ops.swap(0, n - 1);
                check(&t)?;
            }
        }
    }

    #[test]
    #[should_panic(expected = "made before it is slimmed")]
    fn stats_are_never_made_of_a_slim_rank() {
        let mut trace = trace(&[RankTrace::new(Some(0), 1, 10)]);
        trace.ranks[0].slim();
        let ranks: Vec<&RankTimeline> = trace.ranks.iter().collect();
        Derived::of(&trace, &ranks);
    }
}
