//! Summaries: a run's inputs as they were read, in Parquet tables that a
//! cluster writes in parallel (`ccl-bench summarize`, one shard per task)
//! and any command opens as a trace directory without parsing a trace.
//!
//! Layout of a summary folder (documented in docs/summary.md):
//! `ccl-bench-summary.json` (the manifest), `inputs/<key>.json` (one entry
//! per input), and one folder per table, each file a pack of the timelines
//! of up to 64 small inputs (or one large) with `rank` and `part` columns:
//! `ops/<pack>.parquet`, `steps/...`, `colls/...`, `names/...`,
//! `annotations/...`, `cpu/...`, plus `memory/`, `et/` and `card/`; and for
//! the reduce, each timeline's collectives (`comm/...`) and figures
//! (`stats/<pack>.json`, a list); for wide views, each lane's time per time
//! bin (`coverage/...`). A whole summary also holds every entry in one
//! index, beside the small ranks' tables the reduce reads, gathered
//! (`reduce/`).

pub mod annex;
pub mod columns;
pub mod kept;
mod listed;
pub mod manifest;
pub mod open;
pub mod pages;
pub mod parquet_file;
mod placed;
pub mod read;
mod recent;
pub mod reduce;
pub mod shard;
pub mod stats;
pub mod write;

pub use manifest::MANIFEST;
pub use open::is_summary;
pub use shard::Shard;
pub use write::{summarize, summarize_with, Options, Report};

use std::path::{Path, PathBuf};

/// Where a summary of `trace` stands beside it: `runs/x` → `runs/x.sum`.
pub fn beside(trace: &Path) -> Option<PathBuf> {
    let name = trace.file_name()?;
    let mut sum = name.to_os_string();
    sum.push(".sum");
    Some(trace.with_file_name(sum))
}

/// Where a summary of `trace` lives in the cache folder `cache`: by its
/// name and its absolute path's hash, so two runs named alike do not meet.
pub fn cached(cache: &Path, trace: &Path) -> crate::error::Result<PathBuf> {
    let abs = std::fs::canonicalize(trace).map_err(|source| crate::error::Error::Io {
        path: trace.to_owned(),
        source,
    })?;
    let name = abs
        .file_name()
        .map_or_else(|| "trace".into(), |n| n.to_string_lossy());
    let key = manifest::key(&abs.to_string_lossy());
    Ok(cache.join(format!("{name}-{}", &key[..12])))
}
