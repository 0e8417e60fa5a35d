//! One rank timeline as Arrow tables and back, exactly: what a reader
//! produced is what the summary's reader returns. Names are stored as text
//! (dictionary-encoded, so DuckDB and polars read them without a join) and
//! mapped back to the timeline's own ids through its `names` table.

use std::collections::HashMap;
use std::sync::Arc;

use arrow_array::builder::{
    BooleanBuilder, Float64Builder, Int64Builder, StringDictionaryBuilder, UInt64Builder,
    UInt8Builder,
};
use arrow_array::cast::AsArray;
use arrow_array::types::{Float64Type, Int32Type, Int64Type, UInt32Type, UInt64Type, UInt8Type};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, UInt32Array};
use arrow_schema::{ArrowError, DataType, Field, Schema};
use parquet::arrow::arrow_reader::{RowSelection, RowSelector};

use crate::model::time::Ns;
use crate::model::{
    Activity, Annotation, CollKind, CollMeta, CpuKind, CpuOp, DeviceOp, Interner, KernelClass,
    RankTimeline, Slot, StrId, Work,
};

/// The tables of one timeline, by the folder each is written under.
pub const TABLES: [&str; 6] = ["names", "ops", "colls", "steps", "annotations", "cpu"];

type Res<T> = Result<T, ArrowError>;

fn batch(fields: Vec<(&str, DataType, bool)>, cols: Vec<ArrayRef>) -> Res<RecordBatch> {
    let schema = Schema::new(
        fields
            .into_iter()
            .map(|(n, t, null)| Field::new(n, t, null))
            .collect::<Vec<_>>(),
    );
    RecordBatch::try_new(Arc::new(schema), cols)
}

fn dict() -> DataType {
    DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8))
}

/// A text column, dictionary-encoded.
fn text<'a>(values: impl Iterator<Item = Option<&'a str>>) -> ArrayRef {
    let mut b = StringDictionaryBuilder::<Int32Type>::new();
    for v in values {
        b.append_option(v);
    }
    Arc::new(b.finish())
}

/// The timeline as its tables, in [`TABLES`] order.
pub fn to_tables(t: &RankTimeline) -> Res<Vec<RecordBatch>> {
    let name = |id: StrId| Some(t.name(id));
    let ops_batch = ops_table(t, &t.ops)?;
    let names = batch(
        vec![
            ("id", DataType::UInt32, false),
            ("name", DataType::Utf8, false),
        ],
        vec![
            Arc::new(UInt32Array::from_iter_values(0..t.strings.len() as u32)),
            Arc::new(StringArray::from_iter_values(t.strings.iter())),
        ],
    )?;

    let c = &t.colls;
    let opt_u64 = |f: &dyn Fn(&CollMeta) -> Option<u64>| -> ArrayRef {
        Arc::new(c.iter().map(f).collect::<arrow_array::UInt64Array>())
    };
    let colls = batch(
        vec![
            ("index", DataType::UInt32, false),
            ("kind", dict(), false),
            ("name", dict(), false),
            ("in_nelems", DataType::UInt64, true),
            ("out_nelems", DataType::UInt64, true),
            ("dtype_size", DataType::UInt64, true),
            ("group_size", DataType::UInt32, true),
            ("pg_name", dict(), true),
            ("pg_ranks", dict(), true),
            ("seq", DataType::UInt64, true),
            ("peer", DataType::UInt32, true),
        ],
        vec![
            Arc::new(UInt32Array::from_iter_values(0..c.len() as u32)),
            text(c.iter().map(|m| Some(m.kind.name()))),
            text(c.iter().map(|m| name(m.name))),
            opt_u64(&|m| m.in_nelems),
            opt_u64(&|m| m.out_nelems),
            opt_u64(&|m| m.dtype_size),
            Arc::new(c.iter().map(|m| m.group_size).collect::<UInt32Array>()),
            text(c.iter().map(|m| m.pg_name.map(|id| t.name(id)))),
            text(c.iter().map(|m| m.pg_ranks.map(|id| t.name(id)))),
            opt_u64(&|m| m.seq),
            Arc::new(c.iter().map(|m| m.peer).collect::<UInt32Array>()),
        ],
    )?;

    let steps = steps_table(t)?;

    let a = &t.annotations;
    let mut on_gpu = BooleanBuilder::with_capacity(a.len());
    for x in a.iter() {
        on_gpu.append_value(x.on_gpu);
    }
    let annotations = batch(
        vec![
            ("name", dict(), false),
            ("start_ns", DataType::Int64, false),
            ("end_ns", DataType::Int64, false),
            ("on_gpu", DataType::Boolean, false),
        ],
        vec![
            text(a.iter().map(|x| name(x.name))),
            Arc::new(arrow_array::Int64Array::from_iter_values(
                a.iter().map(|x| x.start.get()),
            )),
            Arc::new(arrow_array::Int64Array::from_iter_values(
                a.iter().map(|x| x.end.get()),
            )),
            Arc::new(on_gpu.finish()),
        ],
    )?;

    let cpu: Vec<(u64, &CpuOp)> = t
        .cpu
        .iter()
        .flat_map(|th| th.ops.iter().map(move |o| (th.tid, o)))
        .collect();
    let mut depth = UInt8Builder::with_capacity(cpu.len());
    let mut tid = UInt64Builder::with_capacity(cpu.len());
    for (t_id, o) in &cpu {
        depth.append_value(o.depth);
        tid.append_value(*t_id);
    }
    let cpu_batch = batch(
        vec![
            ("tid", DataType::UInt64, false),
            ("start_ns", DataType::Int64, false),
            ("dur_ns", DataType::Int64, false),
            ("name", dict(), false),
            ("kind", dict(), false),
            ("depth", DataType::UInt8, false),
            ("parent", DataType::UInt32, true),
        ],
        vec![
            Arc::new(tid.finish()),
            Arc::new(arrow_array::Int64Array::from_iter_values(
                cpu.iter().map(|(_, o)| o.start.get()),
            )),
            Arc::new(arrow_array::Int64Array::from_iter_values(
                cpu.iter().map(|(_, o)| o.dur.get()),
            )),
            text(cpu.iter().map(|(_, o)| name(o.name))),
            text(cpu.iter().map(|(_, o)| Some(cpu_kind_name(o.kind)))),
            Arc::new(depth.finish()),
            Arc::new(
                cpu.iter()
                    .map(|(_, o)| {
                        (o.parent != crate::model::timeline::NO_PARENT).then_some(o.parent)
                    })
                    .collect::<UInt32Array>(),
            ),
        ],
    )?;
    Ok(vec![names, ops_batch, colls, steps, annotations, cpu_batch])
}

/// The table of the rank's ops `ops` (all of them, or the collectives).
fn ops_table(t: &RankTimeline, ops: &[DeviceOp]) -> Res<RecordBatch> {
    let name = |id: StrId| Some(t.name(id));
    let i64s = |f: &dyn Fn(&DeviceOp) -> i64| -> ArrayRef {
        Arc::new(arrow_array::Int64Array::from_iter_values(ops.iter().map(f)))
    };
    let u32s = |f: &dyn Fn(&DeviceOp) -> Option<u32>| -> ArrayRef {
        Arc::new(ops.iter().map(f).collect::<UInt32Array>())
    };
    let work = |f: &dyn Fn(Work) -> Option<f64>| -> ArrayRef {
        let mut b = Float64Builder::with_capacity(ops.len());
        for o in ops {
            b.append_option(o.work.get().and_then(f));
        }
        Arc::new(b.finish())
    };
    let mut bytes = UInt64Builder::with_capacity(ops.len());
    for o in ops {
        bytes.append_option(o.bytes());
    }
    batch(
        vec![
            ("start_ns", DataType::Int64, false),
            ("dur_ns", DataType::Int64, false),
            ("name", dict(), false),
            ("activity", dict(), false),
            ("class", dict(), false),
            ("coll", dict(), true),
            ("stream", DataType::UInt32, false),
            ("device", DataType::UInt32, false),
            ("blocks", DataType::Float64, true),
            ("blocks_per_sm", DataType::Float64, true),
            ("bytes", DataType::UInt64, true),
            ("coll_index", DataType::UInt32, true),
            ("step_index", DataType::UInt32, true),
            ("launch_ns", DataType::Int64, false),
        ],
        vec![
            i64s(&|o| o.start.get()),
            i64s(&|o| o.dur.get()),
            text(ops.iter().map(|o| name(o.name))),
            text(ops.iter().map(|o| Some(o.activity.name()))),
            text(ops.iter().map(|o| Some(o.class.name()))),
            text(ops.iter().map(|o| o.coll.map(CollKind::name))),
            u32s(&|o| Some(o.stream)),
            u32s(&|o| Some(o.device)),
            work(&|w| match w {
                Work::Blocks(b) => Some(b),
                _ => None,
            }),
            work(&|w| match w {
                Work::BlocksPerSm(b) => Some(b),
                _ => None,
            }),
            Arc::new(bytes.finish()),
            u32s(&|o| o.meta.get()),
            u32s(&|o| o.step.get()),
            i64s(&|o| o.launch.get()),
        ],
    )
}

/// The ops a lean load keeps of a rank (`RankTimeline::slim`), with the
/// ops table's columns: what the reduce reads in place of every op when
/// the rank's figures were made in the map step (`summary::stats`).
pub(crate) fn comm_table(t: &RankTimeline) -> Res<RecordBatch> {
    let kept: Vec<DeviceOp> = t
        .ops
        .iter()
        .filter(|o| o.crosses_ranks())
        .cloned()
        .collect();
    ops_table(t, &kept)
}

/// The folder of the binned lanes (`derive::lanes::bins`).
pub const COVERAGE: &str = "coverage";

/// A rank's lanes binned in time (`derive::lanes::bins`): per level,
/// lane (a null stream for the rank's lane) and bin, the ops starting in it
/// and the time it is covered by compute, communication, their overlap,
/// copies and any of them. Times in ns on the rank's own clock.
pub(crate) fn coverage_table(t: &RankTimeline) -> Res<RecordBatch> {
    let bins = crate::derive::lanes::bins(t);
    let n = bins.len();
    let level: UInt32Array = bins.iter().map(|b| b.level).collect();
    let stream: UInt32Array = bins.iter().map(|b| b.stream).collect();
    let mut times: [Int64Builder; 7] = std::array::from_fn(|_| Int64Builder::with_capacity(n));
    let mut ops = UInt64Builder::with_capacity(n);
    for b in &bins {
        ops.append_value(b.ops);
        for (col, v) in times
            .iter_mut()
            .zip([b.start, b.len].iter().chain(&b.cover))
        {
            col.append_value(v.0);
        }
    }
    let [start, len, compute, comm, overlap, memory, busy] = times.map(|mut b| b.finish());
    batch(
        vec![
            ("level", DataType::UInt32, false),
            ("stream", DataType::UInt32, true),
            ("start", DataType::Int64, false),
            ("len", DataType::Int64, false),
            ("ops", DataType::UInt64, false),
            ("compute", DataType::Int64, false),
            ("comm", DataType::Int64, false),
            ("overlap", DataType::Int64, false),
            ("memory", DataType::Int64, false),
            ("busy", DataType::Int64, false),
        ],
        vec![
            Arc::new(level),
            Arc::new(stream),
            Arc::new(start),
            Arc::new(len),
            Arc::new(ops.finish()),
            Arc::new(compute),
            Arc::new(comm),
            Arc::new(overlap),
            Arc::new(memory),
            Arc::new(busy),
        ],
    )
}

/// The bins of one batch of a coverage table, checked: on the time range,
/// a level below 64, each bin covered at most its length.
pub(crate) fn bins_of(b: &RecordBatch) -> Result<Vec<crate::derive::lanes::Bin>, String> {
    use crate::model::time::in_range;
    let tb = COVERAGE;
    let b = &Rows::whole(b);
    let level = values::<UInt32Type>(b, tb, "level")?;
    let stream = options::<UInt32Type>(b, tb, "stream")?;
    let ops = values::<UInt64Type>(b, tb, "ops")?;
    let [start, len, compute, comm, overlap, memory, busy] = [
        "start", "len", "compute", "comm", "overlap", "memory", "busy",
    ]
    .map(|c| values::<Int64Type>(b, tb, c));
    let (start, len) = (start?, len?);
    let cover = [compute?, comm?, overlap?, memory?, busy?];
    (0..level.len())
        .map(|i| {
            let (s, l) = (Ns(start[i]), Ns(len[i]));
            let c: [Ns; 5] = std::array::from_fn(|k| Ns(cover[k][i]));
            if level[i] >= 64
                || !(in_range(s) && l > Ns::ZERO && in_range(s.saturating_add(l)))
                || c.iter().any(|&x| !(Ns::ZERO..=l).contains(&x))
            {
                return Err(bad(tb, "a bin out of range"));
            }
            Ok(crate::derive::lanes::Bin {
                level: level[i],
                stream: stream.at(i),
                start: s,
                len: l,
                ops: ops[i],
                cover: c,
            })
        })
        .collect()
}

/// Steps with partial sums a reduce (or a query) can add up without the ops:
/// per step, the device time of the ops launched in it, split as the
/// breakdown metrics split it. Times in ns.
fn steps_table(t: &RankTimeline) -> Res<RecordBatch> {
    let n = t.steps.len();
    let mut cols: [Int64Builder; 4] = std::array::from_fn(|_| Int64Builder::with_capacity(n));
    let mut ops = UInt64Builder::with_capacity(n);
    let mut launches = UInt64Builder::with_capacity(n);
    let mut launch_ns = Int64Builder::with_capacity(n);
    for (i, s) in crate::derive::steps::sums(t).iter().enumerate() {
        for (b, v) in cols
            .iter_mut()
            .zip([s.busy, s.compute, s.comm, s.exposed_comm])
        {
            b.append_value(v.get());
        }
        ops.append_value(s.ops);
        let l = t.launch_by_step.get(i);
        launches.append_option(l.map(|l| l.0));
        launch_ns.append_option(l.map(|l| l.1).map(Ns::get));
    }
    let [busy, compute, comm, exposed] = cols.map(|mut b| Arc::new(b.finish()) as ArrayRef);
    let s = &t.steps;
    batch(
        vec![
            ("index", DataType::UInt32, false),
            ("number", DataType::Int64, false),
            ("start_ns", DataType::Int64, false),
            ("end_ns", DataType::Int64, false),
            ("ops", DataType::UInt64, false),
            ("busy_ns", DataType::Int64, false),
            ("compute_ns", DataType::Int64, false),
            ("comm_ns", DataType::Int64, false),
            ("exposed_comm_ns", DataType::Int64, false),
            ("launches", DataType::UInt64, true),
            ("launch_ns", DataType::Int64, true),
        ],
        vec![
            Arc::new(UInt32Array::from_iter_values(0..n as u32)),
            Arc::new(arrow_array::Int64Array::from_iter_values(
                s.iter().map(|x| x.number),
            )),
            Arc::new(arrow_array::Int64Array::from_iter_values(
                s.iter().map(|x| x.start.get()),
            )),
            Arc::new(arrow_array::Int64Array::from_iter_values(
                s.iter().map(|x| x.end.get()),
            )),
            Arc::new(ops.finish()),
            busy,
            compute,
            comm,
            exposed,
            Arc::new(launches.finish()),
            Arc::new(launch_ns.finish()),
        ],
    )
}

fn cpu_kind_name(k: CpuKind) -> &'static str {
    match k {
        CpuKind::Op => "op",
        CpuKind::Annotation => "annotation",
        CpuKind::Runtime => "runtime",
    }
}

fn cpu_kind(s: &str) -> Option<CpuKind> {
    [CpuKind::Op, CpuKind::Annotation, CpuKind::Runtime]
        .into_iter()
        .find(|k| cpu_kind_name(*k) == s)
}

/// Why a table cannot be read back.
fn bad(table: &str, what: impl std::fmt::Display) -> String {
    format!("table {table}: {what}")
}

/// Rows `at` of one record batch, read where they lie: a part's rows of a
/// table several parts share. (A sliced batch is a few allocations a
/// column: 200,000 for a load of 1,024 small ranks.)
#[derive(Clone)]
pub struct Rows<'a> {
    pub(crate) batch: &'a RecordBatch,
    pub(crate) at: std::ops::Range<usize>,
}

impl<'a> Rows<'a> {
    pub(crate) fn whole(batch: &'a RecordBatch) -> Self {
        Self {
            batch,
            at: 0..batch.num_rows(),
        }
    }

    /// The rows `rows` (`[start, end)`) of a table decoded whole, batch by
    /// batch; rows past the table are refused.
    pub(crate) fn of(all: &'a [RecordBatch], (a, b): (u64, u64)) -> Result<Vec<Self>, String> {
        let total: u64 = all.iter().map(|x| x.num_rows() as u64).sum();
        if a > b || b > total {
            return Err(format!("rows {a}..{b} of a table of {total}"));
        }
        let mut out = Vec::new();
        let mut at = 0u64;
        for batch in all {
            let (s, e) = (at, at + batch.num_rows() as u64);
            at = e;
            let (lo, hi) = (a.max(s), b.min(e));
            if lo < hi {
                out.push(Self {
                    batch,
                    at: (lo - s) as usize..(hi - s) as usize,
                });
            }
        }
        Ok(out)
    }
}

/// A column by name.
fn col<'a>(r: &Rows<'a>, table: &str, name: &str) -> Result<&'a ArrayRef, String> {
    r.batch
        .column_by_name(name)
        .ok_or_else(|| bad(table, format!("no column {name}")))
}

fn prim<'a, T: arrow_array::ArrowPrimitiveType>(
    r: &Rows<'a>,
    table: &str,
    name: &str,
) -> Result<&'a arrow_array::PrimitiveArray<T>, String> {
    col(r, table, name)?
        .as_primitive_opt::<T>()
        .ok_or_else(|| bad(table, format!("column {name} has the wrong type")))
}

/// Non-null values of a column's rows (a null where none may be is
/// damage), read in place.
fn values<'a, T: arrow_array::ArrowPrimitiveType>(
    r: &Rows<'a>,
    table: &str,
    name: &str,
) -> Result<&'a [T::Native], String> {
    let a = prim::<T>(r, table, name)?;
    let at = r.at.clone();
    if a.null_count() > 0 && a.nulls().is_some_and(|n| at.clone().any(|i| n.is_null(i))) {
        return Err(bad(table, format!("nulls in column {name}")));
    }
    Ok(&a.values()[at])
}

/// A column whose values may be null, its rows from the given one on, read
/// in place; every value null where the column is absent. The values and
/// the null bits as slices: read per row and column (millions of ops), an
/// Arrow array's own accessors were calls.
struct Nullable<'a, T: arrow_array::ArrowPrimitiveType> {
    values: &'a [T::Native],
    nulls: Option<&'a arrow_buffer::NullBuffer>,
    from: usize,
}

impl<T: arrow_array::ArrowPrimitiveType> Nullable<'_, T> {
    fn absent() -> Self {
        Nullable {
            values: &[],
            nulls: None,
            from: 0,
        }
    }

    #[inline(always)]
    fn at(&self, i: usize) -> Option<T::Native> {
        let i = self.from + i;
        let v = *self.values.get(i)?;
        self.nulls.is_none_or(|n| n.is_valid(i)).then_some(v)
    }
}

fn options<'a, T: arrow_array::ArrowPrimitiveType>(
    r: &Rows<'a>,
    table: &str,
    name: &str,
) -> Result<Nullable<'a, T>, String> {
    let a = prim::<T>(r, table, name)?;
    Ok(Nullable {
        values: a.values(),
        nulls: a.nulls().filter(|n| n.null_count() > 0),
        from: r.at.start,
    })
}

/// A text column as ids of `names` (null stays `None`); a value that is
/// not among them is damage.
fn name_ids(
    r: &Rows,
    table: &str,
    name: &str,
    names: &Interner,
) -> Result<Vec<Option<StrId>>, String> {
    enums(r, table, name, |s| names.id(s))
}

/// A text column as values of `T` (a small enum, or a name's id), each
/// distinct value parsed once: null stays `None`, an unknown value is damage.
fn enums<T: Copy>(
    r: &Rows,
    table: &str,
    name: &str,
    parse: impl Fn(&str) -> Option<T>,
) -> Result<Vec<Option<T>>, String> {
    let c = col(r, table, name)?;
    let parsed = |s: &str| parse(s).ok_or_else(|| bad(table, format!("unknown {name} '{s}'")));
    if let Some(d) = c.as_dictionary_opt::<Int32Type>() {
        let dv = d
            .values()
            .as_string_opt::<i32>()
            .ok_or_else(|| bad(table, format!("column {name} is not text")))?;
        // Only the values rows use: a file several ranks share holds, in a
        // page's dictionary, the other ranks' names too.
        let mut values: Vec<Option<T>> = vec![None; dv.len()];
        let mut out = Vec::with_capacity(r.at.len());
        let keys = d.keys();
        for i in r.at.clone() {
            let Some(k) = keys
                .is_valid(i)
                .then(|| keys.value(i))
                .and_then(|k| usize::try_from(k).ok())
                .filter(|&k| k < dv.len())
            else {
                out.push(None);
                continue;
            };
            if values[k].is_none() {
                values[k] = Some(parsed(dv.value(k))?);
            }
            out.push(values[k]);
        }
        return Ok(out);
    }
    let s = c
        .as_string_opt::<i32>()
        .ok_or_else(|| bad(table, format!("column {name} is not text")))?;
    (r.at.clone())
        .map(|i| s.is_valid(i).then(|| s.value(i)).map(parsed).transpose())
        .collect()
}

// Called per row and column: inlined, its error made apart.
#[inline(always)]
fn required<T>(v: Option<T>, table: &str, what: &str) -> Result<T, String> {
    match v {
        Some(v) => Ok(v),
        None => Err(missing(table, what)),
    }
}

#[cold]
fn missing(table: &str, what: &str) -> String {
    bad(table, format!("a missing or unknown {what}"))
}

/// Fills `t` (whose scalar fields the caller set) from the tables read
/// back, each as its record batches; `cpu` may be `None` (not asked for).
/// The threads' ids and launch counts come from `threads`.
pub fn fill(
    t: &mut RankTimeline,
    tables: &HashMap<&str, Vec<RecordBatch>>,
    threads: &[(u64, u64)],
) -> Result<(), String> {
    let rows = (tables.iter())
        .map(|(&name, all)| (name, all.iter().map(Rows::whole).collect()))
        .collect();
    fill_rows(t, &rows, threads)
}

/// [`fill`] from rows read where they lie.
pub(crate) fn fill_rows(
    t: &mut RankTimeline,
    tables: &HashMap<&str, Vec<Rows>>,
    threads: &[(u64, u64)],
) -> Result<(), String> {
    let get = |name: &str| tables.get(name).map(Vec::as_slice).unwrap_or_default();
    let mut strings = Interner::default();
    for b in get("names") {
        let n = col(b, "names", "name")?
            .as_string_opt::<i32>()
            .ok_or_else(|| bad("names", "name is not text"))?;
        for i in b.at.clone() {
            let s = required(n.is_valid(i).then(|| n.value(i)), "names", "name")?;
            let before = strings.len();
            if strings.intern(s).0 as usize != before {
                return Err(bad("names", format!("'{s}' twice")));
            }
        }
    }
    // Names are looked up in the interner's own map, not in a second one
    // made of it.
    let map = &strings;
    // Every batch's rows at once: grown batch by batch, a rank of 69,000
    // ops was copied as it grew (7 % of a first open of 64 such ranks).
    let ops: usize = get("ops").iter().map(|b| b.at.len()).sum();
    t.ops.vec_mut().reserve_exact(ops);
    for b in get("ops") {
        ops_of(b, &|s| map.id(s), t.ops.vec_mut())?;
    }

    for b in get("colls") {
        let tb = "colls";
        let kind = enums(b, tb, "kind", CollKind::from_name)?;
        let name = name_ids(b, tb, "name", map)?;
        let in_n = options::<UInt64Type>(b, tb, "in_nelems")?;
        let out_n = options::<UInt64Type>(b, tb, "out_nelems")?;
        let dtype = options::<UInt64Type>(b, tb, "dtype_size")?;
        let group = options::<UInt32Type>(b, tb, "group_size")?;
        let pg_name = name_ids(b, tb, "pg_name", map)?;
        let pg_ranks = name_ids(b, tb, "pg_ranks", map)?;
        // Absent from summaries made before they were stored.
        let has = |c: &str| b.batch.schema_ref().column_with_name(c).is_some();
        let seq = if has("seq") {
            options::<UInt64Type>(b, tb, "seq")?
        } else {
            Nullable::absent()
        };
        let peer = if has("peer") {
            options::<UInt32Type>(b, tb, "peer")?
        } else {
            Nullable::absent()
        };
        t.colls.reserve(kind.len());
        for i in 0..kind.len() {
            t.colls.push(CollMeta {
                kind: required(kind[i], tb, "kind")?,
                name: required(name[i], tb, "name")?,
                in_nelems: in_n.at(i),
                out_nelems: out_n.at(i),
                dtype_size: dtype.at(i),
                group_size: group.at(i),
                pg_name: pg_name[i],
                pg_ranks: pg_ranks[i],
                seq: seq.at(i),
                peer: peer.at(i),
            });
        }
    }

    for b in get("steps") {
        let tb = "steps";
        let number = values::<Int64Type>(b, tb, "number")?;
        let start = values::<Int64Type>(b, tb, "start_ns")?;
        let end = values::<Int64Type>(b, tb, "end_ns")?;
        for i in 0..number.len() {
            t.steps.push(crate::model::Step {
                number: number[i],
                start: Ns(start[i]),
                end: Ns(end[i]),
            });
        }
    }

    let mut annotations = Vec::new();
    for b in get("annotations") {
        let tb = "annotations";
        let name = name_ids(b, tb, "name", map)?;
        let start = values::<Int64Type>(b, tb, "start_ns")?;
        let end = values::<Int64Type>(b, tb, "end_ns")?;
        let gpu = col(b, tb, "on_gpu")?
            .as_boolean_opt()
            .ok_or_else(|| bad(tb, "on_gpu is not boolean"))?;
        for i in 0..start.len() {
            annotations.push(Annotation {
                name: required(name[i], tb, "name")?,
                start: Ns(start[i]),
                end: Ns(end[i]),
                on_gpu: gpu.value(b.at.start + i),
            });
        }
    }
    t.annotations = Arc::new(annotations);

    if let Some(cpu) = tables.get("cpu") {
        let mut ops: Vec<(u64, CpuOp)> = Vec::new();
        for b in cpu {
            let tb = "cpu";
            let tid = values::<UInt64Type>(b, tb, "tid")?;
            let start = values::<Int64Type>(b, tb, "start_ns")?;
            let dur = values::<Int64Type>(b, tb, "dur_ns")?;
            let name = name_ids(b, tb, "name", map)?;
            let kind = enums(b, tb, "kind", cpu_kind)?;
            let depth = values::<UInt8Type>(b, tb, "depth")?;
            let parent = options::<UInt32Type>(b, tb, "parent")?;
            for i in 0..tid.len() {
                ops.push((
                    tid[i],
                    CpuOp {
                        start: Ns(start[i]),
                        dur: Ns(dur[i]),
                        name: required(name[i], tb, "name")?,
                        kind: required(kind[i], tb, "kind")?,
                        depth: depth[i],
                        parent: parent.at(i).unwrap_or(crate::model::timeline::NO_PARENT),
                    },
                ));
            }
        }
        // Rows are in thread order, each thread's ranges in their own order.
        let mut rows = ops.into_iter().peekable();
        for &(tid, launches) in threads {
            let mut th = crate::model::CpuThread {
                tid,
                launches,
                ops: Vec::new(),
            };
            while let Some((_, op)) = rows.next_if(|(t, _)| *t == tid) {
                th.ops.push(op);
            }
            t.cpu.push(th);
        }
        if rows.next().is_some() {
            return Err(bad("cpu", "rows of a thread not listed"));
        }
    }
    t.strings = strings;
    check(t).map_err(|e| bad("ops", e))
}

/// Appends the ops of one batch of an ops table (names' ids from `id`)
/// to `out`.
pub(crate) fn ops_of(
    b: &Rows,
    id: &dyn Fn(&str) -> Option<StrId>,
    out: &mut Vec<DeviceOp>,
) -> Result<(), String> {
    let tb = "ops";
    let start = values::<Int64Type>(b, tb, "start_ns")?;
    let dur = values::<Int64Type>(b, tb, "dur_ns")?;
    let launch = values::<Int64Type>(b, tb, "launch_ns")?;
    let name = enums(b, tb, "name", id)?;
    let activity = enums(b, tb, "activity", Activity::from_name)?;
    let class = enums(b, tb, "class", KernelClass::from_name)?;
    let coll = enums(b, tb, "coll", CollKind::from_name)?;
    let stream = values::<UInt32Type>(b, tb, "stream")?;
    let device = values::<UInt32Type>(b, tb, "device")?;
    let blocks = options::<Float64Type>(b, tb, "blocks")?;
    let per_sm = options::<Float64Type>(b, tb, "blocks_per_sm")?;
    let bytes = options::<UInt64Type>(b, tb, "bytes")?;
    let meta = options::<UInt32Type>(b, tb, "coll_index")?;
    let step = options::<UInt32Type>(b, tb, "step_index")?;
    out.reserve(start.len());
    for i in 0..start.len() {
        let work = match (blocks.at(i), per_sm.at(i), bytes.at(i)) {
            (Some(b), _, _) => Some(Work::Blocks(b)),
            (_, Some(b), _) => Some(Work::BlocksPerSm(b)),
            (_, _, Some(b)) => Some(Work::Bytes(b)),
            _ => None,
        };
        out.push(DeviceOp {
            start: Ns(start[i]),
            dur: Ns(dur[i]),
            name: required(name[i], tb, "name")?,
            activity: required(activity[i], tb, "activity")?,
            class: required(class[i], tb, "class")?,
            coll: coll[i],
            stream: stream[i],
            device: device[i],
            work: work.into(),
            meta: Slot::from(meta.at(i)),
            step: Slot::from(step.at(i)),
            launch: Ns(launch[i]),
        });
    }
    Ok(())
}

/// What [`check`] asks of ops (`colls` and `steps`: the lengths of the
/// tables their indexes point into), for ops read on their own.
pub(crate) fn check_ops(ops: &[DeviceOp], colls: usize, steps: usize) -> Result<(), String> {
    use crate::model::build::MAX_OP_TIME;
    use crate::model::time::{in_range, TIME_LIMIT};
    let mut total: Ns = Ns::ZERO;
    for o in ops {
        if !(in_range(o.start)
            && in_range(o.launch)
            && (Ns::ZERO..=TIME_LIMIT).contains(&o.dur)
            && in_range(o.start + o.dur))
        {
            return Err(format!("a time out of range ({} ns)", o.start));
        }
        total = total.saturating_add(o.dur);
        if o.meta.get().is_some_and(|m| m as usize >= colls) {
            return Err("a collective index past the collectives table".into());
        }
        if o.step.get().is_some_and(|s| s as usize >= steps) {
            return Err("a step index past the steps table".into());
        }
        if let Some(Work::Blocks(b) | Work::BlocksPerSm(b)) = o.work.get() {
            if !(b.is_finite() && b >= 0.0) {
                return Err(format!("a grid of {b} blocks"));
            }
        }
    }
    if total > MAX_OP_TIME {
        return Err("ops summing past 2^52 ns".into());
    }
    if !ops.is_sorted_by_key(|o| o.start) {
        return Err("ops not sorted by start".into());
    }
    Ok(())
}

/// The invariants the timeline builder guarantees every reader's output,
/// checked again on what was read back: a damaged or crafted summary is
/// refused, never trusted (metrics rely on these to stay finite).
fn check(t: &RankTimeline) -> Result<(), String> {
    use crate::model::time::{in_range, TIME_LIMIT};
    check_ops(&t.ops, t.colls.len(), t.steps.len())?;
    let bad_range = |s: Ns, e: Ns| !(in_range(s) && in_range(e) && s <= e);
    if t.steps.iter().any(|s| bad_range(s.start, s.end))
        || t.annotations.iter().any(|a| bad_range(a.start, a.end))
    {
        return Err("a step or annotation out of range".into());
    }
    if !t.steps.is_sorted_by_key(|s| s.start) || !t.annotations.is_sorted_by_key(|a| a.start) {
        return Err("steps or annotations not sorted by start".into());
    }
    for th in &t.cpu {
        if !th.ops.is_sorted_by_key(|o| o.start) {
            return Err("CPU ranges not sorted by start".into());
        }
        for (i, o) in th.ops.iter().enumerate() {
            // A parent comes before the ranges it holds: a loop would never end.
            if !(in_range(o.start) && (Ns::ZERO..=TIME_LIMIT).contains(&o.dur) && in_range(o.end()))
                || (o.parent != crate::model::timeline::NO_PARENT && o.parent as usize >= i)
            {
                return Err("a CPU range out of range".into());
            }
        }
    }
    Ok(())
}

/// The columns a timeline's table file starts with: the rank each row is
/// of (null where the file stated none) and its timeline (`<key>-<j>`), for
/// small ranks share files.
pub fn packed(b: &RecordBatch, rank: Option<u32>, part: &str) -> Res<RecordBatch> {
    let n = b.num_rows();
    let ranks: UInt32Array = std::iter::repeat_n(rank, n).collect();
    let mut cols = vec![
        Arc::new(ranks) as ArrayRef,
        text(std::iter::repeat_n(Some(part), n)),
    ];
    cols.extend(b.columns().iter().cloned());
    RecordBatch::try_new(Arc::new(packed_schema(&b.schema())), cols)
}

fn packed_schema(s: &Schema) -> Schema {
    let mut fields = vec![
        Field::new("rank", DataType::UInt32, true),
        Field::new("part", dict(), false),
    ];
    fields.extend(s.fields().iter().map(|f| f.as_ref().clone()));
    Schema::new(fields)
}

/// The schema each table is written with, by its folder's name (the
/// timeline's tables, `memory` and `et`).
pub(crate) fn schema_of(table: &str) -> Option<arrow_schema::SchemaRef> {
    static SCHEMAS: std::sync::LazyLock<HashMap<&'static str, arrow_schema::SchemaRef>> =
        std::sync::LazyLock::new(|| {
            let mut m: HashMap<&'static str, arrow_schema::SchemaRef> = TABLES
                .iter()
                .copied()
                .zip(
                    to_tables(&RankTimeline::default())
                        .expect("empty tables build")
                        .iter()
                        .map(RecordBatch::schema),
                )
                .collect();
            let memory = super::annex::memory_table(&Default::default());
            let et = super::annex::et_table(&Default::default());
            m.insert(super::stats::COMM, m["ops"].clone());
            let coverage = coverage_table(&RankTimeline::default());
            m.insert(COVERAGE, coverage.expect("an empty table builds").schema());
            for s in m.values_mut() {
                *s = Arc::new(packed_schema(s));
            }
            m.insert("memory", memory.expect("an empty table builds").schema());
            m.insert("et", et.expect("an empty table builds").schema());
            m
        });
    SCHEMAS.get(table).cloned()
}

/// The record batches of one table file, read with the schema the table is
/// written with (not the one the file embeds: decoding a damaged embedded
/// schema can panic in the Arrow crates). A file claiming more rows than it
/// has bytes is refused before decoding: run-length encoding lets a few
/// bytes claim billions of rows, and real tables take several bytes a row.
pub fn decode<R: parquet::file::reader::ChunkReader + 'static>(
    reader: R,
    size: u64,
    table: &str,
) -> Result<Vec<RecordBatch>, String> {
    guarded(|| decode_unguarded(reader, size, table, None, None))
}

/// [`decode`] of the rows `rows` (`[start, end)`) only: one rank's of a
/// file it shares with others.
pub(crate) fn decode_rows<R: parquet::file::reader::ChunkReader + 'static>(
    reader: R,
    size: u64,
    table: &str,
    rows: (u64, u64),
) -> Result<Vec<RecordBatch>, String> {
    guarded(|| decode_unguarded(reader, size, table, None, Some(rows)))
}

/// [`decode`] of the row groups `groups` only, and of those of the rows
/// `rows` only.
pub(crate) fn decode_groups<R: parquet::file::reader::ChunkReader + 'static>(
    reader: R,
    size: u64,
    table: &str,
    groups: Vec<usize>,
    rows: (u64, u64),
) -> Result<Vec<RecordBatch>, String> {
    guarded(|| decode_unguarded(reader, size, table, Some(groups), Some(rows)))
}

/// The rows `rows` (`[start, end)`) of a table decoded whole, as
/// [`decode_rows`] gives them: slices of its batches, not copies.
pub(crate) fn slice_rows(
    all: &[RecordBatch],
    rows: (u64, u64),
) -> Result<Vec<RecordBatch>, String> {
    Ok((Rows::of(all, rows)?.into_iter())
        .map(|r| r.batch.slice(r.at.start, r.at.len()))
        .collect())
}

/// The number of rows of each row group of a table file (its footer
/// parsed), to decode its groups apart.
pub(crate) fn group_rows<R: parquet::file::reader::ChunkReader + 'static>(
    reader: &R,
) -> Result<Vec<u64>, String> {
    let meta = guarded(|| {
        parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(reader)
            .map_err(|e| e.to_string())
    })?;
    (meta.row_groups().iter())
        .map(|g| u64::try_from(g.num_rows()).map_err(|_| "a negative row count".to_owned()))
        .collect()
}

/// Of row groups `groups` (ascending; every group when `None`), of
/// `group_rows` rows each, those holding rows in `rows`, and which of
/// their rows those are.
fn select(
    group_rows: &[u64],
    groups: Option<Vec<usize>>,
    rows: Option<(u64, u64)>,
) -> Result<(Vec<usize>, Option<RowSelection>), String> {
    let total: u64 = group_rows.iter().sum();
    let groups = groups.unwrap_or_else(|| (0..group_rows.len()).collect());
    if groups.iter().any(|&g| g >= group_rows.len()) {
        return Err("a row group past the file's".into());
    }
    let Some((a, b)) = rows else {
        return Ok((groups, None));
    };
    if a > b || b > total {
        return Err(format!("rows {a}..{b} of a table of {total}"));
    }
    let starts: Vec<u64> = (group_rows.iter())
        .scan(0, |at, &n| {
            *at += n;
            Some(*at - n)
        })
        .collect();
    let mut picked = Vec::new();
    let mut selectors = Vec::new();
    for g in groups {
        let (s, e) = (starts[g], starts[g] + group_rows[g]);
        let (lo, hi) = (a.max(s), b.min(e));
        if lo >= hi {
            continue;
        }
        picked.push(g);
        for (n, keep) in [(lo - s, false), (hi - lo, true), (e - hi, false)] {
            let n = usize::try_from(n).map_err(|_| "a row count".to_owned())?;
            match (n, keep) {
                (0, _) => {}
                (n, true) => selectors.push(RowSelector::select(n)),
                (n, false) => selectors.push(RowSelector::skip(n)),
            }
        }
    }
    Ok((picked, Some(selectors.into())))
}

/// A table's row groups, for each integer column of `columns`: rows, and
/// the column's least and greatest value (from the footer's statistics).
pub(crate) fn group_ranges<R: parquet::file::reader::ChunkReader + 'static, const N: usize>(
    reader: R,
    columns: [&str; N],
) -> Result<[Vec<GroupRange>; N], String> {
    use parquet::file::statistics::Statistics;
    let meta = guarded(|| {
        parquet::file::metadata::ParquetMetaDataReader::new()
            .parse_and_finish(&reader)
            .map_err(|e| e.to_string())
    })?;
    let ranges = |column: &str| -> Result<Vec<GroupRange>, String> {
        meta.row_groups()
            .iter()
            .map(|g| {
                let c = g
                    .columns()
                    .iter()
                    .find(|c| c.column_path().string() == column)
                    .ok_or_else(|| format!("no column {column}"))?;
                let (min, max) = match c.statistics() {
                    Some(Statistics::Int64(s)) => (s.min_opt().copied(), s.max_opt().copied()),
                    Some(Statistics::Int32(s)) => (
                        s.min_opt().map(|&v| i64::from(v)),
                        s.max_opt().map(|&v| i64::from(v)),
                    ),
                    _ => (None, None),
                };
                match (min, max, usize::try_from(g.num_rows())) {
                    (Some(min), Some(max), Ok(rows)) if min <= max => {
                        Ok(GroupRange { rows, min, max })
                    }
                    _ => Err(format!("no range of {column} in a row group")),
                }
            })
            .collect()
    };
    let mut out: [Vec<GroupRange>; N] = std::array::from_fn(|_| Vec::new());
    for (o, c) in out.iter_mut().zip(columns) {
        *o = ranges(c)?;
    }
    Ok(out)
}

/// One row group of a table file: its rows and a column's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct GroupRange {
    pub rows: usize,
    pub min: i64,
    pub max: i64,
}

/// Runs a Parquet decode, its panic a damage like any other. The decoder
/// panics on some malformed pages (arrow-rs #2855 and others): on a file
/// whose hash matched, that is a crafted file, refused quietly.
fn guarded<T>(f: impl FnOnce() -> Result<T, String>) -> Result<T, String> {
    quiet_hook();
    DECODING.set(true);
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    DECODING.set(false);
    r.unwrap_or_else(|_| Err("the Parquet decoder failed on it".into()))
}

thread_local! {
    /// Set while this thread decodes a table: its panics are caught and reported.
    static DECODING: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Wraps the panic hook once so that a caught decoder panic prints nothing.
fn quiet_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !DECODING.get() {
                previous(info);
            }
        }));
    });
}

fn decode_unguarded<R: parquet::file::reader::ChunkReader + 'static>(
    reader: R,
    size: u64,
    table: &str,
    groups: Option<Vec<usize>>,
    rows: Option<(u64, u64)>,
) -> Result<Vec<RecordBatch>, String> {
    use parquet::arrow::arrow_reader::{ArrowReaderOptions, ParquetRecordBatchReaderBuilder};
    let schema = schema_of(table).ok_or_else(|| format!("no table {table}"))?;
    let options = ArrowReaderOptions::new().with_schema(schema);
    let builder = ParquetRecordBatchReaderBuilder::try_new_with_options(reader, options)
        .map_err(|e| e.to_string())?;
    let claimed = builder.metadata().file_metadata().num_rows();
    if claimed < 0 || claimed as u64 > size.max(4096) {
        return Err(format!("{claimed} rows claimed in {size} bytes"));
    }
    let group_rows: Vec<u64> = (builder.metadata().row_groups().iter())
        .map(|g| u64::try_from(g.num_rows()).map_err(|_| "a negative row count".to_owned()))
        .collect::<Result<_, _>>()?;
    let (groups, selection) = select(&group_rows, groups, rows)?;
    let builder = builder.with_row_groups(groups);
    let builder = match selection {
        Some(s) => builder.with_row_selection(s),
        None => builder,
    };
    builder
        .with_batch_size(64 * 1024)
        .build()
        .map_err(|e| e.to_string())?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Step, Work};

    fn round_trip(t: &RankTimeline, cpu: bool) -> RankTimeline {
        let tables = to_tables(t).unwrap();
        let mut by_name: HashMap<&str, Vec<RecordBatch>> = TABLES
            .iter()
            .copied()
            .zip(tables.into_iter().map(|b| vec![b]))
            .collect();
        if !cpu {
            by_name.remove("cpu");
        }
        let threads: Vec<(u64, u64)> = t.cpu.iter().map(|c| (c.tid, c.launches)).collect();
        let mut back = RankTimeline::default();
        fill(&mut back, &by_name, &threads).unwrap();
        back
    }

    #[test]
    fn a_read_timeline_comes_back_field_for_field() {
        // A synthetic rank with kernels, a collective with metadata, copies,
        // steps, annotations and CPU ranges, through the Kineto reader.
        let mut r = crate::synth::RankTrace::new(Some(0), 2, 132);
        r.step(1, 0.0, 100.0);
        r.cpu_op("aten::mm", 1.0, 10.0, Some(1e9));
        r.annotation("forward", 0.5, 50.0, false);
        r.annotation("forward", 2.0, 40.0, true);
        let k = r.kernel("sm90_gemm", 5.0, 10.0, 7, 264);
        r.launch(k, 2.0);
        let c = r.collective(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
            12.0,
            20.0,
            20,
            &crate::synth::Coll::all_reduce_f32(1 << 20, 2),
        );
        r.launch(c, 3.0);
        r.memcpy("Memcpy HtoD (Pageable -> Device)", 40.0, 5.0, 7, 4096);
        let f = crate::read::kineto::read_with(
            r.to_json().as_bytes(),
            std::path::Path::new("rank0.json"),
            true,
        )
        .unwrap();
        let t = f.timeline;
        assert!(!t.cpu.is_empty() && !t.colls.is_empty() && t.ops.len() == 3);
        let back = round_trip(&t, true);
        assert_eq!(format!("{:?}", back.ops), format!("{:?}", t.ops));
        assert_eq!(back.colls, t.colls);
        assert_eq!(back.steps, t.steps);
        assert_eq!(back.annotations, t.annotations);
        assert_eq!(back.cpu, t.cpu);
        assert!(
            back.strings.iter().eq(t.strings.iter()),
            "same ids, same names"
        );
        // Without the CPU table the ranges are simply absent.
        assert!(round_trip(&t, false).cpu.is_empty());
    }

    #[test]
    fn steps_carry_partial_sums_computed_by_hand() {
        let mut t = RankTimeline::default();
        let gemm = t.strings.intern("gemm");
        let nccl = t.strings.intern("nccl");
        let op = |name, class, start, dur| DeviceOp {
            step: Slot::from(Some(0)),
            ..DeviceOp::new(name, Activity::Kernel, class, start, dur)
        };
        // Compute [0, 10) and [30, 40); communication [5, 20): busy 30,
        // compute 20, communication 15, of which 10 not under compute.
        t.ops = vec![
            op(gemm, KernelClass::Gemm, Ns::ZERO, Ns(10)),
            op(nccl, KernelClass::Communication, Ns(5), Ns(15)),
            op(gemm, KernelClass::Gemm, Ns(30), Ns(10)),
        ]
        .into();
        t.ops[2].work = Some(Work::Blocks(4.0)).into();
        t.steps = vec![Step {
            number: 7,
            start: Ns::ZERO,
            end: Ns(50),
        }];
        t.launch_by_step = vec![(3, Ns(12))];
        let steps = &to_tables(&t).unwrap()[3];
        let get = |name: &str| {
            steps
                .column_by_name(name)
                .unwrap()
                .as_primitive::<Int64Type>()
                .value(0)
        };
        assert_eq!(
            [
                get("busy_ns"),
                get("compute_ns"),
                get("comm_ns"),
                get("exposed_comm_ns")
            ],
            [30, 20, 15, 10]
        );
        assert_eq!(get("number"), 7);
        assert_eq!(get("launch_ns"), 12);
        let back = round_trip(&t, true);
        assert_eq!(format!("{:?}", back.ops), format!("{:?}", t.ops));
    }

    #[test]
    fn damaged_tables_are_refused() {
        let mut t = RankTimeline::default();
        let n = t.strings.intern("k");
        t.ops = vec![DeviceOp::new(
            n,
            Activity::Kernel,
            KernelClass::Gemm,
            Ns::ZERO,
            Ns(5),
        )]
        .into();
        t.ops[0].meta = Slot::from(Some(3));
        let tables = to_tables(&t).unwrap();
        let by_name: HashMap<&str, Vec<RecordBatch>> = TABLES
            .iter()
            .copied()
            .zip(tables.into_iter().map(|b| vec![b]))
            .collect();
        let mut back = RankTimeline::default();
        let e = fill(&mut back, &by_name, &[]).unwrap_err();
        assert!(e.contains("collective index"), "{e}");
        // A name the names table lacks.
        let mut no_names = by_name.clone();
        no_names.remove("names");
        let e = fill(&mut RankTimeline::default(), &no_names, &[]).unwrap_err();
        assert!(e.contains("unknown name 'k'"), "{e}");
    }

    /// A part's rows of a table decoded whole: slices across batches.
    #[test]
    fn rows_of_a_whole_table_are_sliced_across_its_batches() {
        let b = |v: Vec<i64>| {
            batch(
                vec![("x", DataType::Int64, false)],
                vec![Arc::new(arrow_array::Int64Array::from(v))],
            )
            .unwrap()
        };
        let all = [b(vec![0, 1, 2]), b(vec![3, 4, 5, 6])];
        let values = |rows| -> Vec<i64> {
            slice_rows(&all, rows)
                .unwrap()
                .iter()
                .flat_map(|x| x.column(0).as_primitive::<Int64Type>().values().to_vec())
                .collect()
        };
        assert_eq!(values((2, 5)), [2, 3, 4]);
        assert_eq!(values((0, 7)), [0, 1, 2, 3, 4, 5, 6]);
        assert_eq!(values((3, 3)), Vec::<i64>::new());
        assert_eq!(
            slice_rows(&all, (2, 9)).unwrap_err(),
            "rows 2..9 of a table of 7"
        );
        assert!(slice_rows(&all, (5, 4)).is_err());
    }

    #[test]
    fn timelines_sharing_a_file_read_back_their_own_rows() {
        // Two ranks' tables in one file, each read back by its row range
        // (in row groups of 3 rows, so one group holds rows of both).
        let rank = |r: u32, names: &[&str]| {
            let mut t = RankTimeline::default();
            let ops: Vec<DeviceOp> = (names.iter().enumerate())
                .map(|(k, n)| {
                    let id = t.strings.intern(n);
                    let start = Ns(10 * k as i64);
                    DeviceOp::new(id, Activity::Kernel, KernelClass::Gemm, start, Ns(5))
                })
                .collect();
            t.ops = ops.into();
            t.rank = r;
            t
        };
        let (a, b) = (rank(0, &["a0", "a1"]), rank(1, &["b0", "b1", "b2", "b3"]));
        let mut files: HashMap<&str, Vec<RecordBatch>> = HashMap::new();
        let mut rows = Vec::new();
        for (t, part) in [(&a, "x-0"), (&b, "y-0")] {
            let mut made = HashMap::new();
            for (name, batch) in TABLES.iter().zip(to_tables(t).unwrap()) {
                let at: usize = files
                    .get(name)
                    .map_or(0, |v| v.iter().map(|b| b.num_rows()).sum());
                made.insert(*name, (at as u64, (at + batch.num_rows()) as u64));
                files
                    .entry(name)
                    .or_default()
                    .push(packed(&batch, Some(t.rank), part).unwrap());
            }
            rows.push(made);
        }
        let bytes: HashMap<&str, bytes::Bytes> = files
            .iter()
            .map(|(name, batches)| {
                let mut out = Vec::new();
                let props = parquet::file::properties::WriterProperties::builder()
                    .set_max_row_group_row_count(Some(3))
                    .build();
                let mut w = parquet::arrow::ArrowWriter::try_new(
                    &mut out,
                    batches[0].schema(),
                    Some(props),
                )
                .unwrap();
                for b in batches {
                    w.write(b).unwrap();
                }
                w.close().unwrap();
                (*name, bytes::Bytes::from(out))
            })
            .collect();
        for (t, made) in [&a, &b].into_iter().zip(&rows) {
            let tables: HashMap<&str, Vec<RecordBatch>> = TABLES
                .iter()
                .filter(|n| **n != "cpu")
                .map(|n| {
                    let f = &bytes[n];
                    (
                        *n,
                        decode_rows(f.clone(), f.len() as u64, n, made[n]).unwrap(),
                    )
                })
                .collect();
            let mut back = RankTimeline::default();
            fill(&mut back, &tables, &[]).unwrap();
            assert_eq!(format!("{:?}", back.ops), format!("{:?}", t.ops));
            assert!(back.strings.iter().eq(t.strings.iter()));
        }
        // Rows past the file's are a damaged table, not a panic.
        let f = &bytes["ops"];
        let e = decode_rows(f.clone(), f.len() as u64, "ops", (5, 7)).unwrap_err();
        assert!(e.contains("rows 5..7 of a table of 6"), "{e}");
        // Row groups picked and rows selected within them: groups 0 and 1
        // (rows 0-2, 3-5), of which rows 2..4 (a1, b0).
        let got = decode_groups(f.clone(), f.len() as u64, "ops", vec![0, 1], (2, 4)).unwrap();
        assert_eq!(got.iter().map(|b| b.num_rows()).sum::<usize>(), 2);
    }
}
