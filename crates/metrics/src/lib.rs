//! ccl-metrics: what is computed from a run. Figures derived once per rank
//! (`derive`), the metric registry and its families (`metrics`), two runs
//! side by side (`compare`), the regression gate (`gate`), and the hang verdict from Flight Recorder dumps
//! (`metrics::hang`). It knows the model and the readers' leaf helpers, and
//! nothing that stores or shows.

pub use ccl_model as model;
pub use ccl_read::{human, read, synth};

pub mod compare;
pub mod derive;
pub mod gate;
pub mod metrics;
