//! Output formats for evaluated metrics: a human table, JSON and CSV.

pub mod compare;
mod csv;
mod json;
mod table;

use std::io::{self, Write};

use crate::cli::Format;
use crate::metrics::{Metric, Outcome};

/// One evaluated metric.
pub struct Row {
    pub metric: &'static Metric,
    pub outcome: Outcome,
}

impl Row {
    /// (min, rank of min, max, rank of max) over per-rank values, when there are ≥ 2.
    pub fn spread(&self) -> Option<((u32, f64), (u32, f64))> {
        let Outcome::Value(m) = &self.outcome else {
            return None;
        };
        if m.per_rank.len() < 2 {
            return None;
        }
        let min = m
            .per_rank
            .iter()
            .copied()
            .min_by(|a, b| a.1.total_cmp(&b.1))?;
        let max = m
            .per_rank
            .iter()
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1))?;
        Some((min, max))
    }
}

/// What was loaded, for report headers.
pub struct About {
    pub source: String,
    pub ranks: Vec<u32>,
    pub ops: usize,
}

pub fn write(format: Format, about: &About, rows: &[Row], out: &mut dyn Write) -> io::Result<()> {
    match format {
        Format::Table => table::write(about, rows, out),
        Format::Json => json::write(about, rows, out),
        Format::Csv => csv::write(rows, out),
    }
}
