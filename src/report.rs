//! Output formats for evaluated metrics: a human table, JSON and CSV.

pub mod collectives;
pub mod compare;
mod csv;
pub mod gate;
pub mod hang;
pub use crate::human;
pub mod json;
pub mod ops;
pub mod overview;
pub use crate::safe;
pub mod stragglers;
mod table;

use std::io::{self, Write};

use crate::metrics::{Metric, Outcome};
use crate::model::Ns;

/// How a report is written: a table for people, JSON or CSV for tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
    Csv,
}

/// One evaluated metric.
pub struct Row {
    pub metric: &'static Metric,
    pub outcome: Outcome,
}

impl Row {
    /// (min, rank of min, max, rank of max) over per-rank values, when there are ≥ 2.
    pub(crate) fn spread(&self) -> Option<((u32, f64), (u32, f64))> {
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
#[derive(Debug)]
pub struct About {
    pub source: String,
    pub ranks: Vec<u32>,
    pub ops: usize,
    /// Ranks with a CUDA memory snapshot.
    pub memory: Vec<u32>,
    /// Ranks with an execution trace.
    pub et: Vec<u32>,
    /// Clock offsets applied to put ranks on rank 0's clock (ns, spread, samples).
    pub offsets: Vec<crate::model::trace::Offset>,
    /// Which steps per-step metrics use.
    pub steps: String,
    /// "GPU" or "TPU" (see [`crate::model::Trace::accelerator`]).
    pub accelerator: &'static str,
}

impl About {
    /// What `ctx` covers of `trace`.
    pub fn of(ctx: &crate::metrics::Ctx) -> Self {
        let trace = ctx.trace;
        Self {
            source: trace.source.display().to_string(),
            ranks: ctx.ranks.iter().map(|r| r.rank).collect(),
            ops: ctx.stats().iter().map(|s| s.ops).sum(),
            memory: trace.memory.iter().map(|m| m.rank).collect(),
            et: trace.et.iter().map(|e| e.rank).collect(),
            offsets: trace.offsets.clone().unwrap_or_default(),
            steps: crate::model::timeline::steps_used(&ctx.ranks),
            accelerator: trace.accelerator(),
        }
    }

    /// One line naming the applied clock offsets, when any rank was moved.
    pub(crate) fn offsets_line(&self) -> Option<String> {
        let moved: Vec<String> = self
            .offsets
            .iter()
            .skip(1)
            .filter(|o| o.samples > 0 && o.offset != Ns::ZERO)
            .map(|o| {
                format!(
                    "r{} {}{} (±{})",
                    o.rank,
                    if o.offset >= Ns::ZERO { "+" } else { "" },
                    crate::model::time::human(o.offset),
                    crate::model::time::human(o.spread)
                )
            })
            .collect();
        (!moved.is_empty()).then(|| {
            format!(
                "clocks aligned to rank {} on shared collective end times (median, ± median deviation): {}",
                self.offsets.first().map_or(0, |o| o.rank),
                moved.join(", ")
            )
        })
    }
}

/// Every metric evaluated on `ctx`, in registry order.
pub fn rows(ctx: &crate::metrics::Ctx) -> Vec<Row> {
    crate::metrics::METRICS
        .iter()
        .zip(crate::metrics::eval_all(ctx))
        .map(|(metric, outcome)| Row { metric, outcome })
        .collect()
}

pub(crate) fn write(
    format: Format,
    about: &About,
    rows: &[Row],
    out: &mut dyn Write,
) -> io::Result<()> {
    match format {
        Format::Table => table::write(about, rows, out),
        Format::Json => json::write(about, rows, out),
        Format::Csv => csv::write(rows, out),
    }
}
