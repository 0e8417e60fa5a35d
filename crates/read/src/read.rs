//! Readers: each turns one input file into the model's per-rank data
//! (timelines, memory timelines, execution traces, the workload card). Which
//! reader a file gets is decided by `formats`; `load` runs them.

pub mod card;
pub mod chrome;
pub mod events;
pub mod exec_trace;
pub mod flight_recorder;
mod hlo;
pub mod kineto;
pub mod nsys;
pub mod nsys_jax;
pub mod nsys_json;
pub mod pickle_budget;
pub mod pickle_tree;
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
    pub warnings: Vec<String>,
}
