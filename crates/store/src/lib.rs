//! ccl-store: what ccl-bench keeps on disk. Summaries (a run's inputs as
//! Parquet tables, written by `summarize` and opened as a trace directory),
//! the pages a view reads a window at a time, the results kept beside a
//! summary, the temporary files a large run's collectives are spilled to
//! (`spill`, the only unsafe code), and the two ways every file we write is made: atomically
//! (`atomic`) and only inside a folder named, through no link (`confined`).
//! It knows the model, the readers and the derived figures; nothing that
//! shows them.

// The layers below, by the names the application uses for them.
use ccl_metrics::derive;
use ccl_model as model;
#[cfg(test)]
use ccl_read::synth;
use ccl_read::{discover, error, formats, naming, progress, read, safe, source};

pub mod atomic;
pub mod confined;
pub mod spill;
pub mod summary;
