//! `--format json`: one object with the trace summary and every metric. The
//! layout is documented in `docs/schema.md`; `schema_version` changes when a
//! field changes meaning or goes away (new fields do not change it).

use std::collections::BTreeMap;
use std::io::{self, Write};

use serde::Serialize;

use super::{About, Row};
use crate::metrics::Outcome;

/// The version of the `--metrics --format json` layout.
pub const SCHEMA_VERSION: u32 = 1;

#[derive(Serialize)]
struct Doc<'a> {
    schema_version: u32,
    trace: &'a str,
    ranks: &'a [u32],
    gpu_ops: usize,
    /// Which steps per-step metrics use.
    steps_used: &'a str,
    /// Per rank: the clock offset applied (ns), its spread and sample count.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    clock_offsets: Vec<OffsetJson>,
    metrics: Vec<MetricJson<'a>>,
}

#[derive(Serialize)]
struct OffsetJson {
    rank: u32,
    offset_ns: i64,
    spread_ns: i64,
    collectives: usize,
}

#[derive(Serialize)]
pub(crate) struct MetricJson<'a> {
    name: &'a str,
    unit: &'a str,
    value: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    not_applicable: Option<&'a str>,
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    per_rank: BTreeMap<String, f64>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    parts: Vec<Part<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    fraction: Option<&'a str>,
    about: &'a str,
}

#[derive(Serialize)]
pub(crate) struct Part<'a> {
    label: &'a str,
    value: f64,
}

/// One metric as the document lists it: value, unit, per-rank values,
/// parts, or why it does not apply.
pub(crate) fn metric(r: &Row) -> MetricJson<'_> {
    let mut m = MetricJson {
        name: r.metric.name,
        unit: r.metric.unit.symbol(),
        value: None,
        not_applicable: None,
        per_rank: BTreeMap::new(),
        parts: Vec::new(),
        note: None,
        fraction: None,
        about: r.metric.about,
    };
    match &r.outcome {
        Outcome::Value(v) => {
            m.value = Some(v.value);
            m.per_rank = v
                .per_rank
                .iter()
                .map(|(k, x)| (k.to_string(), *x))
                .collect();
            m.parts = v
                .parts
                .iter()
                .map(|(label, value)| Part {
                    label,
                    value: *value,
                })
                .collect();
            m.note = v.note.as_deref();
            m.fraction = v.fraction.as_deref();
        }
        Outcome::NotApplicable(why) => m.not_applicable = Some(why),
    }
    m
}

fn doc<'a>(about: &'a About, rows: &'a [Row]) -> Doc<'a> {
    let metrics = rows.iter().map(metric).collect();
    Doc {
        schema_version: SCHEMA_VERSION,
        trace: &about.source,
        ranks: &about.ranks,
        gpu_ops: about.ops,
        steps_used: &about.steps,
        clock_offsets: about
            .offsets
            .iter()
            .map(|o| OffsetJson {
                rank: o.rank,
                offset_ns: o.offset.get(),
                spread_ns: o.spread.get(),
                collectives: o.samples,
            })
            .collect(),
        metrics,
    }
}

/// The document as a JSON value (what the MCP server answers).
pub fn document(about: &About, rows: &[Row]) -> serde_json::Value {
    serde_json::to_value(doc(about, rows)).unwrap_or(serde_json::Value::Null)
}

pub fn write(about: &About, rows: &[Row], out: &mut dyn Write) -> io::Result<()> {
    let doc = doc(about, rows);
    serde_json::to_writer_pretty(&mut *out, &doc)?;
    writeln!(out)
}
