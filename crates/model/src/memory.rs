//! Device memory over time, from CUDA caching-allocator snapshots
//! (`torch.cuda.memory._dump_snapshot`): per rank, allocated and reserved bytes
//! after every allocator event, and the allocator's state when the snapshot was
//! taken.

use std::path::PathBuf;

/// Bytes after one allocator event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemSample {
    /// The event's time (µs, the allocator's clock).
    pub time_us: i64,
    /// Bytes in blocks handed out to tensors.
    pub allocated: i64,
    /// Bytes the allocator holds from the driver (cudaMalloc'd segments).
    pub reserved: i64,
    /// The phase of the block the event allocated or freed (see
    /// [`Phase`]); the first sample's, and a segment event's, is
    /// [`Phase::Before`].
    pub phase: Phase,
}

/// What part of a training step allocated a block, read from the
/// allocation's stack: an approximation of the categories of PyTorch's
/// memory profiler that a snapshot can support. Forward allocations are
/// mostly activations and their temporaries, backward ones gradients and
/// backward temporaries, optimizer ones its state and update temporaries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Allocated before the recorded history began (parameters, buffers,
    /// anything kept from earlier steps), or a stack nobody recorded.
    #[default]
    Before,
    /// Under a module's `forward` (`torch/nn/modules/module.py`).
    Forward,
    /// By the autograd engine (`Engine::evaluate_function`, `backward()`).
    Backward,
    /// Under `torch/optim` or gradient clipping (`torch/nn/utils/clip_grad`).
    Optimizer,
    /// Any other stack: the loss, data moved to the device, user code
    /// outside modules.
    Other,
}

impl Phase {
    /// Every phase, in the order they are stacked and listed.
    pub const ALL: [Phase; 5] = [
        Phase::Before,
        Phase::Forward,
        Phase::Backward,
        Phase::Optimizer,
        Phase::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Phase::Before => "before history",
            Phase::Forward => "forward",
            Phase::Backward => "backward",
            Phase::Optimizer => "optimizer",
            Phase::Other => "other",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// The stored code (`index`) back; `None` for one out of range.
    pub fn from_index(i: i64) -> Option<Phase> {
        usize::try_from(i)
            .ok()
            .and_then(|i| Phase::ALL.get(i).copied())
    }

    /// The phase of an allocation whose stack is `frames` (file, function),
    /// innermost first. The optimizer wins over the autograd engine (an
    /// optimizer run from a backward hook is the optimizer's), the engine
    /// over a module (a module's backward hook allocates for backward).
    pub fn of_stack<'a>(frames: impl Iterator<Item = (&'a str, &'a str)> + Clone) -> Phase {
        // Windows paths are rare: only they pay for a copy.
        let path = |f: &str, part: &str| {
            f.contains(part) || (f.contains('\\') && f.replace('\\', "/").contains(part))
        };
        // Clipping gradients is part of the update (`clip_grad_norm_`).
        let update =
            |file: &str| path(file, "torch/optim/") || path(file, "torch/nn/utils/clip_grad");
        if frames.clone().any(|(file, _)| update(file)) {
            return Phase::Optimizer;
        }
        let engine = |(file, name): (&str, &str)| {
            name.contains("Engine::evaluate_function")
                || name.contains("Engine::thread_main")
                || name == "_engine_run_backward"
                || (path(file, "torch/autograd/__init__.py") && name == "backward")
        };
        if frames.clone().any(engine) {
            return Phase::Backward;
        }
        if frames
            .clone()
            .any(|(file, _)| path(file, "torch/nn/modules/module.py"))
        {
            return Phase::Forward;
        }
        if frames.clone().next().is_none() {
            return Phase::Before;
        }
        Phase::Other
    }
}

/// Bytes allocated by phase after each sample (same index as `samples`):
/// the first sample's bytes are all [`Phase::Before`], and each later one
/// adds its change in allocated bytes to its phase, so the phases always
/// sum to the sample's allocated bytes.
pub fn by_phase(samples: &Samples) -> Vec<[i64; 5]> {
    let mut out = Vec::with_capacity(samples.len());
    let mut acc = [0i64; 5];
    let mut last = None;
    for s in samples {
        match last {
            None => acc[Phase::Before.index()] = s.allocated,
            Some(prev) => acc[s.phase.index()] += s.allocated - prev,
        }
        last = Some(s.allocated);
        out.push(acc);
    }
    out
}

/// A rank's samples in time order, by column: each sample's time, allocated
/// bytes and phase (17 bytes), and the reserved bytes only where they change
/// (segment events: a few in a thousand). A snapshot's history can hold
/// millions of events; as [`MemSample`]s they took 32 bytes each. Grown a
/// chunk at a time, never by doubling the whole.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    chunks: Vec<Chunk>,
    len: usize,
    /// (the first sample with it, reserved bytes), in order; the first at 0.
    reserved: Vec<(usize, i64)>,
}

#[derive(Debug, Clone)]
struct Chunk {
    time_us: Vec<i64>,
    allocated: Vec<i64>,
    phase: Vec<Phase>,
}

/// Samples a chunk holds (every chunk but the last is full).
const CHUNK: usize = 1 << 16;

impl Samples {
    pub fn push(&mut self, s: MemSample) {
        if self.reserved.last().is_none_or(|&(_, r)| r != s.reserved) {
            self.reserved.push((self.len, s.reserved));
        }
        // A chunk grows by doubling up to its size (a short history takes
        // little), then the next begins.
        if self.len.is_multiple_of(CHUNK) {
            self.chunks.push(Chunk {
                time_us: Vec::new(),
                allocated: Vec::new(),
                phase: Vec::new(),
            });
        }
        if let Some(c) = self.chunks.last_mut() {
            c.time_us.push(s.time_us);
            c.allocated.push(s.allocated);
            c.phase.push(s.phase);
        }
        self.len += 1;
    }

    /// Adds `allocated` and `reserved` bytes to every sample (a reader
    /// that learns the state before its history at the end).
    pub fn add(&mut self, allocated: i64, reserved: i64) {
        for c in &mut self.chunks {
            for a in &mut c.allocated {
                *a = a.wrapping_add(allocated);
            }
        }
        for (_, r) in &mut self.reserved {
            *r = r.wrapping_add(reserved);
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> Option<MemSample> {
        let c = self.chunks.get(i / CHUNK)?;
        let j = i % CHUNK;
        let r = self.reserved.partition_point(|&(at, _)| at <= i);
        Some(MemSample {
            time_us: *c.time_us.get(j)?,
            allocated: c.allocated[j],
            reserved: self.reserved[r.checked_sub(1)?].1,
            phase: c.phase[j],
        })
    }

    pub fn first(&self) -> Option<MemSample> {
        self.get(0)
    }

    pub fn last(&self) -> Option<MemSample> {
        self.get(self.len.checked_sub(1)?)
    }

    pub fn iter(&self) -> SampleIter<'_> {
        SampleIter {
            samples: self,
            next: 0,
            reserved: 0,
        }
    }
}

/// The samples in order, each made from its columns.
#[derive(Clone)]
pub struct SampleIter<'a> {
    samples: &'a Samples,
    next: usize,
    /// The place in `samples.reserved` of the next sample's.
    reserved: usize,
}

impl Iterator for SampleIter<'_> {
    type Item = MemSample;

    fn next(&mut self) -> Option<MemSample> {
        let s = self.samples;
        let i = self.next;
        let c = s.chunks.get(i / CHUNK)?;
        let j = i % CHUNK;
        let time_us = *c.time_us.get(j)?;
        while s
            .reserved
            .get(self.reserved + 1)
            .is_some_and(|&(at, _)| at <= i)
        {
            self.reserved += 1;
        }
        self.next += 1;
        Some(MemSample {
            time_us,
            allocated: c.allocated[j],
            reserved: s.reserved.get(self.reserved).map_or(0, |r| r.1),
            phase: c.phase[j],
        })
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.samples.len - self.next;
        (n, Some(n))
    }
}

impl ExactSizeIterator for SampleIter<'_> {}

impl PartialEq for Samples {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Samples {}

impl FromIterator<MemSample> for Samples {
    fn from_iter<I: IntoIterator<Item = MemSample>>(it: I) -> Self {
        let mut s = Samples::default();
        for x in it {
            s.push(x);
        }
        s
    }
}

impl<'a> IntoIterator for &'a Samples {
    type Item = MemSample;
    type IntoIter = SampleIter<'a>;

    fn into_iter(self) -> SampleIter<'a> {
        self.iter()
    }
}

/// The allocator's state at snapshot time, summed over segments.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MemState {
    pub allocated: i64,
    pub reserved: i64,
    /// Allocated plus blocks freed but still in use by a stream.
    pub active: i64,
    /// Bytes the program asked for in allocated blocks (before rounding).
    pub requested: i64,
}

#[derive(Debug, Clone, Default)]
pub struct MemoryTimeline {
    pub rank: u32,
    pub source: PathBuf,
    /// In time order; the first sample is the state before the first event.
    pub samples: Samples,
    pub end: MemState,
    /// Allocations and completed frees in the recorded history.
    pub allocs: u64,
    pub frees: u64,
    /// At the allocation peak, the bytes live by the code that allocated
    /// them (`model.py:45 forward`), largest first, at most [`PEAK_SITES`];
    /// bytes allocated before the history began have no site and are not
    /// among them.
    pub peak_sites: Vec<(String, i64)>,
}

/// Allocation sites kept for the peak.
pub const PEAK_SITES: usize = 5;

impl MemoryTimeline {
    /// The sample with the most allocated bytes (the first of equals).
    pub fn peak_allocated(&self) -> Option<MemSample> {
        self.samples.get(self.peak_index()?)
    }

    /// The index of [`Self::peak_allocated`] in `samples`.
    pub fn peak_index(&self) -> Option<usize> {
        let mut best: Option<(usize, i64)> = None;
        for (i, s) in self.samples.iter().enumerate() {
            if best.is_none_or(|(_, b)| s.allocated > b) {
                best = Some((i, s.allocated));
            }
        }
        best.map(|(i, _)| i)
    }

    pub fn peak_reserved(&self) -> Option<i64> {
        self.samples.iter().map(|s| s.reserved).max()
    }
}

/// Replays allocator events backwards from the end state: the history is a
/// ring buffer that may begin after the first allocations, so the state before
/// it is the end state minus what the history added. `events` are
/// (time µs, Δallocated, Δreserved, phase of the block) in order, walked
/// twice (a reader's own records, seen as such).
pub fn replay<I>(end: MemState, events: I) -> Samples
where
    I: IntoIterator<Item = (i64, i64, i64, Phase)> + Clone,
{
    let (net_alloc, net_reserved) = events
        .clone()
        .into_iter()
        .fold((0i64, 0i64), |(a, r), e| (a + e.1, r + e.2));
    let mut events = events.into_iter().peekable();
    let mut s = MemSample {
        time_us: events.peek().map_or(0, |e| e.0),
        allocated: end.allocated - net_alloc,
        reserved: end.reserved - net_reserved,
        phase: Phase::Before,
    };
    let mut out = Samples::default();
    out.push(s);
    for (t, da, dr, phase) in events {
        s = MemSample {
            time_us: t,
            allocated: s.allocated + da,
            reserved: s.reserved + dr,
            phase,
        };
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples read back as pushed, across chunks, reserved bytes from
    /// their change points; adding bytes to all shifts both.
    #[test]
    fn samples_by_column_read_back_as_pushed() {
        let n = CHUNK as i64 + 3;
        // Reserved changes at 0, at 5 and at CHUNK + 1 (not in between).
        let reserved = |t: i64| match t {
            0..5 => 100,
            t if t <= CHUNK as i64 => 300,
            _ => 200,
        };
        let at = |t: i64| MemSample {
            time_us: 1_000 + t,
            allocated: 10 * t,
            reserved: reserved(t),
            phase: Phase::ALL[(t % 5) as usize],
        };
        let mut s = Samples::default();
        assert_eq!(
            (s.len(), s.first(), s.last(), s.get(0)),
            (0, None, None, None)
        );
        assert_eq!(s.iter().next(), None);
        for t in 0..n {
            s.push(at(t));
        }
        assert_eq!(s.len(), n as usize);
        assert_eq!(s.reserved, vec![(0, 100), (5, 300), (CHUNK + 1, 200)]);
        assert!(s.iter().eq((0..n).map(at)));
        assert_eq!(s.iter().len(), n as usize);
        for t in [
            0,
            4,
            5,
            6,
            CHUNK as i64 - 1,
            CHUNK as i64,
            CHUNK as i64 + 1,
            n - 1,
        ] {
            assert_eq!(s.get(t as usize), Some(at(t)), "sample {t}");
        }
        assert_eq!(s.get(n as usize), None);
        assert_eq!((s.first(), s.last()), (Some(at(0)), Some(at(n - 1))));
        assert_eq!(s, (0..n).map(at).collect::<Samples>());
        s.add(7, -50);
        assert_eq!(s.get(6).map(|x| (x.allocated, x.reserved)), Some((67, 250)));
        assert_eq!(
            s.last().map(|x| (x.allocated, x.reserved)),
            Some((10 * (n - 1) + 7, 150))
        );
    }

    #[test]
    fn replay_starts_from_what_the_history_did_not_see() {
        // End: 100 allocated, 300 reserved. History: segment +200, alloc +80,
        // alloc +50, free -30. So before it: 0 + 100 - 100 = 0 allocated,
        // 300 - 200 = 100 reserved (one segment older than the history).
        let end = MemState {
            allocated: 100,
            reserved: 300,
            ..MemState::default()
        };
        let b = Phase::Before;
        let s = replay(
            end,
            [(1, 0, 200, b), (2, 80, 0, b), (3, 50, 0, b), (4, -30, 0, b)],
        );
        let alloc: Vec<i64> = s.iter().map(|x| x.allocated).collect();
        assert_eq!(alloc, vec![0, 0, 80, 130, 100]);
        assert_eq!(s.get(0).map(|x| x.reserved), Some(100));
        assert_eq!(s.last().unwrap().reserved, 300);
        let t = MemoryTimeline {
            samples: s,
            ..MemoryTimeline::default()
        };
        assert_eq!(
            t.peak_allocated()
                .map(|p| (p.time_us, p.allocated, p.reserved)),
            Some((3, 130, 300))
        );
        assert_eq!(t.peak_reserved(), Some(300));
    }

    /// Phases by stack, as PyTorch's stacks have them: a module's
    /// forward, the engine thread (C++ only), `loss.backward()` in Python,
    /// an optimizer step (which wins over the engine it may run under).
    #[test]
    fn phase_of_a_stack() {
        let of = |f: &[(&str, &str)]| Phase::of_stack(f.iter().copied());
        let module = (
            "/v/lib/python3.12/site-packages/torch/nn/modules/module.py",
            "_call_impl",
        );
        let add = (
            "RegisterCUDA_0.cpp",
            "at::(anonymous namespace)::wrapper_CUDA_add_Tensor",
        );
        let engine = ("", "torch::autograd::Engine::evaluate_function(std::shared_ptr<torch::autograd::GraphTask>&)");
        let optim = ("/v/torch/optim/adamw.py", "_multi_tensor_adamw");
        // `torch::autograd::` in a name alone is the forward's Python binding.
        let binding = (
            "python_variable_methods.cpp",
            "torch::autograd::THPVariable_add",
        );
        assert_eq!(
            of(&[add, binding, ("g.py", "forward"), module]),
            Phase::Forward
        );
        assert_eq!(of(&[add, engine]), Phase::Backward);
        assert_eq!(
            of(&[
                add,
                ("/v/torch/autograd/graph.py", "_engine_run_backward"),
                ("g.py", "step")
            ]),
            Phase::Backward
        );
        assert_eq!(of(&[add, optim, engine]), Phase::Optimizer);
        assert_eq!(of(&[add, binding, ("g.py", "loss")]), Phase::Other);
        assert_eq!(of(&[]), Phase::Before);
    }

    /// 100 bytes before the history; forward +60, backward +30, forward's
    /// block freed (-60, forward), optimizer +10, a block from before the
    /// history freed (-40, before).
    #[test]
    fn bytes_by_phase_sum_to_allocated() {
        let end = MemState {
            allocated: 100,
            reserved: 500,
            ..MemState::default()
        };
        let ev = [
            (1, 60, 0, Phase::Forward),
            (2, 30, 0, Phase::Backward),
            (3, -60, 0, Phase::Forward),
            (4, 10, 0, Phase::Optimizer),
            (5, -40, 0, Phase::Before),
        ];
        let s = replay(end, ev.iter().copied());
        let p = by_phase(&s);
        assert_eq!(s.get(0).map(|x| x.allocated), Some(100));
        assert_eq!(p[0], [100, 0, 0, 0, 0]);
        assert_eq!(p[2], [100, 60, 30, 0, 0]);
        assert_eq!(p[5], [60, 0, 30, 10, 0]);
        for (s, p) in s.iter().zip(&p) {
            assert_eq!(p.iter().sum::<i64>(), s.allocated);
        }
    }
}
