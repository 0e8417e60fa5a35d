//! ccl-read: from files to the timeline model. Sources (files, gzip), the
//! format table, discovery of a run's files, one reader per format, and the
//! synthetic traces the tests and the bundled sample are written from; with
//! the leaf helpers every layer above uses (errors, names, numbers and text
//! for people, progress). It knows the model and nothing above it.

pub use ccl_model as model;

pub mod discover;
pub mod error;
pub mod formats;
pub mod human;
pub mod memory;
pub mod naming;
pub mod progress;
pub mod read;
pub mod safe;
pub mod source;
pub mod synth;
