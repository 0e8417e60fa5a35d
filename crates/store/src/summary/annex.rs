//! The inputs that annotate a run, as tables and back: a memory snapshot's
//! samples and an execution trace's collectives.

use std::path::PathBuf;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{Int64Type, UInt64Type};
use arrow_array::{Array, ArrayRef, Int64Array, RecordBatch, StringArray, UInt64Array};
use arrow_schema::{ArrowError, DataType, Field, Schema};

use super::manifest::{EtMeta, MemoryMeta};
use crate::model::exec_trace::{EtColl, EtRank};
use crate::model::memory::{MemSample, MemState, MemoryTimeline, Phase, Samples};
use crate::model::CollKind;

fn schema(fields: &[(&str, DataType)]) -> Arc<Schema> {
    Arc::new(Schema::new(
        fields
            .iter()
            .map(|(n, t)| Field::new(*n, t.clone(), false))
            .collect::<Vec<_>>(),
    ))
}

pub(crate) fn memory_table(m: &MemoryTimeline) -> Result<RecordBatch, ArrowError> {
    let col = |f: fn(MemSample) -> i64| -> ArrayRef {
        Arc::new(Int64Array::from_iter_values(m.samples.iter().map(f)))
    };
    RecordBatch::try_new(
        schema(&[
            ("time_us", DataType::Int64),
            ("allocated", DataType::Int64),
            ("reserved", DataType::Int64),
            ("phase", DataType::Int64),
        ]),
        vec![
            col(|s| s.time_us),
            col(|s| s.allocated),
            col(|s| s.reserved),
            col(|s| s.phase.index() as i64),
        ],
    )
}

pub(crate) fn memory_meta(m: &MemoryTimeline, source: &str) -> MemoryMeta {
    MemoryMeta {
        source: source.to_owned(),
        end: [
            m.end.allocated,
            m.end.reserved,
            m.end.active,
            m.end.requested,
        ],
        allocs: m.allocs,
        frees: m.frees,
        peak_sites: m.peak_sites.clone(),
    }
}

fn ints<'a>(b: &'a RecordBatch, name: &str) -> Result<&'a [i64], String> {
    let a = b
        .column_by_name(name)
        .and_then(|c| c.as_primitive_opt::<Int64Type>())
        .filter(|a| a.null_count() == 0)
        .ok_or_else(|| format!("no column {name} of integers"))?;
    Ok(a.values())
}

pub(crate) fn memory_from(
    meta: &MemoryMeta,
    batches: &[RecordBatch],
) -> Result<MemoryTimeline, String> {
    let mut samples = Samples::default();
    for b in batches {
        let (t, a, r) = (
            ints(b, "time_us")?,
            ints(b, "allocated")?,
            ints(b, "reserved")?,
        );
        // A summary written before phases were kept has none: all are
        // `Before`, which the Memory tab shows as unknown.
        let phase = b
            .column_by_name("phase")
            .map(|_| ints(b, "phase"))
            .transpose()?;
        for i in 0..t.len() {
            let phase = match phase {
                Some(p) => Phase::from_index(p[i]).ok_or("a phase out of range")?,
                None => Phase::Before,
            };
            samples.push(MemSample {
                time_us: t[i],
                allocated: a[i],
                reserved: r[i],
                phase,
            });
        }
    }
    let [allocated, reserved, active, requested] = meta.end;
    Ok(MemoryTimeline {
        rank: 0,
        source: PathBuf::from(&meta.source),
        samples,
        end: MemState {
            allocated,
            reserved,
            active,
            requested,
        },
        allocs: meta.allocs,
        frees: meta.frees,
        peak_sites: meta.peak_sites.clone(),
    })
}

pub(crate) fn et_table(et: &EtRank) -> Result<RecordBatch, ArrowError> {
    let optional = |n: &str| Field::new(n, DataType::UInt64, true);
    let fields = vec![
        Field::new("kind", DataType::Utf8, false),
        Field::new("bytes", DataType::UInt64, false),
        optional("elem_size"),
        optional("seq"),
        optional("group_size"),
        Field::new("group_name", DataType::Utf8, true),
    ];
    let col = |f: fn(&EtColl) -> Option<u64>| -> ArrayRef {
        Arc::new(UInt64Array::from_iter(et.colls.iter().map(f)))
    };
    RecordBatch::try_new(
        Arc::new(Schema::new(fields)),
        vec![
            Arc::new(StringArray::from_iter_values(
                et.colls.iter().map(|c| c.kind.name()),
            )),
            Arc::new(UInt64Array::from_iter_values(
                et.colls.iter().map(|c| c.bytes),
            )),
            col(|c| c.elem_size),
            col(|c| c.seq),
            col(|c| c.group.map(u64::from)),
            Arc::new(StringArray::from_iter(
                et.colls.iter().map(|c| c.group_name.as_deref()),
            )),
        ],
    )
}

pub(crate) fn et_meta(et: &EtRank, source: &str) -> EtMeta {
    EtMeta {
        source: source.to_owned(),
        schema: et.schema.clone(),
    }
}

pub(crate) fn et_from(meta: &EtMeta, batches: &[RecordBatch]) -> Result<EtRank, String> {
    let mut colls = Vec::new();
    for b in batches {
        let kind = b
            .column_by_name("kind")
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or("no column kind of text")?;
        let bytes = b
            .column_by_name("bytes")
            .and_then(|c| c.as_primitive_opt::<UInt64Type>())
            .ok_or("no column bytes of integers")?;
        let optional = |name: &str| {
            b.column_by_name(name)
                .and_then(|c| c.as_primitive_opt::<UInt64Type>())
                .ok_or_else(|| format!("no column {name} of integers"))
        };
        let (elem_size, seq, group) = (
            optional("elem_size")?,
            optional("seq")?,
            optional("group_size")?,
        );
        let at = |a: &UInt64Array, i: usize| a.is_valid(i).then(|| a.value(i));
        let names = b
            .column_by_name("group_name")
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or("no column group_name of text")?;
        for i in 0..kind.len() {
            colls.push(EtColl {
                kind: CollKind::from_name(kind.value(i))
                    .ok_or_else(|| format!("unknown collective kind '{}'", kind.value(i)))?,
                bytes: bytes.value(i),
                elem_size: at(elem_size, i),
                seq: at(seq, i),
                group: at(group, i).and_then(|g| u32::try_from(g).ok()),
                group_name: names.is_valid(i).then(|| names.value(i).to_owned()),
            });
        }
    }
    Ok(EtRank {
        rank: 0,
        source: PathBuf::from(&meta.source),
        schema: meta.schema.clone(),
        colls,
    })
}
