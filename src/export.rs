//! What leaves ccl-bench besides text: the run as Arrow tables ([`tables`]),
//! written as Parquet ([`parquet`]) or handed to Python, and as one Chrome
//! trace file for Perfetto ([`perfetto`]).

pub mod parquet;
pub mod perfetto;
pub mod tables;

pub use tables::{Table, SCHEMA_VERSION, TABLES};
