//! The in-memory model every reader fills and every metric and view reads:
//! one [`RankTimeline`] per rank, with integer-nanosecond times and interned names.

pub mod build;
pub mod card;
pub mod classify;
pub mod clock;
pub mod collectives;
pub mod engine;
pub mod exec_trace;
pub mod figures;
pub mod flight;
pub mod hardware;
pub mod interval;
pub mod intervals;
pub mod join;
pub mod memory;
pub mod op;
pub mod program;
pub mod slab;
pub mod strings;
pub mod time;
pub mod timeline;
pub mod trace;
pub mod warning;

pub use card::WorkloadCard;
pub use classify::{CollKind, KernelClass};
pub use intervals::{Coverage, Interval, IntervalSet};
pub use strings::{Interner, StrId};
pub use time::Ns;
pub use timeline::{
    Activity, Annotation, CollMeta, CpuKind, CpuOp, CpuThread, DeviceInfo, DeviceOp, PackedWork,
    ProcessGroup, RankTimeline, Slot, Step, Work,
};
pub use trace::Trace;
pub use warning::Warning;
