//! The run as Arrow tables: ops, kernels, collectives, steps and ranks. One
//! record batch per rank, so a rank's names go in once as a dictionary and
//! a consumer (Parquet, Python through the Arrow C stream) never sees a
//! second copy of them. Columns are documented in `docs/schema.md`; a change
//! of meaning or a removed column raises `SCHEMA_VERSION`.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{StringBuilder, StringDictionaryBuilder, UInt32Builder, UInt64Builder};
use arrow_array::types::{Int32Type, Int8Type};
use arrow_array::{
    ArrayRef, DictionaryArray, Int32Array, Int64Array, RecordBatch, StringArray, UInt32Array,
};
use arrow_schema::{ArrowError, DataType, Field, Schema, SchemaRef};

use crate::metrics::Ctx;
use crate::model::{Ns, RankTimeline, StrId};

/// The version of the exported tables' layout (Parquet files, Python tables,
/// the Perfetto file's metadata).
pub const SCHEMA_VERSION: u32 = 1;

/// The tables, by the name they are exported under.
pub const TABLES: [&str; 5] = ["ops", "kernels", "collectives", "steps", "ranks"];

/// One table: its schema and its batches (one per rank for the op tables).
#[derive(Debug, Clone)]
pub struct Table {
    pub schema: SchemaRef,
    pub batches: Vec<RecordBatch>,
}

impl Table {
    #[cfg(test)]
    pub(crate) fn rows(&self) -> usize {
        self.batches.iter().map(RecordBatch::num_rows).sum()
    }
}

/// Builds the table called `name` (one of [`TABLES`]) from the loaded
/// timelines; `None` for other names.
pub(crate) fn table(ctx: &Ctx, name: &str) -> Option<Result<Table, ArrowError>> {
    Some(match name {
        "collectives" => collectives(ctx),
        "ranks" => ranks(ctx),
        _ => {
            let (schema, make) = per_rank(name)?;
            let mut batches = Vec::with_capacity(ctx.ranks.len());
            super::Ops::Loaded
                .map_ranks(
                    ctx,
                    &|t| make(&t, &schema).map_err(|e| e.to_string()),
                    &mut |b| {
                        batches.push(b);
                        Ok(())
                    },
                )
                .map_err(ArrowError::ComputeError)
                .map(|()| Table { schema, batches })
        }
    })
}

/// The schema of the table called `name`; `None` for other names.
pub fn schema_of(name: &str) -> Option<SchemaRef> {
    match name {
        "collectives" => Some(collectives_schema()),
        "ranks" => Some(ranks_schema()),
        _ => per_rank(name).map(|(s, _)| s),
    }
}

/// A rank's batch of a table made from a rank's every op.
type RankBatch = fn(&RankTimeline, &SchemaRef) -> Result<RecordBatch, ArrowError>;

/// The tables made a rank at a time from its every op: their schema and
/// how a rank's batch is made.
fn per_rank(name: &str) -> Option<(SchemaRef, RankBatch)> {
    Some(match name {
        "ops" => (ops_schema(), rank_ops as RankBatch),
        "kernels" => (kernels_schema(), rank_kernels),
        "steps" => (steps_schema(), rank_steps),
        _ => return None,
    })
}

/// The table called `name` (one of [`TABLES`]) a batch at a time to `take`,
/// in the order [`table`] holds them: the tables of every op read each
/// rank's ops from `ops` when its turn comes, so memory holds a few ranks'
/// ops (and the batch being written), not the run's.
pub fn stream(
    ctx: &Ctx,
    ops: super::Ops,
    name: &str,
    take: &mut dyn FnMut(RecordBatch) -> Result<(), String>,
) -> Result<(), String> {
    let (schema, make) = match per_rank(name) {
        Some(p) => p,
        None if name == "collectives" => {
            return collective_batches(ctx, &collectives_schema(), take)
        }
        None => {
            let t = table(ctx, name)
                .ok_or_else(|| format!("no table {name}"))?
                .map_err(|e| e.to_string())?;
            return t.batches.into_iter().try_for_each(take);
        }
    };
    ops.map_ranks(ctx, &|t| make(&t, &schema).map_err(|e| e.to_string()), take)
}

fn schema(fields: Vec<Field>) -> SchemaRef {
    let meta = HashMap::from([(
        "ccl_bench.schema_version".to_owned(),
        SCHEMA_VERSION.to_string(),
    )]);
    Arc::new(Schema::new_with_metadata(fields, meta))
}

fn dict32() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

fn dict8() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int8), Box::new(DataType::Utf8))
}

/// A rank's names as a dictionary column: the interner is the dictionary,
/// the ids are the keys.
fn names(t: &RankTimeline, ids: impl Iterator<Item = StrId>) -> Result<ArrayRef, ArrowError> {
    let keys = ids
        .map(|id| {
            i32::try_from(id.0).map_err(|_| ArrowError::ComputeError("too many names".into()))
        })
        .collect::<Result<Int32Array, _>>()?;
    let values = StringArray::from_iter_values(t.strings.iter());
    Ok(Arc::new(DictionaryArray::<Int32Type>::try_new(
        keys,
        Arc::new(values),
    )?))
}

/// A column of a few distinct labels (classes, kinds), dictionary encoded.
fn labels<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    let mut b = StringDictionaryBuilder::<Int8Type>::new();
    for v in values {
        b.append_option(v);
    }
    Arc::new(b.finish())
}

fn ops_schema() -> SchemaRef {
    schema(vec![
        Field::new("rank", DataType::UInt32, false),
        Field::new("start_ns", DataType::Int64, false),
        Field::new("dur_ns", DataType::Int64, false),
        Field::new("name", dict32(), false),
        Field::new("activity", dict8(), false),
        Field::new("class", dict8(), false),
        Field::new("collective", dict8(), true),
        Field::new("stream", DataType::UInt32, false),
        Field::new("device", DataType::UInt32, false),
        Field::new("step", DataType::Int64, true),
        Field::new("measured", DataType::Boolean, false),
        Field::new("bytes", DataType::UInt64, true),
        Field::new("message_bytes", DataType::UInt64, true),
        Field::new("process_group", DataType::Utf8, true),
        Field::new("group_size", DataType::UInt32, true),
        Field::new("launch_ns", DataType::Int64, false),
    ])
}

/// Every device op (kernel, memory copy or set) of a rank, on the aligned
/// clock: a batch of the `ops` table.
fn rank_ops(t: &RankTimeline, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let n = t.ops.len();
    let meta = |o: &crate::model::DeviceOp| t.coll_meta(o);
    let mut pg = StringBuilder::new();
    let mut group = UInt32Builder::with_capacity(n);
    let mut msg = UInt64Builder::with_capacity(n);
    for o in &t.ops {
        let m = meta(o);
        pg.append_option(m.and_then(|m| m.pg_name).map(|id| t.name(id)));
        group.append_option(m.and_then(|m| m.group_size));
        msg.append_option(m.and_then(|m| m.in_bytes()));
    }
    let step: Int64Array = t
        .ops
        .iter()
        .map(|o| o.step.get().map(|i| t.steps[i as usize].number))
        .collect();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from(vec![t.rank; n])),
        Arc::new(Int64Array::from_iter_values(
            t.ops.iter().map(|o| o.start.get()),
        )),
        Arc::new(Int64Array::from_iter_values(
            t.ops.iter().map(|o| o.dur.get()),
        )),
        names(t, t.ops.iter().map(|o| o.name))?,
        labels(t.ops.iter().map(|o| Some(o.activity.name()))),
        labels(t.ops.iter().map(|o| Some(o.class.name()))),
        labels(t.ops.iter().map(|o| o.coll.map(|c| c.name()))),
        Arc::new(UInt32Array::from_iter_values(
            t.ops.iter().map(|o| o.stream),
        )),
        Arc::new(UInt32Array::from_iter_values(
            t.ops.iter().map(|o| o.device),
        )),
        Arc::new(step),
        Arc::new(arrow_array::BooleanArray::from_iter(
            t.ops.iter().map(|o| Some(t.counts(o.step))),
        )),
        Arc::new(
            t.ops
                .iter()
                .map(|o| o.bytes())
                .collect::<arrow_array::UInt64Array>(),
        ),
        Arc::new(msg.finish()),
        Arc::new(pg.finish()),
        Arc::new(group.finish()),
        Arc::new(Int64Array::from_iter_values(
            t.ops.iter().map(|o| o.launch.get()),
        )),
    ];
    RecordBatch::try_new(schema.clone(), columns)
}

fn kernels_schema() -> SchemaRef {
    schema(vec![
        Field::new("rank", DataType::UInt32, false),
        Field::new("name", DataType::Utf8, false),
        Field::new("activity", dict8(), false),
        Field::new("class", dict8(), false),
        Field::new("count", DataType::UInt64, false),
        Field::new("total_ns", DataType::Int64, false),
        Field::new("mean_ns", DataType::Int64, false),
        Field::new("min_ns", DataType::Int64, false),
        Field::new("max_ns", DataType::Int64, false),
        Field::new("share_pct", DataType::Float64, false),
    ])
}

/// Per op name of a rank: how often it ran and for how long (a batch of
/// the `kernels` table).
fn rank_kernels(t: &RankTimeline, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    struct Agg {
        first: usize,
        count: u64,
        total: Ns,
        min: Ns,
        max: Ns,
    }
    let mut by: HashMap<(StrId, crate::model::Activity), Agg> = HashMap::new();
    for (i, o) in t.ops.iter().enumerate() {
        let a = by.entry((o.name, o.activity)).or_insert(Agg {
            first: i,
            count: 0,
            total: Ns::ZERO,
            min: Ns::MAX,
            max: Ns::ZERO,
        });
        a.count += 1;
        a.total += o.dur;
        a.min = a.min.min(o.dur);
        a.max = a.max.max(o.dur);
    }
    let all: Ns = by.values().map(|a| a.total).sum();
    let mut rows: Vec<_> = by.into_values().collect();
    // Most time first; ties in order of appearance, so the table is stable.
    rows.sort_by_key(|a| (std::cmp::Reverse(a.total), a.first));
    let op = |a: &Agg| &t.ops[a.first];
    let share = |a: &Agg| {
        if all > Ns::ZERO {
            a.total.as_f64() / all.as_f64() * 100.0
        } else {
            0.0
        }
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from(vec![t.rank; rows.len()])),
        Arc::new(StringArray::from_iter_values(
            rows.iter().map(|a| t.name(op(a).name)),
        )),
        labels(rows.iter().map(|a| Some(op(a).activity.name()))),
        labels(rows.iter().map(|a| Some(op(a).class.name()))),
        Arc::new(arrow_array::UInt64Array::from_iter_values(
            rows.iter().map(|a| a.count),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|a| a.total.get()),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|a| (a.total / a.count.max(1) as i64).get()),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|a| a.min.get()),
        )),
        Arc::new(Int64Array::from_iter_values(
            rows.iter().map(|a| a.max.get()),
        )),
        Arc::new(arrow_array::Float64Array::from_iter_values(
            rows.iter().map(share),
        )),
    ];
    RecordBatch::try_new(schema.clone(), columns)
}

fn collectives_schema() -> SchemaRef {
    schema(vec![
        Field::new("collective_id", DataType::UInt32, false),
        Field::new("group", DataType::Utf8, false),
        Field::new("role", dict8(), true),
        Field::new("seq", DataType::UInt32, false),
        Field::new("rank", DataType::UInt32, false),
        Field::new("kind", dict8(), true),
        Field::new("name", DataType::Utf8, false),
        Field::new("message_bytes", DataType::UInt64, true),
        Field::new("group_size", DataType::UInt32, false),
        Field::new("step", DataType::Int64, true),
        Field::new("start_ns", DataType::Int64, false),
        Field::new("end_ns", DataType::Int64, false),
        Field::new("wait_ns", DataType::Int64, false),
        Field::new("transfer_ns", DataType::Int64, false),
        Field::new("last_rank", DataType::UInt32, false),
        Field::new("last_by_ns", DataType::Int64, false),
    ])
}

/// One row per member of each collective matched across ranks: when it
/// started and ended on the aligned clock, how long it waited for the last
/// member, and who that was.
pub(crate) fn collectives(ctx: &Ctx) -> Result<Table, ArrowError> {
    let schema = collectives_schema();
    let mut batches = Vec::new();
    collective_batches(ctx, &schema, &mut |b| {
        batches.push(b);
        Ok(())
    })
    .map_err(ArrowError::ComputeError)?;
    Ok(Table { schema, batches })
}

/// Members a batch of the `collectives` table holds at most: it has a row
/// per communication op of the run, too many to hold at once.
const MEMBERS_PER_BATCH: usize = 1 << 16;

/// The `collectives` table's batches, in order, to `take`: each of whole
/// collectives, about [`MEMBERS_PER_BATCH`] members (one, empty, when no
/// collective is matched). The members are read in one pass over the run's
/// collectives (see `Ctx::each_with_members`).
fn collective_batches(
    ctx: &Ctx,
    schema: &SchemaRef,
    take: &mut dyn FnMut(RecordBatch) -> Result<(), String>,
) -> Result<(), String> {
    let mut rows = Vec::new();
    let mut members: Vec<(usize, crate::derive::instances::Member)> = Vec::new();
    let (mut taken, mut failed) = (false, None);
    let mut flush = |rows: &mut Vec<_>, members: &mut Vec<_>| -> Result<(), String> {
        let batch = collectives_of(ctx, schema, rows, members).map_err(|e| e.to_string());
        rows.clear();
        members.clear();
        take(batch?)
    };
    ctx.each_with_members(|row, of_row| {
        if failed.is_some() {
            return;
        }
        if !rows.is_empty() && members.len() + of_row.len() > MEMBERS_PER_BATCH {
            taken = true;
            if let Err(e) = flush(&mut rows, &mut members) {
                failed = Some(e);
                return;
            }
        }
        members.extend(of_row.iter().map(|m| (rows.len(), m.clone())));
        rows.push(row.clone());
    });
    if let Some(e) = failed {
        return Err(e);
    }
    if !rows.is_empty() || !taken {
        flush(&mut rows, &mut members)?;
    }
    Ok(())
}

/// The `collectives` table's rows of the collectives `rows`, whose members
/// are `members` (each with its row's index in `rows`).
fn collectives_of(
    ctx: &Ctx,
    schema: &SchemaRef,
    rows: &[crate::derive::instances::InstanceRow],
    members: &[(usize, crate::derive::instances::Member)],
) -> Result<RecordBatch, ArrowError> {
    let each = || members.iter().map(|(i, m)| (&rows[*i], m));
    let u32_of = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from_iter_values(
            each().map(|(r, _)| u32_of(r.id)),
        )),
        // Byte arrays need an iterator of known length; `each` is a flat map.
        Arc::new(each().map(|(r, _)| Some(r.group)).collect::<StringArray>()),
        labels(each().map(|(r, _)| r.role.map(|k| k.name()))),
        Arc::new(UInt32Array::from_iter_values(
            each().map(|(r, _)| u32_of(r.seq)),
        )),
        Arc::new(UInt32Array::from_iter_values(each().map(|(_, m)| m.rank))),
        labels(each().map(|(r, _)| r.kind.map(|k| k.name()))),
        Arc::new(
            each()
                .map(|(_, m)| Some(ctx.trace.ranks[m.index as usize].name(m.name)))
                .collect::<StringArray>(),
        ),
        Arc::new(
            each()
                .map(|(r, _)| r.bytes)
                .collect::<arrow_array::UInt64Array>(),
        ),
        Arc::new(UInt32Array::from_iter_values(each().map(|(r, _)| r.size))),
        Arc::new(
            each()
                .map(|(_, m)| m.step(ctx.trace))
                .collect::<Int64Array>(),
        ),
        Arc::new(Int64Array::from_iter_values(
            each().map(|(_, m)| m.start.get()),
        )),
        Arc::new(Int64Array::from_iter_values(
            each().map(|(_, m)| m.end().get()),
        )),
        Arc::new(Int64Array::from_iter_values(
            each().map(|(_, m)| m.wait.get()),
        )),
        Arc::new(Int64Array::from_iter_values(
            each().map(|(_, m)| m.transfer.get()),
        )),
        Arc::new(UInt32Array::from_iter_values(
            each().map(|(r, _)| r.last_rank),
        )),
        Arc::new(Int64Array::from_iter_values(
            each().map(|(r, _)| r.last_by.get()),
        )),
    ];
    RecordBatch::try_new(schema.clone(), columns)
}

fn steps_schema() -> SchemaRef {
    schema(vec![
        Field::new("rank", DataType::UInt32, false),
        Field::new("step", DataType::Int64, false),
        Field::new("start_ns", DataType::Int64, false),
        Field::new("end_ns", DataType::Int64, false),
        Field::new("dur_ns", DataType::Int64, false),
        Field::new("measured", DataType::Boolean, false),
        Field::new("ops", DataType::UInt64, false),
    ])
}

/// Every step of a rank, with whether per-step metrics use it (a batch of
/// the `steps` table).
fn rank_steps(t: &RankTimeline, schema: &SchemaRef) -> Result<RecordBatch, ArrowError> {
    let mut ops = vec![0u64; t.steps.len()];
    for o in &t.ops {
        if let Some(s) = o.step.get() {
            ops[s as usize] += 1;
        }
    }
    let measured = t.measured();
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from(vec![t.rank; t.steps.len()])),
        Arc::new(Int64Array::from_iter_values(
            t.steps.iter().map(|s| s.number),
        )),
        Arc::new(Int64Array::from_iter_values(
            t.steps.iter().map(|s| s.start.get()),
        )),
        Arc::new(Int64Array::from_iter_values(
            t.steps.iter().map(|s| s.end.get()),
        )),
        Arc::new(Int64Array::from_iter_values(
            t.steps.iter().map(|s| s.dur().get()),
        )),
        Arc::new(arrow_array::BooleanArray::from_iter(
            (0..t.steps.len()).map(|i| Some(measured.contains(&i))),
        )),
        Arc::new(arrow_array::UInt64Array::from(ops)),
    ];
    RecordBatch::try_new(schema.clone(), columns)
}

fn ranks_schema() -> SchemaRef {
    schema(vec![
        Field::new("rank", DataType::UInt32, false),
        Field::new("source", DataType::Utf8, false),
        Field::new("format", DataType::Utf8, false),
        Field::new("ops", DataType::UInt64, false),
        Field::new("steps", DataType::UInt64, false),
        Field::new("clock_offset_ns", DataType::Int64, true),
        Field::new("step_time_ns", DataType::Int64, true),
        Field::new("span_ns", DataType::Int64, false),
        Field::new("busy_ns", DataType::Int64, false),
        Field::new("compute_ns", DataType::Int64, false),
        Field::new("comm_ns", DataType::Int64, false),
        Field::new("exposed_comm_ns", DataType::Int64, false),
        Field::new("waiting_ns", DataType::Int64, false),
        Field::new("idle_ns", DataType::Int64, false),
        Field::new("caused_wait_ns", DataType::Int64, false),
        Field::new("last_arrivals", DataType::UInt64, false),
        Field::new("matched_collectives", DataType::UInt64, false),
    ])
}

/// One row per rank: where it came from, its clock offset, and where its
/// measured steps went (means per step, as the Summary's budget).
pub(crate) fn ranks(ctx: &Ctx) -> Result<Table, ArrowError> {
    let schema = ranks_schema();
    let rows = ctx.rank_rows();
    let offset = |rank: u32| {
        ctx.trace
            .offsets
            .as_ref()
            .and_then(|o| o.iter().find(|o| o.rank == rank))
            .map(|o| o.offset.get())
    };
    let ts = &ctx.ranks;
    let i64s = |f: &dyn Fn(&crate::derive::RankRow) -> i64| {
        Arc::new(Int64Array::from_iter_values(rows.iter().map(f))) as ArrayRef
    };
    let columns: Vec<ArrayRef> = vec![
        Arc::new(UInt32Array::from_iter_values(ts.iter().map(|t| t.rank))),
        Arc::new(StringArray::from_iter_values(
            ts.iter().map(|t| t.source.display().to_string()),
        )),
        Arc::new(StringArray::from_iter_values(
            ts.iter().map(|t| t.format.name()),
        )),
        // From the stats: a rank opened lean holds only its collectives.
        Arc::new(arrow_array::UInt64Array::from_iter_values(
            ctx.stats().iter().map(|s| s.ops as u64),
        )),
        Arc::new(arrow_array::UInt64Array::from_iter_values(
            ts.iter().map(|t| t.steps.len() as u64),
        )),
        Arc::new(ts.iter().map(|t| offset(t.rank)).collect::<Int64Array>()),
        Arc::new(
            rows.iter()
                .map(|r| r.step_time.map(Ns::get))
                .collect::<Int64Array>(),
        ),
        i64s(&|r| r.span.get()),
        i64s(&|r| r.busy.get()),
        i64s(&|r| r.compute.get()),
        i64s(&|r| r.comm.get()),
        i64s(&|r| r.exposed_comm.get()),
        i64s(&|r| r.waiting.get()),
        i64s(&|r| r.idle.get()),
        i64s(&|r| r.caused.get()),
        Arc::new(arrow_array::UInt64Array::from_iter_values(
            rows.iter().map(|r| r.last as u64),
        )),
        Arc::new(arrow_array::UInt64Array::from_iter_values(
            rows.iter().map(|r| r.matched as u64),
        )),
    ];
    let batch = RecordBatch::try_new(schema.clone(), columns)?;
    Ok(Table {
        schema,
        batches: vec![batch],
    })
}

#[cfg(test)]
mod tests {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, UInt32Type};

    use super::*;
    use crate::metrics::testing::trace;
    use crate::synth::late_pair;

    fn i64s(b: &RecordBatch, col: &str) -> Vec<Option<i64>> {
        b.column_by_name(col)
            .unwrap()
            .as_primitive::<Int64Type>()
            .iter()
            .collect()
    }

    #[test]
    fn collectives_say_who_waited_for_whom() {
        // late_pair: rank 0 starts the all-reduce at 10 µs, rank 1 at 40 µs,
        // both end at 60 µs: rank 0 waits 30 µs, then both transfer 20 µs.
        let t = trace(&late_pair());
        let ctx = Ctx::new(&t, None).unwrap();
        let c = collectives(&ctx).unwrap();
        assert_eq!(c.rows(), 2);
        let b = &c.batches[0];
        let ranks: Vec<_> = b
            .column_by_name("rank")
            .unwrap()
            .as_primitive::<UInt32Type>()
            .values()
            .to_vec();
        assert_eq!(ranks, [0, 1]);
        assert_eq!(i64s(b, "wait_ns"), [Some(30_000), Some(0)]);
        assert_eq!(i64s(b, "transfer_ns"), [Some(20_000), Some(20_000)]);
        assert_eq!(i64s(b, "end_ns"), [Some(60_000), Some(60_000)]);
        assert_eq!(i64s(b, "last_by_ns"), [Some(30_000), Some(30_000)]);
        let last = b.column_by_name("last_rank").unwrap();
        assert_eq!(last.as_primitive::<UInt32Type>().value(0), 1);
        assert_eq!(last.null_count(), 0);
        // all_reduce_f32(1, 2): one f32 element.
        let bytes = b.column_by_name("message_bytes").unwrap();
        assert_eq!(
            bytes
                .as_primitive::<arrow_array::types::UInt64Type>()
                .value(0),
            4
        );
    }

    #[test]
    fn ops_are_one_batch_per_rank_with_names_as_a_dictionary() {
        let t = trace(&late_pair());
        let ctx = Ctx::new(&t, None).unwrap();
        let ops = table(&ctx, "ops").unwrap().unwrap();
        assert_eq!((ops.batches.len(), ops.rows()), (2, 2));
        let b = &ops.batches[0];
        assert_eq!(i64s(b, "start_ns"), [Some(10_000)]);
        assert_eq!(i64s(b, "dur_ns"), [Some(50_000)]);
        assert_eq!(i64s(b, "step"), [Some(1)]);
        let names = b
            .column_by_name("name")
            .unwrap()
            .as_dictionary::<Int32Type>();
        let values = names.values().as_string::<i32>();
        let key = names.keys().value(0) as usize;
        assert_eq!(values.value(key), "ncclDevKernel_AllReduce_Sum_f32_RING_LL");
        let kind = b
            .column_by_name("collective")
            .unwrap()
            .as_dictionary::<Int8Type>();
        let kinds = kind.values().as_string::<i32>();
        assert_eq!(kinds.value(kind.keys().value(0) as usize), "all_reduce");
        assert_eq!(ops.schema.metadata()["ccl_bench.schema_version"], "1");
    }

    #[test]
    fn kernels_steps_and_ranks() {
        let t = trace(&late_pair());
        let ctx = Ctx::new(&t, None).unwrap();
        let k = table(&ctx, "kernels").unwrap().unwrap();
        assert_eq!(k.rows(), 2);
        assert_eq!(i64s(&k.batches[1], "total_ns"), [Some(20_000)]);
        let share = k.batches[1].column_by_name("share_pct").unwrap();
        assert_eq!(
            share
                .as_primitive::<arrow_array::types::Float64Type>()
                .value(0),
            100.0
        );
        let s = table(&ctx, "steps").unwrap().unwrap();
        assert_eq!(i64s(&s.batches[0], "dur_ns"), [Some(100_000)]);
        let r = ranks(&ctx).unwrap();
        let b = &r.batches[0];
        // Not aligned (the test trace keeps each rank's clock): no offset.
        assert_eq!(i64s(b, "clock_offset_ns"), [None, None]);
        // One step of 100 µs: rank 0 has 50 µs of communication, rank 1 20.
        assert_eq!(i64s(b, "comm_ns"), [Some(50_000), Some(20_000)]);
        assert_eq!(i64s(b, "caused_wait_ns"), [Some(0), Some(30_000)]);
    }

    #[test]
    fn every_named_table_builds() {
        let t = trace(&crate::synth::two_rank_example());
        let ctx = Ctx::new(&t, None).unwrap();
        for name in TABLES {
            let table = table(&ctx, name).unwrap().unwrap();
            assert!(table.rows() > 0, "{name} is empty");
        }
        assert!(table(&ctx, "nope").is_none());
    }
}
