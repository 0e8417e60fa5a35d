//! ccl-bench: communication and compute metrics from multi-rank GPU profiler traces.
//!
//! Data flows one way:
//!
//! ```text
//! trace dir ─discover─▶ inputs ─read─▶ per-rank RankTimeline ─▶ Trace
//!           ─metrics─▶ Outcome (value | not applicable) ─▶ views (headless CLI, reports)
//! ```
//!
//! Nothing downstream reads files; nothing upstream knows about views.
//! - [`discover`]: which files in a directory are traces, of which rank.
//! - [`read`]: streaming, parallel readers into the [`model`].
//! - [`model`]: timelines, interval math, kernel classification.
//! - [`metrics`]: the metric registry and its families.
//! - [`headless`], [`report`], [`cli`]: the command-line views.
//! - [`synth`]: a deterministic trace writer for tests and samples.

mod answers;
mod baseline;
pub mod cli;
pub mod entry;
pub mod export;
pub mod fuzz;
pub mod headless;
mod kept;
mod mcp;

pub use ccl_model as model;
// The crates below the application, used by their modules' names.
pub use ccl_metrics::{compare, derive, gate, metrics};
pub use ccl_read::{
    discover, error, formats, human, naming, progress, read, safe, say, source, synth,
};
pub use ccl_store::{atomic, confined, spill, summary};
#[cfg(test)]
mod model_on_traces;
pub mod report;
pub mod session;
// What a load reads and reports, by the name the views and Python use.
pub use session::load;
pub mod tui;
