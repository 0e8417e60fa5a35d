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

/// A rank's samples in time order, held in chunks: a reader turns each
/// chunk of the history it read into samples where it lies, so that a
/// snapshot's history and its samples (300,000 of each for a 71 MB file,
/// 32 bytes apiece) are never held at once.
#[derive(Debug, Clone, Default)]
pub struct Samples {
    chunks: Vec<Vec<MemSample>>,
    /// The index of each chunk's first sample.
    starts: Vec<usize>,
    len: usize,
}

impl Samples {
    /// Appends a chunk (an empty one is dropped).
    pub fn push_chunk(&mut self, chunk: Vec<MemSample>) {
        if chunk.is_empty() {
            return;
        }
        self.starts.push(self.len);
        self.len += chunk.len();
        self.chunks.push(chunk);
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    pub fn get(&self, i: usize) -> Option<&MemSample> {
        let c = self.starts.partition_point(|&s| s <= i).checked_sub(1)?;
        self.chunks[c].get(i - self.starts[c])
    }

    pub fn first(&self) -> Option<&MemSample> {
        self.chunks.first()?.first()
    }

    pub fn last(&self) -> Option<&MemSample> {
        self.chunks.last()?.last()
    }

    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &MemSample> + Clone {
        self.chunks.iter().flatten()
    }
}

impl PartialEq for Samples {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl Eq for Samples {}

impl std::ops::Index<usize> for Samples {
    type Output = MemSample;

    fn index(&self, i: usize) -> &MemSample {
        self.get(i).expect("a sample index within the samples")
    }
}

impl From<Vec<MemSample>> for Samples {
    fn from(v: Vec<MemSample>) -> Self {
        let mut s = Samples::default();
        s.push_chunk(v);
        s
    }
}

impl FromIterator<MemSample> for Samples {
    fn from_iter<I: IntoIterator<Item = MemSample>>(it: I) -> Self {
        Vec::from_iter(it).into()
    }
}

impl<'a> IntoIterator for &'a Samples {
    type Item = &'a MemSample;
    type IntoIter = std::iter::Flatten<std::slice::Iter<'a, Vec<MemSample>>>;

    fn into_iter(self) -> Self::IntoIter {
        self.chunks.iter().flatten()
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

/// An allocator event, for what is live at a moment: an allocation of
/// `size` bytes at `addr` from site `site`, or the completed free of the
/// block at `addr`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Block {
    Alloc { addr: u64, size: i64, site: u32 },
    Free { addr: u64 },
}

/// The bytes live after `events`, by site, largest first (then by site).
/// A free of a block allocated before them changes nothing here.
pub fn live_by_site(events: impl IntoIterator<Item = Block>) -> Vec<(u32, i64)> {
    let mut live: std::collections::HashMap<u64, (i64, u32)> = Default::default();
    for e in events {
        match e {
            Block::Alloc { addr, size, site } => {
                live.insert(addr, (size, site));
            }
            Block::Free { addr } => {
                live.remove(&addr);
            }
        }
    }
    let mut by: std::collections::HashMap<u32, i64> = Default::default();
    for (size, site) in live.into_values() {
        *by.entry(site).or_default() += size;
    }
    let mut out: Vec<(u32, i64)> = by.into_iter().collect();
    out.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    out
}

impl MemoryTimeline {
    /// The sample with the most allocated bytes (the first of equals).
    pub fn peak_allocated(&self) -> Option<MemSample> {
        self.samples.get(self.peak_index()?).copied()
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
    let (net_alloc, net_reserved, n) = events
        .clone()
        .into_iter()
        .fold((0i64, 0i64, 0usize), |(a, r, n), e| {
            (a + e.1, r + e.2, n + 1)
        });
    let mut events = events.into_iter().peekable();
    let mut s = MemSample {
        time_us: events.peek().map_or(0, |e| e.0),
        allocated: end.allocated - net_alloc,
        reserved: end.reserved - net_reserved,
        phase: Phase::Before,
    };
    let mut out = Vec::with_capacity(n + 1);
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
    out.into()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Samples in chunks of any size read as one sequence; empty chunks
    /// are dropped.
    #[test]
    fn samples_in_chunks_read_as_one_sequence() {
        let at = |t| MemSample {
            time_us: t,
            allocated: 10 * t,
            reserved: 0,
            phase: Phase::Before,
        };
        let mut s = Samples::default();
        assert_eq!(
            (s.len(), s.first(), s.last(), s.get(0)),
            (0, None, None, None)
        );
        s.push_chunk(vec![at(0)]);
        s.push_chunk(Vec::new());
        s.push_chunk(vec![at(1), at(2), at(3)]);
        s.push_chunk(vec![at(4), at(5)]);
        assert_eq!(s.len(), 6);
        let times: Vec<i64> = s.iter().map(|x| x.time_us).collect();
        assert_eq!(times, vec![0, 1, 2, 3, 4, 5]);
        assert_eq!(
            (0..7)
                .map(|i| s.get(i).map(|x| x.time_us))
                .collect::<Vec<_>>(),
            vec![Some(0), Some(1), Some(2), Some(3), Some(4), Some(5), None]
        );
        assert_eq!((s[3].allocated, s.last().map(|x| x.time_us)), (30, Some(5)));
        assert_eq!(s.iter().next_back().map(|x| x.time_us), Some(5));
        // Equal as sequences, however chunked.
        assert_eq!(s, (0..6).map(at).collect::<Samples>());
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
        assert_eq!(s[0].reserved, 100);
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
        assert_eq!(s[0].allocated, 100);
        assert_eq!(p[0], [100, 0, 0, 0, 0]);
        assert_eq!(p[2], [100, 60, 30, 0, 0]);
        assert_eq!(p[5], [60, 0, 30, 10, 0]);
        for (s, p) in s.iter().zip(&p) {
            assert_eq!(p.iter().sum::<i64>(), s.allocated);
        }
    }

    #[test]
    fn live_bytes_by_site() {
        // Site 0 allocates 80 at a, site 1 50 at b, site 0 20 at c; a is
        // freed, and a block from before the history at z.
        let ev = [
            Block::Alloc {
                addr: 1,
                size: 80,
                site: 0,
            },
            Block::Alloc {
                addr: 2,
                size: 50,
                site: 1,
            },
            Block::Alloc {
                addr: 3,
                size: 20,
                site: 0,
            },
            Block::Free { addr: 1 },
            Block::Free { addr: 99 },
        ];
        assert_eq!(
            live_by_site(ev[..3].iter().copied()),
            vec![(0, 100), (1, 50)]
        );
        assert_eq!(live_by_site(ev.iter().copied()), vec![(1, 50), (0, 20)]);
    }
}
