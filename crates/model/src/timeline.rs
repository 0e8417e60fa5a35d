//! One rank's timeline: device activity (kernels, memory copies and sets), the
//! training steps and user annotations, all in integer nanoseconds.

use std::path::PathBuf;

pub use super::classify::Activity;
use super::classify::CollKind;
use super::intervals::{Interval, IntervalSet};
use super::strings::{Interner, StrId};
use super::time::Ns;

/// Collective metadata recorded by PyTorch (`record_param_comms` args).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct CollMeta {
    pub kind: CollKind,
    /// The `Collective name` argument as written, e.g. `_allgather_base`.
    pub name: StrId,
    pub in_nelems: Option<u64>,
    pub out_nelems: Option<u64>,
    pub dtype_size: Option<u64>,
    pub group_size: Option<u32>,
    pub pg_name: Option<StrId>,
    pub pg_ranks: Option<StrId>,
    /// The group's collective or point-to-point sequence number (`Seq`,
    /// PyTorch 2.5+): equal on every member of one collective.
    pub seq: Option<u64>,
    /// For a `send`, the global rank it sends to (`Dst Rank`); for a `recv`,
    /// the one it receives from (`Src Rank`).
    pub peer: Option<u32>,
}

/// A process group as the profiler records it (`distributedInfo.pg_config`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessGroup {
    /// `pg_name`: what collectives name their group by (`Process Group Name`).
    pub name: String,
    /// `pg_desc`, e.g. `default_pg`, `mesh_tp`, `TENSOR_MODEL_PARALLEL_GROUP`.
    pub desc: Option<String>,
    /// Global ranks of the members, sorted.
    pub ranks: Vec<u32>,
}

/// The largest message size taken as real: 1 TiB, more than any GPU's
/// memory. A bigger one (`"In msg nelems": 1e20`) is a damaged field.
pub const MAX_MESSAGE_BYTES: u64 = 1 << 40;

impl CollMeta {
    /// Message size in bytes: input elements × element size, when plausible.
    pub fn in_bytes(&self) -> Option<u64> {
        bytes_of(self.in_nelems?, self.dtype_size?)
    }

    /// Output size in bytes (the gathered buffer of an all-gather), when plausible.
    pub fn out_bytes(&self) -> Option<u64> {
        bytes_of(self.out_nelems?, self.dtype_size?)
    }

    /// Whether a recorded size is beyond [`MAX_MESSAGE_BYTES`] (so ignored).
    pub fn implausible_size(&self) -> bool {
        let Some(size) = self.dtype_size else {
            return false;
        };
        [self.in_nelems, self.out_nelems]
            .into_iter()
            .flatten()
            .any(|n| bytes_of(n, size).is_none())
    }
}

fn bytes_of(nelems: u64, dtype_size: u64) -> Option<u64> {
    nelems
        .checked_mul(dtype_size)
        .filter(|&b| b <= MAX_MESSAGE_BYTES)
}

pub use super::op::{DeviceOp, PackedWork, Slot, Work};

/// Why a step-based figure is missing, for every place that needs steps.
pub const NO_STEPS: &str =
    "the trace has no steps (ProfilerStep annotations, or vLLM/SGLang inference engine steps)";

/// A `ProfilerStep#N` range (CPU side), or an inference engine step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Step {
    pub number: i64,
    pub start: Ns,
    pub end: Ns,
}

impl Step {
    pub fn dur(&self) -> Ns {
        self.end - self.start
    }
}

/// A user annotation (`record_function` range) such as `forward` or `optimizer`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Annotation {
    pub name: StrId,
    pub start: Ns,
    pub end: Ns,
    /// True for `gpu_user_annotation` ranges (device time), false for CPU ranges.
    pub on_gpu: bool,
}

/// What a CPU-side range is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CpuKind {
    /// An operator (`cpu_op`: `aten::addmm`, `record_param_comms`).
    Op,
    /// A `record_function` range (`user_annotation`), `ProfilerStep#N` included.
    Annotation,
    /// A CUDA/HIP runtime or driver call: a launch, a copy, a synchronize.
    Runtime,
}

/// One CPU-side range on a thread that launched device work. 32 bytes: a
/// trace holds about as many as it has kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CpuOp {
    pub start: Ns,
    pub dur: Ns,
    pub name: StrId,
    pub kind: CpuKind,
    /// Nesting depth on its thread: 0 for outermost ranges (saturating).
    pub depth: u8,
    /// Index of the range holding it on its thread ([`NO_PARENT`] for none),
    /// set by [`CpuThread::new`].
    pub parent: u32,
}

/// `CpuOp::parent` of an outermost range.
pub const NO_PARENT: u32 = u32::MAX;

impl CpuOp {
    pub fn end(&self) -> Ns {
        self.start + self.dur
    }
}

/// The CPU ranges of one thread that launched device work, sorted by start
/// (an enclosing range before the ranges it holds).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CpuThread {
    pub tid: u64,
    /// Kernel-launch calls made on it.
    pub launches: u64,
    pub ops: Vec<CpuOp>,
}

impl CpuThread {
    /// A thread's ranges in any order: sorted, enclosing ranges first, with
    /// their nesting depths and parents set.
    pub fn new(tid: u64, launches: u64, mut ops: Vec<CpuOp>) -> Self {
        ops.sort_by_key(|o| (o.start, std::cmp::Reverse(o.dur)));
        // Indices of the ranges still open, outermost first.
        let mut open: Vec<usize> = Vec::new();
        for i in 0..ops.len() {
            while open.last().is_some_and(|&j| ops[j].end() <= ops[i].start) {
                open.pop();
            }
            ops[i].depth = u8::try_from(open.len()).unwrap_or(u8::MAX);
            ops[i].parent = open
                .last()
                .and_then(|&j| u32::try_from(j).ok())
                .unwrap_or(NO_PARENT);
            open.push(i);
        }
        ops.shrink_to_fit();
        Self { tid, launches, ops }
    }

    /// The ranges holding `t`, outermost first (the call stack at `t`): the
    /// last range starting by `t` lies inside the innermost of them, so its
    /// chain of parents holds them all (O(depth), whatever the thread's size).
    pub fn stack_at(&self, t: Ns) -> Vec<&CpuOp> {
        let mut stack = Vec::new();
        let mut i = self.ops.partition_point(|o| o.start <= t).checked_sub(1);
        while let Some(k) = i {
            let op = &self.ops[k];
            if op.end() > t {
                stack.push(op);
            }
            i = (op.parent != NO_PARENT).then_some(op.parent as usize);
        }
        stack.reverse();
        stack
    }

    /// Its ranges of depth `depth` overlapping `[from, to)`, or `None` when
    /// more than `max` ranges start in it (too many to name).
    pub fn at_depth(&self, depth: u8, from: Ns, to: Ns, max: usize) -> Option<Vec<&CpuOp>> {
        let end = self.ops.partition_point(|o| o.start < to);
        let begin = self.ops[..end].partition_point(|o| o.start < from);
        if end - begin > max {
            return None;
        }
        // A range starting before `from` may still reach into it: its
        // enclosing stack at `from` holds it.
        let mut out: Vec<&CpuOp> = self
            .stack_at(from)
            .into_iter()
            .filter(|o| o.depth == depth && o.start < from)
            .collect();
        out.extend(self.ops[begin..end].iter().filter(|o| o.depth == depth));
        Some(out)
    }
}

/// A GPU described by the trace's `deviceProperties`.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceInfo {
    pub id: u32,
    pub name: String,
    pub num_sms: Option<u32>,
}

/// Which profiler wrote a rank's timeline: it decides what the trace can
/// hold, so a missing figure's reason can fit it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum SourceFormat {
    /// PyTorch profiler (Kineto) JSON, MTIA included.
    #[default]
    PyTorch,
    /// Nsight Systems SQLite or JSON export.
    Nsys,
    /// XLA profiler (JAX, TensorFlow) XSpace or trace JSON.
    Xla,
}

impl SourceFormat {
    pub fn name(self) -> &'static str {
        match self {
            Self::PyTorch => "pytorch",
            Self::Nsys => "nsys",
            Self::Xla => "xla",
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct RankTimeline {
    pub rank: u32,
    pub world_size: Option<u32>,
    /// The process groups the rank's profiler described, by name.
    pub groups: Vec<ProcessGroup>,
    pub source: PathBuf,
    pub strings: Interner,
    /// Device ops sorted by start time.
    pub ops: super::slab::Ops,
    /// Whether `ops` holds only the collectives (see [`RankTimeline::slim`]).
    pub comm_only: bool,
    pub colls: Vec<CollMeta>,
    /// Steps sorted by start time.
    pub steps: Vec<Step>,
    /// Shared (not copied) by the ranks of every device one process drives.
    pub annotations: std::sync::Arc<Vec<Annotation>>,
    /// CPU ranges of the threads that launched device work, the busiest
    /// launcher first (Kineto traces).
    pub cpu: Vec<CpuThread>,
    pub devices: Vec<DeviceInfo>,
    /// First start and last end over every timed event of the rank (CPU and GPU).
    pub window: Option<Interval>,
    /// Sum of `flops` args of CPU ops (profiled `with_flops=True`); `None` when
    /// no op carries one.
    pub flops: Option<f64>,
    /// CUDA/HIP runtime and driver kernel-launch calls: how many, and their
    /// summed CPU duration.
    pub launch_calls: u64,
    pub launch_time: Ns,
    /// Kernel-launch calls and their CPU time per step (same index as
    /// `steps`), by the step during which each call started.
    pub launch_by_step: Vec<(u64, Ns)>,
    /// Per-step averages use every step (`--all-steps`), not only the
    /// measured ones (see [`RankTimeline::measured`]).
    pub all_steps: bool,
    /// The steps are inference engine steps (vLLM/SGLang ranges), the trace
    /// having no `ProfilerStep`.
    pub engine_steps: bool,
    pub format: SourceFormat,
    /// The Unix time (ns) of this timeline's zero, when the file states it
    /// (Kineto's `baseTimeNanoseconds`, or epoch timestamps): what puts a
    /// CUDA memory snapshot's allocator clock on the timeline's. Moves with
    /// the clock alignment, so `time + epoch` stays the Unix time.
    pub epoch: Option<Ns>,
}

impl RankTimeline {
    pub fn name(&self, id: StrId) -> &str {
        self.strings.get(id)
    }

    pub fn kernels(&self) -> impl Iterator<Item = &DeviceOp> {
        self.ops.iter().filter(|o| o.is_kernel())
    }

    pub fn coll_meta(&self, op: &DeviceOp) -> Option<&CollMeta> {
        op.meta.get().map(|i| &self.colls[i as usize])
    }

    /// SMs of the GPU a kernel ran on. The properties are matched by device
    /// id; when none has that id but every described GPU has the same SM
    /// count, that count: a process that sees one GPU (`CUDA_VISIBLE_DEVICES`)
    /// often describes it as device 0 while its kernels carry the physical id
    /// (SGLang on device 9), and a node's GPUs are one model.
    pub fn num_sms(&self, device: u32) -> Option<u32> {
        if let Some(d) = self.devices.iter().find(|d| d.id == device) {
            return d.num_sms;
        }
        let first = self.devices.first()?.num_sms?;
        self.devices
            .iter()
            .all(|d| d.num_sms == Some(first))
            .then_some(first)
    }

    /// Union of the intervals of the ops that `keep` selects.
    pub fn busy(&self, keep: impl Fn(&DeviceOp) -> bool) -> IntervalSet {
        IntervalSet::from_iter_unsorted(self.ops.iter().filter(|o| keep(o)).map(DeviceOp::interval))
    }

    /// Gives `f` each op in order of its start: as they are held, since
    /// every reader leaves them so, or through a sorted list of their places
    /// where they are not. What a walk that merges ops as they come needs.
    pub fn each_op_by_start(&self, mut f: impl FnMut(&DeviceOp)) {
        if self.ops.is_sorted_by_key(|o| o.start) {
            self.ops.iter().for_each(f);
            return;
        }
        let mut order: Vec<u32> = (0..self.ops.len() as u32).collect();
        order.sort_by_key(|&i| self.ops[i as usize].start);
        order.iter().for_each(|&i| f(&self.ops[i as usize]));
    }

    /// The steps that per-step averages use (indexes into `steps`): with three
    /// or more steps the first (warm-up) and the last (it runs until the
    /// profiler stops, often 2-3x longer) are left out, as CCL-Bench does;
    /// every step with `all_steps` or fewer than three.
    pub fn measured(&self) -> std::ops::Range<usize> {
        let n = self.steps.len();
        if n >= 3 && !self.all_steps {
            1..n - 1
        } else {
            0..n
        }
    }

    pub fn measured_steps(&self) -> &[Step] {
        &self.steps[self.measured()]
    }

    /// What per-step averages divide by: the measured steps, 1 without steps
    /// (a trace without steps is one step).
    pub fn step_count(&self) -> usize {
        self.measured().len().max(1)
    }

    /// Whether an op launched in step `step` (an index into `steps`) counts
    /// for per-step metrics: without steps every op does; with steps, those
    /// launched during a measured step.
    pub fn counts(&self, step: impl Into<Slot>) -> bool {
        let step = step.into().get();
        if self.steps.is_empty() {
            return true;
        }
        step.is_some_and(|i| self.measured().contains(&(i as usize)))
    }

    /// Which steps per-step metrics use, for notes: "steps 2-4 of 1-5".
    pub fn steps_used(&self) -> String {
        let all = &self.steps;
        let used = self.measured_steps();
        let mut text = match (all.first(), all.last(), used.first(), used.last()) {
            (None, ..) => "no steps: the whole trace".to_owned(),
            (Some(a), Some(b), Some(x), Some(y)) if used.len() < all.len() => format!(
                "{} of {} (first and last left out; --all-steps keeps them)",
                numbers(x.number, y.number, used.len()),
                numbers(a.number, b.number, all.len()),
            ),
            (Some(a), Some(b), ..) => format!("all {}", numbers(a.number, b.number, all.len())),
            _ => String::new(),
        };
        if self.engine_steps {
            text.push_str(" (inference engine steps: no ProfilerStep in the trace)");
        } else if let Some(p) = self.step_program() {
            text.push_str(&format!(
                " (runs of the XLA program {p}: no step markers in the trace)"
            ));
        }
        text
    }

    /// The XLA program whose runs are the steps (see `program`), if they are
    /// one's.
    pub fn step_program(&self) -> Option<&str> {
        let first = self.steps.first()?;
        (self.format == SourceFormat::Xla).then_some(())?;
        self.annotations
            .iter()
            .find(|a| a.on_gpu && a.start == first.start && a.end <= first.end)
            .map(|a| self.strings.get(a.name))
    }

    /// Each step's (number, occurrence): occurrence 0 for the first
    /// `ProfilerStep#number` of the rank, 1 for a repeat of that number, ...
    /// A step is an instance, not a number; ranks' steps match on this key.
    pub fn step_keys(&self) -> Vec<(i64, u32)> {
        let mut seen: std::collections::HashMap<i64, u32> = Default::default();
        self.steps
            .iter()
            .map(|s| {
                let k = seen.entry(s.number).or_default();
                *k += 1;
                (s.number, *k - 1)
            })
            .collect()
    }

    /// First device op start to last device op end.
    /// Where `op` (an op of this rank read anywhere: a page of its ops
    /// table) sits in `ops`: the op with its start, stream, name and
    /// duration.
    pub fn find_op(&self, op: &DeviceOp) -> Option<usize> {
        let from = self.ops.partition_point(|o| o.start < op.start);
        self.ops[from..]
            .iter()
            .take_while(|o| o.start == op.start)
            .position(|o| o.stream == op.stream && o.name == op.name && o.dur == op.dur)
            .map(|k| from + k)
    }

    pub fn device_window(&self) -> Option<Interval> {
        let start = self.ops.first()?.start;
        let end = self.ops.iter().map(DeviceOp::end).max()?;
        Some(Interval::new(start, end))
    }

    /// Keeps only what figures across ranks read once the rank's own figures
    /// are made (`derive::RankStats`): its collectives (communication ops,
    /// the only ones naming a collective kind), steps, annotations and
    /// metadata (one record per distinct one). The other ops and the CPU
    /// ranges, nearly all of a rank's memory, go.
    pub fn slim(&mut self) {
        let ops = self.ops.vec_mut();
        ops.retain(DeviceOp::crosses_ranks);
        ops.shrink_to_fit();
        self.cpu = Vec::new();
        self.comm_only = true;
        self.share_coll_meta();
    }

    /// One metadata record per distinct one, the ops that named equal
    /// records naming the one kept: a run repeats a handful of collectives
    /// thousands of times, each with its own record.
    pub fn share_coll_meta(&mut self) {
        self.share_coll_meta_by(self.colls_distinct());
    }

    /// [`Self::share_coll_meta`], records found by their place when no two
    /// are alike (`by_place`), else by their value.
    fn share_coll_meta_by(&mut self, by_place: bool) {
        // Each record's first equal one, found once per record (a rank has
        // a few records and thousands of ops naming them); foldhash: SipHash
        // showed in profiles.
        let first: Vec<u32> = if by_place {
            (0..self.colls.len() as u32).collect()
        } else {
            let mut by_value: foldhash::HashMap<&CollMeta, u32> = Default::default();
            (self.colls.iter().enumerate())
                .map(|(i, m)| *by_value.entry(m).or_insert(i as u32))
                .collect()
        };
        // Kept in the order the ops first name them.
        let mut place = vec![u32::MAX; self.colls.len()];
        let mut kept = Vec::new();
        for op in &mut self.ops {
            let Some(i) = op.meta.get() else { continue };
            op.meta = match first.get(i as usize) {
                Some(&f) => {
                    let slot = &mut place[f as usize];
                    if *slot == u32::MAX {
                        *slot = kept.len() as u32;
                        kept.push(self.colls[f as usize].clone());
                    }
                    Slot::from(Some(*slot))
                }
                None => Slot::NONE,
            };
        }
        self.colls = kept;
    }

    /// Whether no two metadata records are alike, known without hashing
    /// them where each process group numbers its collectives, and its
    /// point-to-point ops, in rising order (`seq`, PyTorch 2.5+): records
    /// alike have the same kind, group and number. Hashing every record
    /// was a tenth of reading a summary's collectives.
    fn colls_distinct(&self) -> bool {
        // Per group and whether point-to-point: the last number. A run has
        // a handful of groups.
        let mut last: Vec<(bool, Option<StrId>, u64)> = Vec::new();
        for m in &self.colls {
            let Some(seq) = m.seq else { return false };
            let (p2p, group) = (m.kind == CollKind::SendRecv, m.pg_name);
            match last.iter().position(|l| l.0 == p2p && l.1 == group) {
                Some(at) if seq > last[at].2 => last[at].2 = seq,
                Some(_) => return false,
                None if last.len() < 64 => last.push((p2p, group, seq)),
                None => return false,
            }
        }
        true
    }
}

/// Which steps per-step metrics use: one phrase when every rank agrees, else
/// one per rank.
pub fn steps_used(ranks: &[&RankTimeline]) -> String {
    let each: Vec<String> = ranks.iter().map(|t| t.steps_used()).collect();
    match each.first() {
        Some(first) if each.iter().all(|e| e == first) => first.clone(),
        Some(_) => ranks
            .iter()
            .zip(&each)
            .map(|(t, e)| format!("rank {}: {e}", t.rank))
            .collect::<Vec<_>>()
            .join("; "),
        None => String::new(),
    }
}

/// "step 3", "steps 2-4", or "5 steps, 2-4" when numbers repeat.
fn numbers(first: i64, last: i64, count: usize) -> String {
    match count {
        1 => format!("step {first}"),
        n if (last - first + 1) as usize == n => format!("steps {first}-{last}"),
        n => format!("{n} steps, #{first} to #{last}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::classify::KernelClass;

    /// An all-reduce naming metadata record `i`.
    fn comm_op(i: Option<u32>) -> DeviceOp {
        DeviceOp {
            meta: Slot::from(i),
            coll: Some(CollKind::AllReduce),
            ..DeviceOp::new(
                StrId(0),
                Activity::Kernel,
                KernelClass::Communication,
                Ns::ZERO,
                Ns(1),
            )
        }
    }

    #[test]
    fn equal_collective_metadata_is_kept_once() {
        let meta = |n: u64| CollMeta {
            kind: CollKind::AllReduce,
            name: StrId(0),
            in_nelems: Some(n),
            out_nelems: Some(n),
            dtype_size: Some(4),
            group_size: Some(8),
            pg_name: Some(StrId(1)),
            pg_ranks: None,
            seq: None,
            peer: None,
        };
        let mut t = RankTimeline {
            colls: vec![meta(10), meta(20), meta(10), meta(30), meta(20)],
            ops: [Some(0), Some(1), None, Some(2), Some(4), Some(9)]
                .into_iter()
                .map(comm_op)
                .collect(),
            ..Default::default()
        };
        t.share_coll_meta();
        // Records 0 and 2 are one, 1 and 4 are one; 3 is named by no op; an
        // index past the table names none.
        assert_eq!(t.colls, [meta(10), meta(20)]);
        let metas: Vec<Option<u32>> = t.ops.iter().map(|o| o.meta.get()).collect();
        assert_eq!(metas, [Some(0), Some(1), None, Some(0), Some(1), None]);
    }

    /// Records numbered in rising order per group and kind are told apart
    /// by place, with what telling them apart by value gives; a number
    /// repeated in a group, falling, or missing, is not.
    #[test]
    fn numbered_collective_metadata_is_shared_by_place_alike() {
        let meta = |kind, group: u32, seq: u64| CollMeta {
            kind,
            name: StrId(0),
            in_nelems: Some(seq % 3),
            out_nelems: None,
            dtype_size: Some(4),
            group_size: Some(8),
            pg_name: Some(StrId(group)),
            pg_ranks: None,
            seq: Some(seq),
            peer: None,
        };
        let (ar, p2p) = (CollKind::AllReduce, CollKind::SendRecv);
        // Two groups, each with collectives and point-to-point ops numbered
        // from 1, interleaved.
        let colls = vec![
            meta(ar, 1, 1),
            meta(ar, 2, 1),
            meta(p2p, 1, 1),
            meta(ar, 1, 2),
            meta(p2p, 1, 2),
            meta(ar, 2, 2),
            meta(ar, 1, 3),
        ];
        let refs = [
            Some(3),
            Some(0),
            None,
            Some(3),
            Some(6),
            Some(1),
            Some(40),
            Some(4),
        ];
        let t = RankTimeline {
            colls: colls.clone(),
            ops: refs.into_iter().map(comm_op).collect(),
            ..Default::default()
        };
        assert!(t.colls_distinct());
        let (mut by_place, mut by_value) = (t.clone(), t.clone());
        by_place.share_coll_meta_by(true);
        by_value.share_coll_meta_by(false);
        assert_eq!(by_place.colls, by_value.colls);
        let metas = |t: &RankTimeline| t.ops.iter().map(|o| o.meta.get()).collect::<Vec<_>>();
        assert_eq!(metas(&by_place), metas(&by_value));
        assert_eq!(
            metas(&by_place),
            [
                Some(0),
                Some(1),
                None,
                Some(0),
                Some(2),
                Some(3),
                None,
                Some(4)
            ]
        );
        assert_eq!(by_place.colls, [3, 0, 6, 1, 4].map(|i| colls[i].clone()));
        for (i, m) in [
            (3, meta(ar, 1, 1)),  // a number repeated in its group
            (3, meta(ar, 1, 0)),  // falling
            (4, meta(p2p, 1, 1)), // repeated among point-to-point ops
        ] {
            let mut t = t.clone();
            t.colls[i] = m;
            assert!(!t.colls_distinct(), "{i}");
        }
        let mut unnumbered = t.clone();
        unnumbered.colls[5].seq = None;
        assert!(!unnumbered.colls_distinct());
    }

    #[test]
    fn measured_steps_leave_out_warm_up_and_profiler_stop() {
        let step = |number, start| Step {
            number,
            start,
            end: start + Ns(10),
        };
        let mut t = RankTimeline::default();
        assert_eq!((t.measured(), t.step_count()), (0..0, 1));
        assert!(t.counts(None), "without steps every op counts");
        assert_eq!(t.steps_used(), "no steps: the whole trace");
        t.steps = vec![step(1, Ns::ZERO), step(2, Ns(10))];
        assert_eq!((t.measured(), t.step_count()), (0..2, 2));
        assert_eq!(t.steps_used(), "all steps 1-2");
        t.steps.push(step(3, Ns(20)));
        t.steps.push(step(4, Ns(30)));
        assert_eq!((t.measured(), t.step_count()), (1..3, 2));
        assert!(!t.counts(Some(0)) && t.counts(Some(1)) && t.counts(Some(2)));
        assert!(!t.counts(Some(3)) && !t.counts(None));
        assert_eq!(
            t.steps_used(),
            "steps 2-3 of steps 1-4 (first and last left out; --all-steps keeps them)"
        );
        t.all_steps = true;
        assert_eq!((t.measured(), t.step_count()), (0..4, 4));
        assert_eq!(t.steps_used(), "all steps 1-4");
    }

    #[test]
    fn sm_coverage_from_blocks_per_sm_or_the_grid() {
        let gpu = |id, num_sms| DeviceInfo {
            id,
            name: String::new(),
            num_sms,
        };
        let mut t = RankTimeline {
            devices: vec![gpu(0, Some(304))],
            ..Default::default()
        };
        // Matched by id; one described GPU stands for the process's one device.
        assert_eq!((t.num_sms(0), t.num_sms(9)), (Some(304), Some(304)));
        t.devices = vec![gpu(0, Some(132)), gpu(1, Some(132))];
        assert_eq!(t.num_sms(5), Some(132));
        // Different GPUs and none with the kernel's id: unknown.
        t.devices = vec![gpu(0, Some(132)), gpu(1, Some(108))];
        assert_eq!((t.num_sms(1), t.num_sms(5)), (Some(108), None));

        let op = |work: Option<Work>| DeviceOp {
            start: Ns::ZERO,
            dur: Ns(1),
            name: StrId(0),
            activity: Activity::Kernel,
            class: KernelClass::Gemm,
            coll: None,
            stream: 0,
            device: 0,
            work: work.into(),
            meta: Slot::NONE,
            step: Slot::NONE,
            launch: Ns::ZERO,
        };
        // 152 blocks on 304 SMs: half; 600 blocks: all of it.
        assert_eq!(
            op(Some(Work::Blocks(152.0))).sm_coverage(Some(304)),
            Some(0.5)
        );
        assert_eq!(
            op(Some(Work::Blocks(600.0))).sm_coverage(Some(304)),
            Some(1.0)
        );
        assert_eq!(op(Some(Work::Blocks(152.0))).sm_coverage(None), None);
        assert_eq!(op(Some(Work::Blocks(152.0))).sm_coverage(Some(0)), None);
        // The profiler's own figure needs no SM count.
        assert_eq!(
            op(Some(Work::BlocksPerSm(0.25))).sm_coverage(None),
            Some(0.25)
        );
        assert_eq!(
            op(Some(Work::BlocksPerSm(22.2))).sm_coverage(None),
            Some(1.0)
        );
        assert_eq!(
            op(Some(Work::BlocksPerSm(f64::NAN))).sm_coverage(None),
            None
        );
        assert_eq!(op(Some(Work::Bytes(8))).sm_coverage(Some(304)), None);
    }

    /// Each kind of work comes back as stored, NaN blocks included (and
    /// unequal, as the float is).
    #[test]
    fn packed_work_holds_each_kind() {
        let kinds = [
            None,
            Some(Work::Blocks(152.0)),
            Some(Work::BlocksPerSm(0.25)),
            Some(Work::Bytes(u64::MAX)),
            Some(Work::Bytes(0)),
        ];
        for w in kinds {
            assert_eq!(PackedWork::from(w).get(), w);
            assert_eq!(PackedWork::from(w), PackedWork::from(w));
        }
        let nan = PackedWork::from(Some(Work::Blocks(f64::NAN)));
        assert!(matches!(nan.get(), Some(Work::Blocks(b)) if b.is_nan()));
        assert_ne!(nan, nan);
        assert_ne!(
            PackedWork::from(Some(Work::Blocks(1.0))),
            PackedWork::from(Some(Work::BlocksPerSm(1.0)))
        );
        assert_eq!(PackedWork::NONE.get(), None);
        assert_eq!(
            format!("{:?}", PackedWork::from(Some(Work::Bytes(8)))),
            "Some(Bytes(8))"
        );
        assert_eq!(std::mem::size_of::<PackedWork>(), 9);
    }

    #[test]
    fn an_op_stays_small() {
        // Timelines hold an op per kernel for every rank; growth here is memory.
        assert_eq!(std::mem::size_of::<DeviceOp>(), 56);
    }

    #[test]
    fn work_is_blocks_for_kernels_and_bytes_for_copies() {
        assert_eq!(
            Work::of(Activity::Kernel, Some(8.0), Some(64)),
            Some(Work::Blocks(8.0))
        );
        assert_eq!(
            Work::of(Activity::Memcpy, Some(8.0), Some(64)),
            Some(Work::Bytes(64))
        );
        assert_eq!(Work::of(Activity::Memset, Some(8.0), None), None);
    }
}
