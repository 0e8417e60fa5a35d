//! NCCL Flight Recorder dumps: what each rank's process group layer last
//! asked NCCL to do, and how far each call got, when the job was stopped
//! (PyTorch's `TORCH_NCCL_TRACE_BUFFER_SIZE` ring buffer). Plain data: the
//! reader fills it, `metrics::hang` reads it.

use std::num::NonZeroI64;
use std::path::PathBuf;
use std::sync::Arc;

use super::op::Slot;

/// How far a call got when the rank dumped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallState {
    /// Enqueued by the CPU; the kernel had not started.
    Scheduled,
    /// The kernel started (seen only with `TORCH_NCCL_ENABLE_TIMING`).
    Started,
    Completed,
}

impl CallState {
    pub fn name(self) -> &'static str {
        match self {
            Self::Scheduled => "scheduled",
            Self::Started => "started",
            Self::Completed => "completed",
        }
    }
}

/// One source line of a call's Python stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    pub name: String,
    pub file: String,
    pub line: i64,
}

/// A name that repeats in a dump's entries (a group's, an op's), shared:
/// one pointer an entry, where an `Arc<str>` takes two. 256 dumps of 2,000
/// entries hold half a million of each.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Name(Arc<Box<str>>);

impl Name {
    pub fn new(s: &str) -> Self {
        Name(Arc::new(s.into()))
    }
}

impl std::ops::Deref for Name {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl std::borrow::Borrow<str> for Name {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl From<&str> for Name {
    fn from(s: &str) -> Self {
        Name::new(s)
    }
}

impl std::fmt::Display for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::fmt::Debug for Name {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        std::fmt::Debug::fmt(&**self.0, f)
    }
}

/// One recorded call. What a training loop repeats in every call of a kind
/// (group, op, peer, tensors, timeout) is one shared [`FrCall`]; the entry
/// keeps what differs between calls: numbers, times, state, stack.
#[derive(Debug, Clone, PartialEq)]
pub struct FrEntry {
    /// Collectives of the group so far, this one included (the same count
    /// on every member); for a send or recv, the count before it.
    pub collective_seq: u64,
    /// Point-to-point calls of the group so far on this rank.
    pub p2p_seq: u64,
    /// Wall-clock ns since the Unix epoch (the rank's host clock).
    pub created_ns: i64,
    /// The last time the watchdog saw the kernel make progress, on the
    /// same clock: when it was seen to end, else to start (`state` says
    /// which); a time after the epoch only (the niche keeps it to 8 bytes).
    /// The analysis asks no more of the two times, and every entry of every
    /// dump is held at once.
    pub seen_ns: Option<NonZeroI64>,
    /// What it was: one shared value per distinct kind of call in the dump.
    pub call: Arc<FrCall>,
    /// Index into the dump's `stacks`.
    pub stack: Slot,
    pub state: CallState,
}

// Held for every entry of every dump at once: 256 dumps of 2,000 entries
// are half a million.
const _: () = assert!(std::mem::size_of::<FrEntry>() == 48);

/// What a call was, as one rank's dump states it: shared by every entry of
/// the same kind (a training loop repeats a few).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct FrCall {
    /// The group's name (`process_group[0]`, the `pg_config` key).
    pub group: Name,
    /// The group's description (`default_pg`, `undefined`, a user's name).
    pub desc: Name,
    /// The operation without the backend prefix: `all_reduce`, `send`.
    pub op: Name,
    /// For a send or recv: (source, destination) as group ranks.
    pub peer: Option<(u32, u32)>,
    pub is_p2p: bool,
    /// Its tensors' shapes and dtypes.
    pub io: Arc<CallIo>,
    /// The watchdog's timeout; a positive one only.
    pub timeout_ms: Option<NonZeroI64>,
}

/// A call's tensors: one size list per tensor, and each tensor's dtype.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Default)]
pub struct CallIo {
    pub input_sizes: Vec<Vec<i64>>,
    pub output_sizes: Vec<Vec<i64>>,
    pub input_dtypes: Vec<String>,
    pub output_dtypes: Vec<String>,
}

impl FrEntry {
    /// The latest time the rank saw this call make progress.
    pub fn last_seen_ns(&self) -> i64 {
        self.seen_ns.map_or(self.created_ns, NonZeroI64::get)
    }
}

/// A process group as one rank's `pg_config` states it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FrGroup {
    pub name: String,
    pub desc: String,
    /// Its members as global ranks, sorted; `None` when the dump does not
    /// list them readably.
    pub ranks: Option<Vec<u32>>,
}

/// A group's counters on one rank (`pg_status`): these outlive the ring
/// buffer, so they say how far a rank got even when its entries wrapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FrStatus {
    pub last_enqueued: Option<i64>,
    pub last_started: Option<i64>,
    pub last_completed: Option<i64>,
}

/// One rank's dump.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FrDump {
    pub rank: u32,
    pub source: PathBuf,
    /// The dump schema's version (`2.4`, `2.10`).
    pub version: String,
    pub nccl_version: Option<String>,
    pub groups: Vec<FrGroup>,
    /// Per group name (resolved from `pg_status`'s local ids through the
    /// entries), in no particular order.
    pub status: Vec<(String, FrStatus)>,
    /// Oldest first.
    pub entries: Vec<FrEntry>,
    /// Distinct Python stacks, innermost frame first.
    pub stacks: Vec<Vec<Frame>>,
    /// The file ended early: only what came before the cut was read.
    pub truncated: bool,
}

impl FrDump {
    pub fn stack(&self, e: &FrEntry) -> &[Frame] {
        e.stack
            .get()
            .and_then(|i| self.stacks.get(i as usize))
            .map_or(&[], Vec::as_slice)
    }

    pub fn group(&self, name: &str) -> Option<&FrGroup> {
        self.groups.iter().find(|g| g.name == name)
    }

    pub fn status(&self, group: &str) -> Option<FrStatus> {
        self.status.iter().find(|s| *s.0 == *group).map(|s| s.1)
    }

    /// The latest time anything in the dump was seen to happen.
    pub fn last_seen_ns(&self) -> Option<i64> {
        self.entries.iter().map(FrEntry::last_seen_ns).max()
    }
}
