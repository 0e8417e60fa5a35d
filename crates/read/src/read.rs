//! Readers: each turns one input file into the model's per-rank data
//! (timelines, memory timelines, execution traces, the workload card). Which
//! reader a file gets is decided by `formats`; `load` runs them.

mod blocks;
pub mod card;
pub mod chrome;
pub mod events;
pub mod exec_trace;
pub mod flight_recorder;
mod hlo;
pub mod kineto;
pub mod nsys;
mod nsys_cpu;
pub mod nsys_jax;
pub mod nsys_json;
mod parquet_stream;
pub mod pickle_budget;
mod pickle_input;
pub mod pickle_tree;
mod protowire;
pub mod snapshot;
pub mod split;
pub mod xla_json;
pub mod xplane;

/// What a reader found in one file, before ranks are resolved across files.
#[derive(Debug)]
pub struct RankFile {
    pub timeline: crate::model::RankTimeline,
    /// The rank the file's content states (`distributedInfo.rank`), if any.
    pub dist_rank: Option<u32>,
    pub events: u64,
    pub warnings: Vec<crate::model::Warning>,
    /// Where the timeline's ops also lie in tables a view can read a window
    /// at a time (a summary's): the load keeps this beside the timeline,
    /// not in it, so the model holds no file.
    pub tables: Option<Tables>,
}

impl RankFile {
    /// A device's rank as a reader built it, its ops counted as its events.
    pub(crate) fn built(t: crate::model::build::TimelineBuilder) -> Self {
        let events = t.op_count() as u64;
        let (timeline, warnings) = t.finish();
        RankFile {
            timeline,
            dist_rank: None,
            events,
            warnings,
            tables: None,
        }
    }
}

/// A summarized rank's table files (with the sizes its entry records), read
/// a window at a time by views that draw ops (`summary::pages`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tables {
    pub ops: TableFile,
    /// The binned lanes (`derive::lanes::bins`); `None` where they are not
    /// of the load's classes (class rules changed the rank's ops and no view
    /// had them made afresh).
    pub coverage: Option<TableFile>,
}

/// One table file and the rows of it that are the rank's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableFile {
    pub path: std::path::PathBuf,
    /// Its size as written: a file of another size is not read.
    pub size: u64,
    /// The rank's rows, `[start, end)`: a summary's small ranks share files.
    pub rows: (u64, u64),
}
