//! A whole loaded trace: every rank's timeline, ordered by rank.

use std::path::PathBuf;

use super::card::WorkloadCard;
use super::time::Ns;
use super::timeline::RankTimeline;

#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Sorted by rank; rank numbers are unique.
    pub ranks: Vec<RankTimeline>,
    /// The file or directory the user pointed at.
    pub source: PathBuf,
    /// The `iteration_K` folder that was read, for ccl-bench `profile_traces` layouts.
    pub iteration: Option<u32>,
    /// The workload card found beside the traces.
    pub card: Option<WorkloadCard>,
    /// Clock offsets applied to the ranks (same order), when aligned.
    pub offsets: Option<Vec<Offset>>,
    /// Why the ranks' clocks cannot be trusted against each other, when an
    /// offset was too uncertain to apply: cross-rank verdicts are then
    /// unknown.
    pub clock_doubt: Option<String>,
    /// User kernel class rules applied on loading.
    pub rules: Option<super::classify::UserRules>,
    /// Device memory over time, per rank with a CUDA memory snapshot.
    pub memory: Vec<super::memory::MemoryTimeline>,
    /// Communication nodes from PyTorch execution traces, per rank.
    pub et: Vec<super::exec_trace::EtRank>,
    /// NCCL Flight Recorder dumps, per rank.
    pub flight: Vec<super::flight::FrDump>,
}

impl Trace {
    /// Where the ranks' collectives were spilled (a lean load past
    /// `load::HELD_COMM_OPS`), if any were: what is made per collective
    /// from them goes there too.
    pub fn spilled_to(&self) -> Option<&'static dyn super::slab::Spill> {
        self.ranks.iter().find_map(|t| t.ops.spilled_to())
    }

    /// Nothing was loaded: no timelines, memory snapshots, execution traces
    /// or Flight Recorder dumps.
    pub fn is_empty(&self) -> bool {
        self.ranks.is_empty()
            && self.memory.is_empty()
            && self.et.is_empty()
            && self.flight.is_empty()
    }

    /// What the ranks' devices are, for words on screen: "TPU" where every
    /// device a reader named is a TPU (`/device:TPU:0`), else "GPU".
    pub fn accelerator(&self) -> &'static str {
        let mut named = self.ranks.iter().flat_map(|t| &t.devices).peekable();
        if named.peek().is_some() && named.all(|d| d.name.contains(":TPU:")) {
            "TPU"
        } else {
            "GPU"
        }
    }

    pub fn rank(&self, rank: u32) -> Option<&RankTimeline> {
        self.ranks.iter().find(|r| r.rank == rank)
    }
}

/// A rank's estimated clock offset: add it to the rank's times to put them on
/// the reference rank's clock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Offset {
    pub rank: u32,
    pub offset: Ns,
    /// Median absolute deviation of the per-collective estimates.
    pub spread: Ns,
    /// Collectives the estimate rests on.
    pub samples: usize,
}
