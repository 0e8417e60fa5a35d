//! One device op and the plain values it holds: what a timeline is made of,
//! and what the spill interface (`slab`) can name without the timeline.

use super::classify::{Activity, CollKind, KernelClass};
use super::interval::Interval;
use super::strings::StrId;
use super::time::Ns;

/// What an op did besides taking time. One field for both because a kernel has
/// no byte count and a copy no grid: the op stays 56 bytes (stored as
/// [`PackedWork`]), and a timeline holds millions of them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Work {
    /// Thread blocks a kernel launched (product of `grid`).
    Blocks(f64),
    /// Blocks per SM as the profiler computed them (`blocks per SM`: blocks /
    /// the device's SMs), which needs no device properties.
    BlocksPerSm(f64),
    /// Bytes a memory copy or set moved.
    Bytes(u64),
}

impl Work {
    /// The field an op of this activity keeps: blocks for kernels, bytes otherwise.
    pub fn of(activity: Activity, blocks: Option<f64>, bytes: Option<u64>) -> Option<Work> {
        match activity {
            Activity::Kernel => blocks.map(Work::Blocks),
            Activity::Memcpy | Activity::Memset => bytes.map(Work::Bytes),
        }
    }
}

/// An `Option<Work>` in 9 bytes aligned to 1, where it takes 16 aligned to
/// 8: the op then packs into 56 bytes rather than 64.
#[derive(Clone, Copy)]
#[repr(C, packed)]
pub struct PackedWork {
    /// 0: none; 1 + the `Work` variant's place.
    tag: u8,
    /// The variant's value: `f64::to_bits` or the byte count.
    bits: u64,
}

impl PackedWork {
    pub const NONE: Self = Self { tag: 0, bits: 0 };

    pub fn get(self) -> Option<Work> {
        let bits = self.bits;
        match self.tag {
            1 => Some(Work::Blocks(f64::from_bits(bits))),
            2 => Some(Work::BlocksPerSm(f64::from_bits(bits))),
            3 => Some(Work::Bytes(bits)),
            _ => None,
        }
    }
}

impl From<Option<Work>> for PackedWork {
    fn from(w: Option<Work>) -> Self {
        let (tag, bits) = match w {
            None => (0, 0),
            Some(Work::Blocks(b)) => (1, b.to_bits()),
            Some(Work::BlocksPerSm(b)) => (2, b.to_bits()),
            Some(Work::Bytes(b)) => (3, b),
        };
        Self { tag, bits }
    }
}

impl PartialEq for PackedWork {
    /// As the `Option<Work>` it holds (NaN blocks are unequal).
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

impl std::fmt::Debug for PackedWork {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.get().fmt(f)
    }
}

/// An optional index into one of a rank's tables, in 4 bytes where
/// `Option<u32>` takes 8: a timeline holds millions of ops, each with two.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Slot(u32);

impl Slot {
    pub const NONE: Self = Self(u32::MAX);

    pub fn get(self) -> Option<u32> {
        (self != Self::NONE).then_some(self.0)
    }

    pub fn is_none(self) -> bool {
        self == Self::NONE
    }
}

impl From<Slot> for Option<u32> {
    fn from(s: Slot) -> Self {
        s.get()
    }
}

impl From<Option<u32>> for Slot {
    /// `u32::MAX` cannot be stored: no table holds 4 billion entries.
    fn from(i: Option<u32>) -> Self {
        i.map_or(Self::NONE, Self)
    }
}

/// One kernel, memory copy or memory set on a GPU stream.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceOp {
    pub start: Ns,
    pub dur: Ns,
    pub name: StrId,
    pub activity: Activity,
    pub class: KernelClass,
    /// Collective kind for communication ops.
    pub coll: Option<CollKind>,
    pub stream: u32,
    pub device: u32,
    /// Launch-grid size or bytes moved, when recorded.
    pub work: PackedWork,
    /// Index into `RankTimeline::colls` for collectives with recorded metadata.
    pub meta: Slot,
    /// Index into `RankTimeline::steps` of the step during which the op was launched.
    pub step: Slot,
    /// When the CPU launched it (the runtime call with the same correlation id);
    /// the op's start when the trace does not say.
    pub launch: Ns,
}

impl DeviceOp {
    /// An op with nothing recorded beyond its name, kind and time: stream and
    /// device 0, launched when it started (fill the rest with `..`).
    pub fn new(name: StrId, activity: Activity, class: KernelClass, start: Ns, dur: Ns) -> Self {
        Self {
            start,
            dur,
            name,
            activity,
            class,
            coll: None,
            stream: 0,
            device: 0,
            work: PackedWork::NONE,
            meta: Slot::NONE,
            step: Slot::NONE,
            launch: start,
        }
    }

    /// Thread blocks launched, for kernels that recorded their grid.
    pub fn blocks(&self) -> Option<f64> {
        match self.work.get() {
            Some(Work::Blocks(b)) => Some(b),
            _ => None,
        }
    }

    /// Share of the device's SMs the kernel's grid can occupy, 0-1:
    /// min(1, blocks per SM), from the profiler's own figure when recorded,
    /// else from the grid and `sms`, the device's SM count.
    pub fn sm_coverage(&self, sms: Option<u32>) -> Option<f64> {
        let per_sm = match self.work.get()? {
            Work::BlocksPerSm(b) => b,
            Work::Blocks(b) => b / f64::from(sms.filter(|&n| n > 0)?),
            Work::Bytes(_) => return None,
        };
        (per_sm.is_finite() && per_sm >= 0.0).then(|| per_sm.min(1.0))
    }

    /// Bytes moved, for memory copies and sets that recorded it.
    pub fn bytes(&self) -> Option<u64> {
        match self.work.get() {
            Some(Work::Bytes(b)) => Some(b),
            _ => None,
        }
    }

    pub fn end(&self) -> Ns {
        self.start + self.dur
    }

    pub fn interval(&self) -> Interval {
        Interval::new(self.start, self.end())
    }

    pub fn is_kernel(&self) -> bool {
        self.activity == Activity::Kernel
    }

    pub fn is_comm(&self) -> bool {
        self.class == KernelClass::Communication
    }

    /// What figures across ranks read: communication ops, and any op naming
    /// a collective kind (see [`RankTimeline::slim`]).
    pub fn crosses_ranks(&self) -> bool {
        self.is_comm() || self.coll.is_some()
    }

    /// A compute kernel: a kernel that is not communication (and not a memory kernel).
    pub fn is_compute(&self) -> bool {
        self.is_kernel() && self.class.is_compute()
    }

    pub fn is_memory(&self) -> bool {
        self.class == KernelClass::Memory
    }
}
