//! nsys-jax archives (NVIDIA JAX-Toolbox): one `*.zip` per profiled process,
//! holding the Nsight Systems `nvtx_gpu_proj_trace` recipe's output. The raw
//! report is stripped, so the timeline is the NVTX ranges XLA pushes for each
//! executable (`XlaModule:#hlo_module=…#`) and each of its steps
//! (`Thunk:#hlo_op=all-gather-start.3#`), projected onto the GPU: a thunk's
//! projected range is when the GPU ran the work it launched.
//!
//! Read: `…/nvtx_gpu_proj_trace/trace.parquet` (both layouts nsys writes:
//! `Projected Start`/`Projected Duration`/`RangeId`/`ParentId`/`Name`, or
//! `Start`/`End`/`Range ID`/`Parent ID`/`Text`) and `…/thread-metadata.parquet`,
//! whose `XlaLauncher:#global=G,…#` thread names give the global device each
//! launcher thread drives: each device is a rank. The innermost thunks are the
//! device ops; an HLO collective's thunk is communication, a NCCL range outside
//! one (NCCL's own NVTX ranges) too.

use crate::model::Warning;
use std::collections::{HashMap, HashSet};
use std::io::{Read, Seek};
use std::path::Path;
use std::sync::LazyLock;

use std::sync::Arc;

use arrow_array::types::Int32Type;
use arrow_array::{Array, DictionaryArray, LargeStringArray, RecordBatch, StringArray};
use arrow_schema::{DataType, Field, Schema};
use regex::Regex;

use super::parquet_stream::{self, Reopen, Table, Window};
use super::{hlo, RankFile};
use crate::error::{Error, Result};
use crate::model::build::TimelineBuilder;
use crate::model::classify::{classify, coll_kind};
use crate::model::timeline::CpuKind;
use crate::model::timeline::SourceFormat;
use crate::model::{Activity, DeviceOp, KernelClass, Ns, Slot};

const TRACE: &str = "nvtx_gpu_proj_trace/trace.parquet";
const THREADS: &str = "thread-metadata.parquet";

/// The most an archive member may unpack to: 100 times the archive (at least
/// 64 MiB), at most 4 GiB; checked against the stated size before reading
/// and again while reading, whatever the archive claims.
const MAX_MEMBER: u64 = 4 << 30;

fn member_limit(archive_size: u64) -> u64 {
    archive_size.saturating_mul(100).clamp(64 << 20, MAX_MEMBER)
}

static THUNK: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^(?:TSL:)?Thunk:#(?:name=.*?,)?hlo_op=([A-Za-z0-9._\-]+)#$").expect("valid regex")
});
static MODULE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(?:TSL:)?XlaModule:#(?:prefix=.*?,)?hlo_module=([A-Za-z0-9._\-]+)(?:,program_id=(\d+))?",
    )
    .expect("valid regex")
});
static LAUNCHER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"^XlaLauncher:#global=(\d+),local=(\d+),process=(\d+)").expect("valid regex")
});
/// An HLO instruction named after a collective opcode (`all-reduce.3`,
/// `all-gather-start.1`, `collective-permute-done`), with the suffixes XLA's
/// passes add to the copies they make (`reduce-scatter.57.double_buffer_clone.1`,
/// `reduce-scatter.57.peeled_double_buffer.1`, `all-to-all.1.1`): still
/// that collective, whose NCCL range inside is then not counted again.
static COLLECTIVE: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(
        r"^(all-reduce|all-gather|reduce-scatter|all-to-all|collective-permute|collective-broadcast|send|recv)(-start|-done)?(\.[A-Za-z0-9_]+)*$",
    )
    .expect("valid regex")
});

/// One projected NVTX range, in 24 bytes (an archive of 20 MB holds 4
/// million): its name and thread are places in its [`Ranges`]' tables,
/// what only some ranges have (CPU times, a parent) is said by two bits of
/// its thread's place, and its ids, parent and CPU times are in columns
/// beside it.
struct Range {
    start: Ns,
    end: Ns,
    /// In [`Ranges::names`].
    name: u32,
    /// In [`Ranges::threads`], below [`Range::FLAGS`]; the flags above.
    thread: u32,
}

// Held for every range at once: kept from growing unnoticed.
const _: () = assert!(std::mem::size_of::<Range>() == 24);

impl Range {
    /// Its CPU times are in [`Ranges::orig`].
    const ORIG: u32 = 1 << 31;
    /// Its parent's id is in [`Ranges::parents`].
    const PARENT: u32 = 1 << 30;
    const FLAGS: u32 = Self::ORIG | Self::PARENT;
    /// Threads past this many are not told apart (a crafted table's).
    const THREADS: usize = (1 << 30) - 1;

    fn thread(&self) -> usize {
        (self.thread & !Self::FLAGS) as usize
    }

    fn has(&self, flag: u32) -> bool {
        self.thread & flag != 0
    }
}

/// The projected ranges of an archive, with the names and threads they
/// share (a program's thunks repeat every step on a few threads), and
/// columns of what only some layouts or only linking need.
#[derive(Default)]
struct Ranges {
    list: Vec<Range>,
    names: Vec<Arc<str>>,
    /// (PID, TID).
    threads: Vec<(i64, i64)>,
    /// The NVTX range's own CPU start and end (`Orig Start`/`Orig
    /// Duration`): when XLA's launcher ran it. Indexed like `list`, empty
    /// where no range has them.
    orig: Vec<(Ns, Ns)>,
    /// Each range's id and its parent's, indexed like `list`, until linked.
    ids: Ids,
    parents: Parents,
    /// Where each range's parent is in `list` (the last range with the
    /// parent's id), once linked.
    up: Vec<Slot>,
}

/// Each range's parent id, in the order read, as its difference from the
/// range's own id in 4 bytes (a thunk is numbered near the range holding
/// it); one further away is kept apart.
#[derive(Default)]
struct Parents {
    near: Vec<i32>,
    far: Vec<i64>,
}

impl Parents {
    /// In `near`: the parent is in `far`.
    const FAR: i32 = i32::MIN;

    fn push(&mut self, id: i64, parent: i64) {
        let near = (id.checked_sub(parent))
            .and_then(|d| i32::try_from(d).ok())
            .filter(|&d| d != Self::FAR);
        match near {
            Some(d) => self.near.push(d),
            None => {
                self.far.push(parent);
                self.near.push(Self::FAR);
            }
        }
    }

    /// The parent ids, given the ranges' own ids in order.
    fn iter<'a>(&'a self, ids: impl Iterator<Item = i64> + 'a) -> impl Iterator<Item = i64> + 'a {
        let mut far = self.far.iter().copied();
        (self.near.iter().zip(ids)).map(move |(&d, id)| {
            if d == Self::FAR {
                far.next().unwrap_or(0)
            } else {
                // `id − (id − parent)`: the parent, which is in range.
                id - i64::from(d)
            }
        })
    }
}

/// Each range's id, in the order read, as runs of consecutive ids: nsys
/// numbers ranges as it writes them, so an archive's ids are one run, or a
/// few where rows are left out, where a column took 8 bytes a range.
#[derive(Default)]
struct Ids {
    /// Where each run begins in the list, and its first id.
    at: Vec<u32>,
    first: Vec<i64>,
    len: u32,
}

impl Ids {
    fn push(&mut self, id: i64) {
        let next = match (self.at.last(), self.first.last()) {
            (Some(&at), Some(&first)) => first.checked_add(i64::from(self.len - at)),
            _ => None,
        };
        if next != Some(id) {
            self.at.push(self.len);
            self.first.push(id);
        }
        self.len += 1;
    }

    /// Each run: its place, its first id and its length.
    fn runs(&self) -> impl Iterator<Item = (u32, i64, u32)> + '_ {
        let ends = self.at.iter().skip(1).copied().chain([self.len]);
        (self.at.iter().zip(&self.first).zip(ends))
            .map(|((&at, &first), end)| (at, first, end - at))
    }

    fn iter(&self) -> impl Iterator<Item = i64> + '_ {
        self.runs()
            .flat_map(|(_, first, n)| (0..n).map(move |k| first + i64::from(k)))
    }

    /// Whether the ids never go down (runs in order, a run's first id at
    /// or past the last one's end).
    fn is_sorted(&self) -> bool {
        self.runs()
            .zip(self.runs().skip(1))
            .all(|((_, a, n), (_, b, _))| a + i64::from(n - 1) <= b)
    }

    /// In ids that never go down, the place of the last range with `id`.
    fn find_sorted(&self, id: i64) -> Option<u32> {
        let k = self.first.partition_point(|&f| f <= id).checked_sub(1)?;
        let (at, first) = (self.at[k], self.first[k]);
        let end = self.at.get(k + 1).copied().unwrap_or(self.len);
        let off = u32::try_from(id.checked_sub(first)?).ok()?;
        (off < end - at).then_some(at + off)
    }

    /// In ids that never go down, whether one repeats (only where a run
    /// begins with the id the one before it ended with).
    fn repeats_sorted(&self) -> bool {
        self.runs()
            .zip(self.runs().skip(1))
            .any(|((_, a, n), (_, b, _))| a + i64::from(n - 1) == b)
    }
}

impl Ranges {
    fn name(&self, r: &Range) -> &Arc<str> {
        &self.names[r.name as usize]
    }

    fn thread(&self, r: &Range) -> (i64, i64) {
        self.threads[r.thread()]
    }

    /// The `i`th range's CPU times.
    fn orig(&self, i: usize) -> Option<(Ns, Ns)> {
        let r = &self.list[i];
        r.has(Range::ORIG).then(|| self.orig[i])
    }

    /// The range above the `i`th, once linked.
    fn up(&self, i: usize) -> Option<(usize, &Range)> {
        let up = self.up.get(i)?.get()? as usize;
        Some((up, self.list.get(up)?))
    }

    /// Points each range at its parent: the last range with the parent's
    /// id, as an index by id would find it; then lets the ids go. Returns
    /// each range's own place by its id (the last with that id), where two
    /// share an id: what is said of an id is said of that range.
    fn link(&mut self) -> Option<Vec<u32>> {
        let (ids, parents) = (
            std::mem::take(&mut self.ids),
            std::mem::take(&mut self.parents),
        );
        // The ids in order with their places, searched by halving: 16
        // bytes a range, where a hash map of them took 36 (a third of the
        // peak). Rows in id order, as nsys numbers ranges, are searched in
        // their runs, with nothing more.
        let sorted = ids.is_sorted();
        let by_id: Vec<(i64, u32)> = if sorted {
            Vec::new()
        } else {
            let mut v: Vec<(i64, u32)> = (ids.iter().enumerate())
                .map(|(i, id)| (id, i as u32))
                .collect();
            v.sort_unstable();
            v
        };
        // The last range with `id`.
        let find = |id: i64| -> Option<u32> {
            if sorted {
                ids.find_sorted(id)
            } else {
                let k = by_id.partition_point(|e| e.0 <= id).checked_sub(1)?;
                (by_id[k].0 == id).then_some(by_id[k].1)
            }
        };
        self.up = (self.list.iter().zip(parents.iter(ids.iter())))
            .map(|(r, p)| Slot::from(r.has(Range::PARENT).then(|| find(p)).flatten()))
            .collect();
        drop(parents);
        let repeated = if sorted {
            ids.repeats_sorted()
        } else {
            by_id.windows(2).any(|w| w[0].0 == w[1].0)
        };
        repeated.then(|| ids.iter().filter_map(find).collect())
    }
}

fn bad(path: &Path, why: impl Into<String>) -> Error {
    Error::NotATrace {
        path: path.to_owned(),
        why: why.into(),
    }
}

/// The bytes of the archive member whose name ends with `suffix`.
fn member<R: Read + Seek>(
    zip: &mut zip::ZipArchive<R>,
    suffix: &str,
    path: &Path,
    limit: u64,
) -> Result<Option<Vec<u8>>> {
    let Some(name) = member_name(zip, suffix) else {
        return Ok(None);
    };
    named(zip, &name, path, limit).map(Some)
}

/// The name of the archive member whose name ends with `suffix`.
fn member_name<R: Read + Seek>(zip: &zip::ZipArchive<R>, suffix: &str) -> Option<String> {
    zip.file_names()
        .filter_map(|n| n.ok())
        .find(|n| n.ends_with(suffix))
        .map(|n| n.into_owned())
}

/// Member `name` of an archive, read from its start as often as asked.
struct Member<'z, R> {
    zip: &'z mut zip::ZipArchive<R>,
    name: &'z str,
}

impl<R: Read + Seek> Reopen for Member<'_, R> {
    fn open(&mut self) -> std::io::Result<Box<dyn Read + '_>> {
        let f = self.zip.by_name(self.name).map_err(std::io::Error::other)?;
        Ok(Box::new(f))
    }
}

/// Member `name`'s stated size, refused past `limit`.
fn stated_size<R: Read + Seek>(
    zip: &mut zip::ZipArchive<R>,
    name: &str,
    path: &Path,
    limit: u64,
) -> Result<u64> {
    let size = zip
        .by_name(name)
        .map_err(|e| bad(path, format!("{name}: {e}")))?
        .size();
    if size > limit {
        return Err(too_big(path, name, size, limit));
    }
    Ok(size)
}

fn too_big(path: &Path, name: &str, n: u64, limit: u64) -> Error {
    bad(
        path,
        format!("{name} unpacks to {n} bytes or more, over the {limit} read (100 times the archive, at least 64 MiB)"),
    )
}

/// The bytes of member `name`, read up to `limit`.
fn named<R: Read + Seek>(
    zip: &mut zip::ZipArchive<R>,
    name: &str,
    path: &Path,
    limit: u64,
) -> Result<Vec<u8>> {
    stated_size(zip, name, path, limit)?;
    let mut f = zip
        .by_name(name)
        .map_err(|e| bad(path, format!("{name}: {e}")))?;
    let too_big = |n: u64| too_big(path, name, n, limit);
    // The stated size only hints the capacity (an archive can lie about it,
    // within the limit): reserved whole, where growing by doubling from less
    // held twice a large member; if that much cannot be reserved, grown.
    let mut bytes = Vec::new();
    let _ = bytes.try_reserve_exact(usize::try_from(f.size().min(limit)).unwrap_or(0));
    (&mut f)
        .take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(path, format!("{name}: {e}")))?;
    if bytes.len() as u64 > limit {
        return Err(too_big(bytes.len() as u64));
    }
    Ok(bytes)
}

/// The compiled programs' HLO, by module name: each dump's program id (the
/// number in its file name) and instructions.
type Dumps = HashMap<String, Vec<(Option<u64>, HashMap<String, hlo::Instr>)>>;

/// XLA's dump of a program after optimization, as nsys-jax archives it:
/// `dump/module_0012.jit_train_step.sm_9.0_gpu_after_optimizations.hlo.pb.xz`.
static DUMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?:^|/)dump/module_(\d+)\.[^/]*after_optimizations\.hlo\.pb(\.xz)?$")
        .expect("valid regex")
});

/// Every program dump in the archive; one that does not decode is said and
/// left out (its program's thunks are then told apart by name).
fn dumps<R: Read + Seek>(
    zip: &mut zip::ZipArchive<R>,
    path: &Path,
    limit: u64,
    warnings: &mut Vec<Warning>,
) -> Result<Dumps> {
    let names: Vec<(String, Option<u64>, bool)> = zip
        .file_names()
        .filter_map(|n| n.ok())
        .filter_map(|n| {
            let c = DUMP.captures(&n)?;
            Some((n.to_string(), c[1].parse().ok(), c.get(2).is_some()))
        })
        .collect();
    let mut out = Dumps::new();
    for (name, id, xz) in names {
        let bytes = named(zip, &name, path, limit)?;
        match hlo::module(&bytes, xz) {
            Ok((module, instrs)) => out.entry(module).or_default().push((id, instrs)),
            Err(why) => warnings.push(Warning::ignored(format!(
                "{}: {name}: {why}; its program's thunks are told apart by name",
                path.display()
            ))),
        }
    }
    Ok(out)
}

/// The instructions of program `module` (with `program_id`, when the
/// module range names one) among `dumps`.
fn program<'a>(
    dumps: &'a Dumps,
    module: &str,
    program_id: Option<u64>,
) -> Option<&'a HashMap<String, hlo::Instr>> {
    match &dumps.get(module)?[..] {
        [(_, one)] => Some(one),
        many => many
            .iter()
            .find(|(id, _)| id.is_some() && *id == program_id)
            .map(|(_, m)| m),
    }
}

/// An integer cell: pandas writes integer columns with gaps as doubles.
fn int(a: &dyn Array, i: usize) -> Option<i64> {
    use arrow_array::cast::AsArray;
    use arrow_array::types::*;
    if a.is_null(i) {
        return None;
    }
    let float = |v: f64| (v.is_finite() && v.abs() < 9e18).then_some(v as i64);
    match a.data_type() {
        DataType::Int8 => Some(a.as_primitive::<Int8Type>().value(i).into()),
        DataType::Int16 => Some(a.as_primitive::<Int16Type>().value(i).into()),
        DataType::Int32 => Some(a.as_primitive::<Int32Type>().value(i).into()),
        DataType::Int64 => Some(a.as_primitive::<Int64Type>().value(i)),
        DataType::UInt8 => Some(a.as_primitive::<UInt8Type>().value(i).into()),
        DataType::UInt16 => Some(a.as_primitive::<UInt16Type>().value(i).into()),
        DataType::UInt32 => Some(a.as_primitive::<UInt32Type>().value(i).into()),
        DataType::UInt64 => i64::try_from(a.as_primitive::<UInt64Type>().value(i)).ok(),
        DataType::Float32 => float(a.as_primitive::<Float32Type>().value(i).into()),
        DataType::Float64 => float(a.as_primitive::<Float64Type>().value(i)),
        _ => None,
    }
}

/// A text column: kept dictionary-encoded where the file is, so that a
/// long string repeated in every row is held once.
enum Text<'a> {
    Dict(&'a DictionaryArray<Int32Type>, &'a StringArray),
    Plain(&'a StringArray),
    Large(&'a LargeStringArray),
    /// Not text (bytes, numbers): no cell is a string.
    None,
}

impl<'a> Text<'a> {
    fn of(a: &'a dyn Array) -> Self {
        use arrow_array::cast::AsArray;
        match a.data_type() {
            DataType::Dictionary(k, v) if **k == DataType::Int32 && **v == DataType::Utf8 => {
                let d = a.as_dictionary::<Int32Type>();
                match d.values().as_string_opt::<i32>() {
                    Some(values) => Text::Dict(d, values),
                    None => Text::None,
                }
            }
            DataType::Utf8 => Text::Plain(a.as_string::<i32>()),
            DataType::LargeUtf8 => Text::Large(a.as_string::<i64>()),
            _ => Text::None,
        }
    }

    /// Row `i`'s text, and for a dictionary column its key.
    fn get(&self, i: usize) -> Option<(&'a str, Option<usize>)> {
        match self {
            Text::Dict(d, values) => {
                let k = usize::try_from(d.keys().value(i)).ok()?;
                (d.is_valid(i) && k < values.len()).then(|| (values.value(k), Some(k)))
            }
            Text::Plain(a) => a.is_valid(i).then(|| (a.value(i), None)),
            Text::Large(a) => a.is_valid(i).then(|| (a.value(i), None)),
            Text::None => None,
        }
    }
}

/// One batch of a table's rows, its columns found by name.
struct Rows<'a> {
    batch: &'a RecordBatch,
    /// The rows the table states, as far as the budget reads.
    expected: u64,
}

impl<'a> Rows<'a> {
    fn column(&self, names: &[&str]) -> Option<&'a dyn Array> {
        let schema = self.batch.schema_ref();
        let i = names.iter().find_map(|n| schema.index_of(n).ok())?;
        Some(self.batch.column(i).as_ref())
    }

    /// Row `i` of the first of the integer columns `names` there is.
    fn int(&self, names: &[&str]) -> impl Fn(usize) -> Option<i64> + 'a {
        let col = self.column(names);
        move |i| col.and_then(|c| int(c, i))
    }

    fn text(&self, names: &[&str]) -> Text<'a> {
        self.column(names).map_or(Text::None, Text::of)
    }
}

/// Every row of a Parquet file, a batch at a time, to `each` (the batch and
/// how many of its rows to read), up to [`Budget::of`] its data pages;
/// returns how many rows were left unread. Text columns are read
/// dictionary-encoded, and a row's cells count as decoded by the bytes
/// they would take apart (its text, or 8 for a number), as a reader
/// building each row would hold them.
fn rows(
    file: &mut dyn Reopen,
    (limit, hold): (u64, u64),
    what: &str,
    path: &Path,
    mut each: impl FnMut(&Rows, usize),
) -> Result<u64> {
    use parquet::arrow::arrow_reader::{
        ArrowReaderMetadata, ArrowReaderOptions, ParquetRecordBatchReaderBuilder,
    };
    let why = |e: parquet::errors::ParquetError| bad(path, format!("{what}: {e}"));
    let said = |e: String| bad(path, format!("{what}: {e}"));
    // A row group at a time where the table is large and laid out so (see
    // `parquet_stream`), else held whole.
    let table = parquet_stream::open(file, limit, hold).map_err(said)?;
    let meta = match &table {
        Table::Held(whole) => ArrowReaderMetadata::load(whole, ArrowReaderOptions::new())
            .map_err(why)?
            .metadata()
            .clone(),
        Table::Groups { meta, .. } => meta.clone(),
    };
    // The footer parsed once; text columns then asked for as
    // dictionary-encoded, the other columns as the file states them.
    let stated =
        ArrowReaderMetadata::try_new(meta.clone(), ArrowReaderOptions::new()).map_err(why)?;
    let fields: Vec<Field> = (stated.schema().fields().iter())
        .map(|f| match f.data_type() {
            DataType::Utf8 | DataType::LargeUtf8 => f.as_ref().clone().with_data_type(
                DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8)),
            ),
            _ => f.as_ref().clone(),
        })
        .collect();
    let options = ArrowReaderOptions::new().with_schema(std::sync::Arc::new(Schema::new(fields)));
    let dictionaries = ArrowReaderMetadata::try_new(meta.clone(), options).map_err(why)?;
    // What the column chunks take, not the file: metadata padding the file
    // out holds no rows and must not raise the budget.
    let data: u64 = (meta.row_groups().iter())
        .map(|rg| u64::try_from(rg.compressed_size()).unwrap_or(0))
        .fold(0, u64::saturating_add);
    let budget = Budget::of(data);
    let stated = u64::try_from(meta.file_metadata().num_rows()).unwrap_or(0);
    let expected = stated.min(budget.rows);
    let (mut n, mut decoded) = (0u64, 0u64);
    // The rows of one part of the file (a row group, or all): false once
    // the budget is spent.
    let mut part = |bytes: Window, group: Option<usize>| -> Result<bool> {
        let mut reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, dictionaries.clone())
                .with_batch_size(8192);
        if let Some(g) = group {
            reader = reader.with_row_groups(vec![g]);
        }
        for batch in reader.build().map_err(why)? {
            let batch = batch.map_err(|e| bad(path, format!("{what}: {e}")))?;
            let texts: Vec<Text> = (batch.columns().iter())
                .map(|c| Text::of(c.as_ref()))
                .collect();
            let numbers = 8 * batch.num_columns() as u64;
            let mut take = 0;
            for i in 0..batch.num_rows() {
                if n >= budget.rows || decoded > budget.decoded {
                    break;
                }
                let text: u64 = (texts.iter())
                    .filter_map(|t| t.get(i))
                    .map(|(s, _)| s.len() as u64)
                    .sum();
                decoded += numbers + text;
                n += 1;
                take += 1;
            }
            let rows = Rows {
                batch: &batch,
                expected,
            };
            each(&rows, take);
            if take < batch.num_rows() {
                return Ok(false);
            }
        }
        Ok(true)
    };
    let whole = match table {
        Table::Held(whole) => part(whole, None)?,
        Table::Groups { groups, len, .. } => {
            let mut whole = true;
            parquet_stream::each_group(
                file,
                (&groups, len),
                |g, bytes| {
                    whole = part(bytes, Some(g))?;
                    Ok(whole)
                },
                said,
            )?;
            whole
        }
    };
    Ok(if whole {
        0
    } else {
        stated.saturating_sub(n).max(1)
    })
}

/// What a Parquet table is read up to, for `data` bytes of column chunks:
/// 1 million rows plus 16 per byte, and 256 MiB of decoded cells plus 64
/// bytes per byte. Run-length and dictionary encoding can state a billion
/// rows, or a long string repeated in every one, in a few bytes; a real
/// trace row takes several bytes and decodes to a few dozen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Budget {
    rows: u64,
    decoded: u64,
}

impl Budget {
    fn of(data: u64) -> Self {
        Self {
            rows: data.saturating_mul(16).saturating_add(1_000_000),
            decoded: data.saturating_mul(64).saturating_add(256 << 20),
        }
    }
}

/// The projected ranges of `trace.parquet`, in either layout.
/// Also returns how many rows were damaged and how many were left unread.
fn ranges(
    file: &mut dyn Reopen,
    (limit, hold): (u64, u64),
    path: &Path,
) -> Result<(Ranges, u64, u64)> {
    let mut out = Ranges::default();
    let mut skipped = 0u64;
    // Names and threads shared: a program's thunks repeat every step.
    let mut names: foldhash::HashMap<Arc<str>, u32> = Default::default();
    let mut threads: foldhash::HashMap<(i64, i64), u32> = Default::default();
    let unread = rows(file, (limit, hold), TRACE, path, |b, take| {
        // Sized once for every row the table states: growing by doubling
        // held the old and the new vector at once (a third of the peak).
        if out.list.capacity() == 0 {
            let n = usize::try_from(b.expected).unwrap_or(0);
            let _ = out.list.try_reserve_exact(n);
            let _ = out.parents.near.try_reserve_exact(n);
            if b.column(&["Orig Start"]).is_some() {
                let _ = out.orig.try_reserve_exact(n);
            }
        }
        let text = b.text(&["Name", "Text"]);
        let start = b.int(&["Projected Start", "Start"]);
        let dur = b.column(&["Projected Duration"]);
        let end = b.int(&["End"]);
        let (orig_start, orig_dur) = (b.int(&["Orig Start"]), b.int(&["Orig Duration"]));
        let (id, parent) = (
            b.int(&["RangeId", "Range ID"]),
            b.int(&["ParentId", "Parent ID"]),
        );
        let (pid, tid) = (b.int(&["PID"]), b.int(&["TID"]));
        // This batch's dictionary keys to shared names.
        let mut by_key: Vec<Option<u32>> = Vec::new();
        let mut intern = |s: &str| match names.get(s) {
            Some(&i) => i,
            None => {
                let i = out.names.len() as u32;
                let a: Arc<str> = Arc::from(s);
                out.names.push(a.clone());
                names.insert(a, i);
                i
            }
        };
        for i in 0..take {
            let name = match text.get(i) {
                Some(("", _)) | None => None,
                Some((s, Some(k))) => {
                    if by_key.len() <= k {
                        by_key.resize(k + 1, None);
                    }
                    Some(*by_key[k].get_or_insert_with(|| intern(s)))
                }
                Some((s, None)) => Some(intern(s)),
            };
            let s = start(i);
            let e = match dur {
                Some(d) => s.and_then(|s| s.checked_add(int(d, i)?)),
                None => end(i),
            };
            // The CPU side, where the layout keeps it; a nonsense one is dropped
            // alone (the projected range stands).
            let orig = match (orig_start(i), orig_dur(i)) {
                (Some(s), Some(d)) if d >= 0 => s.checked_add(d).map(|e| (Ns(s), Ns(e))),
                _ => None,
            };
            match (id(i), s, e, name) {
                // The projection writes one row with neither name nor id (over
                // the whole session, real PAX and MaxText archives alike): not
                // a range, and not damage.
                (None, _, _, None) => {}
                (Some(id), Some(start), Some(end), Some(name))
                    if end >= start && out.threads.len() < Range::THREADS =>
                {
                    let at = (pid(i).unwrap_or(0), tid(i).unwrap_or(0));
                    let next = out.threads.len() as u32;
                    let thread = *threads.entry(at).or_insert_with(|| {
                        out.threads.push(at);
                        next
                    });
                    let parent = parent(i);
                    if let Some(o) = orig {
                        out.orig.resize(out.list.len(), Default::default());
                        out.orig.push(o);
                    }
                    out.ids.push(id);
                    out.parents.push(id, parent.unwrap_or(0));
                    out.list.push(Range {
                        start: Ns(start),
                        end: Ns(end),
                        name,
                        thread: thread
                            | if orig.is_some() { Range::ORIG } else { 0 }
                            | if parent.is_some() { Range::PARENT } else { 0 },
                    })
                }
                _ => skipped += 1,
            }
        }
    })?;
    Ok((out, skipped, unread))
}

/// Global device by (PID, TID) of XLA's launcher threads.
fn launchers(bytes: Vec<u8>, path: &Path) -> Result<HashMap<(i64, i64), u32>> {
    let mut out = HashMap::new();
    rows(
        &mut &bytes[..],
        (u64::MAX, u64::MAX),
        THREADS,
        path,
        |b, take| {
            let text = b.text(&["Name", "Thread Name"]);
            let (pid, tid) = (b.int(&["PID"]), b.int(&["TID"]));
            for i in 0..take {
                let Some((name, _)) = text.get(i) else {
                    continue;
                };
                let Some(c) = LAUNCHER.captures(name) else {
                    continue;
                };
                if let (Some(pid), Some(tid), Ok(global)) = (pid(i), tid(i), c[1].parse()) {
                    out.insert((pid, tid), global);
                }
            }
        },
    )?;
    Ok(out)
}

/// Reads one nsys-jax archive: a rank per device its process drove, each
/// given to `each` as soon as it is built. `cpu_ranges`: keep each launcher
/// thread's ranges at their CPU times (the CPU lanes), where the archive
/// has them.
pub(crate) fn read(
    path: &Path,
    (rank, cpu_ranges): (Option<u32>, bool),
    each: &mut dyn FnMut((Option<u32>, RankFile)),
) -> Result<()> {
    let file = std::fs::File::open(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    read_each(file, path, (rank, cpu_ranges), each)
}

/// [`read`] from any seekable reader (`path` names it in messages).
pub fn read_from(
    archive: impl Read + Seek,
    path: &Path,
    rank: Option<u32>,
    cpu_ranges: bool,
) -> Result<Vec<(Option<u32>, RankFile)>> {
    let mut out = Vec::new();
    read_each(archive, path, (rank, cpu_ranges), &mut |f| out.push(f))?;
    Ok(out)
}

/// [`read_from`], giving each device's rank to `each` as soon as it is
/// built: one device's ops at a time beside the archive's ranges, not
/// every device's.
pub(crate) fn read_each(
    mut archive: impl Read + Seek,
    path: &Path,
    (rank, cpu_ranges): (Option<u32>, bool),
    each: &mut dyn FnMut((Option<u32>, RankFile)),
) -> Result<()> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let size = archive.seek(std::io::SeekFrom::End(0)).map_err(io)?;
    archive.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
    let limit = member_limit(size);
    let mut zip =
        zip::ZipArchive::new(archive).map_err(|e| bad(path, format!("not a zip archive: {e}")))?;
    let Some(trace) = member_name(&zip, TRACE) else {
        return Err(bad(
            path,
            format!("a zip archive without {TRACE}: not an nsys-jax archive (or one made without the nvtx_gpu_proj_trace recipe)"),
        ));
    };
    // Refused by its stated size before a byte is inflated.
    stated_size(&mut zip, &trace, path, limit)?;
    let devices = match member(&mut zip, THREADS, path, limit)? {
        Some(bytes) => launchers(bytes, path)?,
        None => HashMap::new(),
    };
    let mut told = Vec::new();
    let dumps = dumps(&mut zip, path, limit, &mut told)?;
    let mut member = Member {
        zip: &mut zip,
        name: &trace,
    };
    // A table of up to 16 MiB is held: reading it twice would cost more.
    let (ranges, skipped, unread) = ranges(&mut member, (limit, 16 << 20), path)?;
    let count = ranges.list.len();
    // Said of the archive: on its first rank, after what assembling it says.
    let mut after = told;
    if unread > 0 {
        after.push(Warning::damaged(format!(
            "{}: {TRACE}: rows past the {} read left out ({unread} more stated): more rows, or longer ones, than its data pages can hold",
            path.display(),
            count as u64 + skipped
        )));
    }
    if skipped > 0 {
        after.push(Warning::damaged(format!(
            "{}: {skipped} projected range(s) without an id, a name or a valid time skipped",
            path.display()
        )));
    }
    let given = assemble(
        path,
        (rank, cpu_ranges),
        ranges,
        (&devices, &dumps),
        after,
        each,
    );
    if given == 0 {
        return Err(bad(
            path,
            format!("{TRACE} holds no XLA thunk or NCCL ranges ({count} ranges in all): was the run profiled with NVTX on?"),
        ));
    }
    Ok(())
}

/// What a thunk or NCCL range is.
struct Op {
    name: String,
    class: KernelClass,
    coll: Option<crate::model::CollKind>,
    /// A collective's sizes and group, from its program's dump.
    sizes: Option<hlo::Coll>,
}

/// What a thunk or range is; `None` for a collective's `-done`, whose work
/// is its `-start`'s. Where the thunk's program was dumped, its HLO
/// instruction's opcode decides (a collective also takes its sizes), else
/// its name does.
/// What an instruction's name does not tell, its opcode does: a custom
/// call by its target (cuBLAS GEMMs, cuDNN's fused attention), a fusion by
/// its kind (`kLoop`: elementwise ops fused; `kInput`: rooted at a
/// reduction), a `dot` or `convolution` as a GEMM.
fn class_of(instr: &hlo::Instr) -> KernelClass {
    let t = instr.target.to_ascii_lowercase();
    match instr.opcode.as_str() {
        "custom-call" if t.contains("cublas") || t.contains("matmul") || t.contains("gemm") => {
            KernelClass::Gemm
        }
        "custom-call" if t.contains("fmha") || t.contains("flash") || t.contains("attention") => {
            KernelClass::Attention
        }
        "fusion" if t == "kloop" => KernelClass::Elementwise,
        "fusion" if t == "kinput" => KernelClass::Reduction,
        "dot" | "convolution" => KernelClass::Gemm,
        "copy" | "copy-start" => KernelClass::Memory,
        _ => KernelClass::Other,
    }
}

/// What a range's name says, worked out once per distinct name: a
/// program's thunks repeat every step, and matching them per range was
/// nine tenths of reading an archive.
struct Said {
    thunk: bool,
    nccl: bool,
    /// A program run (`XlaModule:#hlo_module=…`): the module's name and
    /// program id.
    module: Option<(String, Option<u64>)>,
}

impl Said {
    fn of(name: &str) -> Self {
        Said {
            thunk: THUNK.is_match(name),
            nccl: name.to_ascii_lowercase().starts_with("nccl"),
            module: MODULE.captures(name).map(|m| {
                let id = m.get(2).and_then(|i| i.as_str().parse().ok());
                (m[1].to_owned(), id)
            }),
        }
    }
}

fn op_of(name: &str, program: Option<&HashMap<String, hlo::Instr>>) -> Option<Op> {
    let not_comm = |op: &str| match classify(op, Activity::Kernel) {
        // HLO names such as `broadcast.2` are not collectives.
        KernelClass::Communication => KernelClass::Other,
        c => c,
    };
    if let Some(c) = THUNK.captures(name) {
        let op = c[1].to_owned();
        if let Some(instr) = program.and_then(|p| p.get(&op)) {
            if instr.opcode.ends_with("-done") {
                return None;
            }
            return Some(match instr.coll {
                Some(sizes) => Op {
                    class: KernelClass::Communication,
                    coll: Some(sizes.kind),
                    sizes: Some(sizes),
                    name: op,
                },
                None => Op {
                    class: match not_comm(&op) {
                        KernelClass::Other => class_of(instr),
                        c => c,
                    },
                    coll: None,
                    sizes: None,
                    name: op,
                },
            });
        }
        return match COLLECTIVE.captures(&op) {
            Some(k) if k.get(2).is_some_and(|m| m.as_str() == "-done") => None,
            Some(k) => Some(Op {
                class: KernelClass::Communication,
                coll: Some(coll_kind(&k[1])),
                sizes: None,
                name: op,
            }),
            None => Some(Op {
                class: not_comm(&op),
                coll: None,
                sizes: None,
                name: op,
            }),
        };
    }
    Some(Op {
        name: name.to_owned(),
        class: KernelClass::Communication,
        coll: Some(coll_kind(name)),
        sizes: None,
    })
}

/// Gives `each` a rank per device with ops, in device order, each built
/// from the ranges and handed on before the next is; `after` goes on the
/// first rank's warnings. Returns how many it gave.
fn assemble(
    path: &Path,
    (rank, cpu_ranges): (Option<u32>, bool),
    mut ranges: Ranges,
    (devices, dumps): (&HashMap<(i64, i64), u32>, &Dumps),
    after: Vec<Warning>,
    each: &mut dyn FnMut((Option<u32>, RankFile)),
) -> usize {
    let mut warnings = Vec::new();
    let canon = ranges.link();
    let ranges = &ranges;
    // What each name says, worked out once.
    let said: Vec<Said> = ranges.names.iter().map(|n| Said::of(n)).collect();
    let said_of = |r: &Range| &said[r.name as usize];
    // The dumped program the `i`th range ran in: its nearest module range's.
    let program_of = |i: usize| {
        // Most archives keep no dumps: no walk up for every range then.
        if dumps.is_empty() {
            return None;
        }
        let mut p = ranges.up(i);
        let mut depth = 0;
        while let (Some((at, up)), true) = (p, depth < 64) {
            if let Some((module, id)) = &said_of(up).module {
                return program(dumps, module, *id);
            }
            p = ranges.up(at);
            depth += 1;
        }
        None
    };
    let is_thunk = |r: &Range| said_of(r).thunk;
    let is_nccl = |r: &Range| said_of(r).nccl;
    // Thunks nest (a command buffer's thunk holds others): the innermost are
    // the ops. Marked at the place of the id a thunk names as its parent.
    let mut outer = vec![false; ranges.list.len()];
    for (i, _) in ranges.list.iter().enumerate().filter(|(_, r)| is_thunk(r)) {
        if let Some((up, _)) = ranges.up(i).filter(|(_, u)| is_thunk(u)) {
            outer[up] = true;
        }
    }
    let is_outer = |i: usize| outer[canon.as_ref().map_or(i, |c| c[i] as usize)];
    // A NCCL range inside a collective's thunk is that collective.
    let in_collective = |i: usize| {
        let mut p = ranges.up(i);
        let mut depth = 0;
        while let (Some((at, up)), true) = (p, depth < 64) {
            if is_thunk(up)
                && op_of(ranges.name(up), program_of(at))
                    .is_none_or(|o| o.class == KernelClass::Communication)
            {
                return true;
            }
            p = ranges.up(at);
            depth += 1;
        }
        false
    };
    // A process driving one GPU launches from its main thread, which has no
    // launcher name: its device is the process's only (or first) one.
    let first_device: HashMap<i64, Device> =
        devices
            .iter()
            .fold(HashMap::new(), |mut m, (&(pid, _), &d)| {
                let e = m.entry(pid).or_insert(Device::Global(d));
                *e = (*e).min(Device::Global(d));
                m
            });
    let (unnamed, told) = unnamed_launchers(ranges, devices, |r| said_of(r).module.is_some());
    warnings
        .extend((told.into_iter()).map(|w| Warning::reading(format!("{}: {w}", path.display()))));
    // Each thread's device, worked out once.
    let thread_device: Vec<Device> = (ranges.threads.iter())
        .map(|&(pid, tid)| {
            devices
                .get(&(pid, tid))
                .map(|&d| Device::Global(d))
                .or_else(|| unnamed.get(&(pid, tid)).map(|&i| Device::Local(pid, i)))
                .or_else(|| first_device.get(&pid).copied())
                .or_else(|| {
                    unnamed
                        .iter()
                        .any(|(&(p, _), _)| p == pid)
                        .then_some(Device::Local(pid, 0))
                })
                .unwrap_or(Device::Unknown)
        })
        .collect();
    // The devices in order, each thread's place among them, and the ranges
    // grouped by device in row order (a counting sort: one pass, however
    // many devices a crafted archive names).
    let mut order: Vec<Device> = thread_device.clone();
    order.sort_unstable();
    order.dedup();
    let place_of: Vec<usize> = (thread_device.iter())
        .map(|d| order.binary_search(d).unwrap_or(0))
        .collect();
    let place = |r: &Range| place_of[r.thread()];
    let mut from = vec![0usize; order.len() + 1];
    for r in &ranges.list {
        from[place(r) + 1] += 1;
    }
    for k in 1..from.len() {
        from[k] += from[k - 1];
    }
    let mut next = from.clone();
    let mut grouped = vec![0u32; ranges.list.len()];
    for (i, r) in ranges.list.iter().enumerate() {
        let at = &mut next[place(r)];
        grouped[*at] = i as u32;
        *at += 1;
    }
    // What each name is, in each program: worked out once.
    let mut ops: foldhash::HashMap<(u32, usize), Option<Op>> = Default::default();
    let mut give = Give {
        rank,
        first: Some((warnings, after)),
        given: 0,
        locals: Vec::new(),
        each,
    };
    // A device at a time, in device order: its ops built, finished and
    // handed on.
    for (k, &device) in order.iter().enumerate() {
        let mine = &grouped[from[k]..from[k + 1]];
        if mine.is_empty() {
            continue;
        }
        let mut b = TimelineBuilder::new(path, SourceFormat::Xla);
        if let Some(d) = device.global().or(rank) {
            b.set_rank(d);
        }
        // Each range is at most one op of its device: room made at once.
        b.reserve_ops(mine.len());
        let t = &mut b;
        for &i in mine {
            let (i, r) = (i as usize, &ranges.list[i as usize]);
            let is_op = (is_thunk(r) && !is_outer(i)) || (is_nccl(r) && !in_collective(i));
            let op = if is_op {
                let program = program_of(i);
                let key = (
                    r.name,
                    program.map_or(0, |p| std::ptr::from_ref(p) as usize),
                );
                ops.entry(key)
                    .or_insert_with(|| op_of(ranges.name(r), program))
                    .as_ref()
            } else {
                None
            };
            let said = said_of(r);
            // On the launcher's CPU lane: the range as XLA ran it there, a
            // thunk that is a device op counting as a launch.
            let cpu = ranges
                .orig(i)
                .and_then(|(s, e)| Some((s, t.between(s, e).ok()?)))
                .filter(|_| cpu_ranges);
            if let Some((s, d)) = cpu {
                let name = t.intern(ranges.name(r));
                let tid = u64::try_from(ranges.thread(r).1).unwrap_or(0);
                // A program run is named over its thunks; a thunk is work the
                // launcher did, shaded as an operator is.
                let kind = if said.module.is_some() {
                    CpuKind::Annotation
                } else {
                    CpuKind::Op
                };
                t.push_cpu(tid, name, kind, s, d, op.is_some());
            }
            if let Some((module, _)) = &said.module {
                if let Ok(span) = t.between(r.start, r.end) {
                    let name = t.intern(module);
                    t.push_annotation(name, r.start, r.start + span, true);
                }
                continue;
            }
            let Some(op) = op else {
                continue;
            };
            let Ok(dur) = t.between(r.start, r.end) else {
                continue;
            };
            let name = t.intern(&op.name);
            let meta = op.sizes.map(|c| {
                t.push_coll(crate::model::CollMeta {
                    kind: c.kind,
                    name,
                    in_nelems: c.in_elems,
                    out_nelems: c.out_elems,
                    dtype_size: c.elem_bytes,
                    group_size: c.group,
                    pg_name: None,
                    pg_ranks: None,
                    seq: None,
                    peer: None,
                })
            });
            // Launched when its thunk began on the CPU: how far ahead XLA ran.
            let launch = ranges.orig(i).map_or(r.start, |o| o.0.min(r.start));
            let _ = t.push_op(DeviceOp {
                coll: op.coll,
                device: device.index(),
                meta: crate::model::Slot::from(meta),
                launch,
                ..DeviceOp::new(name, Activity::Kernel, op.class, r.start, dur)
            });
        }
        give.built(device, b);
    }
    give.finish()
}

/// Hands each device's rank on as it is built. Devices told apart only by
/// their threads (`Local`) have no global number: when there are several,
/// each takes the next free rank (the file's own number would be one rank
/// for all of them), which is known once all are built, so those are held
/// until then; they come after every numbered device.
struct Give<'e> {
    rank: Option<u32>,
    /// Warnings for the first rank given: assembling's, before the rank's
    /// own, and the archive's, after them.
    first: Option<(Vec<Warning>, Vec<Warning>)>,
    given: usize,
    locals: Vec<(Device, TimelineBuilder)>,
    each: &'e mut dyn FnMut((Option<u32>, RankFile)),
}

impl Give<'_> {
    fn built(&mut self, device: Device, t: TimelineBuilder) {
        if t.op_count() == 0 {
            return;
        }
        if matches!(device, Device::Local(..)) || !self.locals.is_empty() {
            self.locals.push((device, t));
            return;
        }
        self.give(device.global().or(self.rank), t);
    }

    fn give(&mut self, named: Option<u32>, t: TimelineBuilder) {
        let mut file = RankFile::built(t);
        if let Some((before, after)) = self.first.take() {
            file.warnings.splice(0..0, before);
            file.warnings.extend(after);
        }
        self.given += 1;
        (self.each)((named, file));
    }

    fn finish(mut self) -> usize {
        let locals = (self.locals.iter())
            .filter(|(d, _)| matches!(d, Device::Local(..)))
            .count();
        for (device, t) in std::mem::take(&mut self.locals) {
            let named = match device {
                Device::Global(g) => Some(g),
                Device::Local(..) if locals > 1 => None,
                Device::Local(..) | Device::Unknown => self.rank,
            };
            self.give(named, t);
        }
        self.given
    }
}

/// Which device a range's work ran on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Device {
    /// The global device its launcher thread's name gives.
    Global(u32),
    /// The `i`th launcher thread of a process whose threads have no names.
    Local(i64, u32),
    /// The process's only device, not named.
    Unknown,
}

impl Device {
    fn global(self) -> Option<u32> {
        match self {
            Device::Global(g) => Some(g),
            _ => None,
        }
    }

    /// The device number within what the archive says.
    fn index(self) -> u32 {
        match self {
            Device::Global(g) => g,
            Device::Local(_, i) => i,
            Device::Unknown => 0,
        }
    }
}

/// Launcher threads of processes that have no `XlaLauncher` thread names
/// (archives from nsys-jax before `thread-metadata.parquet`): a process
/// driving N GPUs launches each executable on N threads at once, one per
/// device, where a process driving one GPU launches from its main thread.
/// So the threads of a process that run the same program (an
/// `XlaModule` range with its `program_id`) are its devices, numbered in
/// thread-id order (XLA starts them in device order). Autotuning runs
/// modules without a program id on worker threads; those do not count.
/// Returns the devices by (PID, TID), and what to tell the user.
fn unnamed_launchers(
    ranges: &Ranges,
    named: &HashMap<(i64, i64), u32>,
    is_module: impl Fn(&Range) -> bool,
) -> (HashMap<(i64, i64), u32>, Vec<String>) {
    let named_pids: HashSet<i64> = named.keys().map(|&(pid, _)| pid).collect();
    let with_program =
        (ranges.list.iter()).any(|r| is_module(r) && ranges.name(r).contains("program_id="));
    // (pid, module text) -> threads that ran it; pid -> threads running programs.
    let mut runs: HashMap<(i64, &str), HashSet<i64>> = HashMap::new();
    let mut launching: HashMap<i64, HashSet<i64>> = HashMap::new();
    for r in &ranges.list {
        let (pid, tid) = ranges.thread(r);
        if named_pids.contains(&pid) {
            continue;
        }
        let name = ranges.name(r);
        if is_module(r) && (!with_program || name.contains("program_id=")) {
            runs.entry((pid, name)).or_default().insert(tid);
            launching.entry(pid).or_default().insert(tid);
        }
    }
    let mut shared: HashMap<i64, HashSet<i64>> = HashMap::new();
    for ((pid, _), tids) in runs.into_iter().filter(|(_, t)| t.len() > 1) {
        shared.entry(pid).or_default().extend(tids);
    }
    let mut out = HashMap::new();
    let mut told = Vec::new();
    let mut pids: Vec<i64> = launching.keys().copied().collect();
    pids.sort_unstable();
    for pid in pids {
        let threads = launching[&pid].len();
        match shared.get(&pid) {
            Some(tids) => {
                let mut tids: Vec<i64> = tids.iter().copied().collect();
                tids.sort_unstable();
                for (i, &tid) in tids.iter().enumerate() {
                    out.insert((pid, tid), i as u32);
                }
                let rest = threads.saturating_sub(tids.len());
                told.push(format!(
                    "no XlaLauncher thread names (no {THREADS}): the {} threads of process {pid} that run the same XLA programs at once are read as {} devices, numbered in thread order; which global device each drove is not in the archive{}",
                    tids.len(),
                    tids.len(),
                    match rest {
                        0 => String::new(),
                        n => format!(" (the programs of {n} other thread(s), such as the main thread, are counted on the first device)"),
                    }
                ));
            }
            None if threads > 1 => told.push(format!(
                "no XlaLauncher thread names (no {THREADS}): process {pid} ran XLA programs from {threads} threads that never run the same XLA program at once, so it is read as one device; if it drove several GPUs, which thread drove which is not in the archive"
            )),
            None => {}
        }
    }
    (out, told)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every rank of the archive at `path`, as the load is given them.
    fn read(
        path: &Path,
        rank: Option<u32>,
        cpu_ranges: bool,
    ) -> Result<Vec<(Option<u32>, RankFile)>> {
        let mut out = Vec::new();
        super::read(path, (rank, cpu_ranges), &mut |f| out.push(f))?;
        Ok(out)
    }
    use crate::synth::nsys_jax::{
        archive, thread_table, trace_table, trace_table_in, Layout, ProjRange,
    };

    /// A projected range of process `pid`'s thread 7.
    fn range(
        pid: i64,
        id: i64,
        parent: Option<i64>,
        name: &str,
        start: i64,
        end: i64,
    ) -> ProjRange {
        ProjRange {
            id,
            parent,
            name: name.into(),
            start,
            end,
            pid,
            tid: 7,
            orig: None,
        }
    }

    /// One training step of process `p` (device `p`) on its launcher thread:
    /// a fusion, an async all-reduce whose NCCL range sits inside its start
    /// thunk, a command buffer holding a GEMM, and a NCCL range of its own.
    fn step(p: i64) -> Vec<ProjRange> {
        let r = |id, parent, name: &str, start, end| range(100 + p, id, parent, name, start, end);
        vec![
            r(
                1,
                None,
                "XlaModule:#hlo_module=jit_train_step,program_id=3#",
                0,
                1000,
            ),
            r(2, Some(1), "Thunk:#hlo_op=fusion.1#", 0, 300),
            r(3, Some(1), "Thunk:#hlo_op=all-reduce-start.2#", 300, 700),
            r(4, Some(1), "Thunk:#hlo_op=all-reduce-done.2#", 700, 710),
            r(
                5,
                Some(1),
                "Thunk:#name=cmd,hlo_op=command_buffer#",
                710,
                900,
            ),
            r(6, Some(5), "Thunk:#hlo_op=cublas-gemm.3#", 720, 880),
            r(7, Some(3), "ncclAllReduce", 320, 690),
            r(8, Some(1), "ncclAllGather", 910, 990),
        ]
    }

    fn zip_file(bytes: &[u8]) -> tempfile::NamedTempFile {
        let mut f = tempfile::Builder::new().suffix(".zip").tempfile().unwrap();
        std::io::Write::write_all(&mut f, bytes).unwrap();
        f
    }

    fn ops(f: &RankFile) -> Vec<(String, i64, i64, Option<crate::model::CollKind>)> {
        let t = &f.timeline;
        t.ops
            .iter()
            .map(|o| {
                (
                    t.name(o.name).to_owned(),
                    o.start.get(),
                    o.dur.get(),
                    o.coll,
                )
            })
            .collect()
    }

    /// The older layout keeps each range's CPU times (`Orig Start`/`Orig
    /// Duration`): the launcher thread becomes a CPU lane holding the module
    /// and its thunks as XLA ran them, the device-op thunks counted as its
    /// launches, and each op's launch is its thunk's CPU start. Here the CPU
    /// runs 400 ns ahead of the GPU. Without `cpu_ranges`, no lane, but the
    /// launches stay (they are the ops' own data).
    #[test]
    fn launcher_threads_are_cpu_lanes_from_the_original_times() {
        let ranges: Vec<ProjRange> = step(2)
            .into_iter()
            .map(|r| ProjRange {
                orig: Some((r.start - 400, r.start - 400 + (r.end - r.start) / 10)),
                ..r
            })
            .collect();
        let threads = thread_table(&[(102, 7, "XlaLauncher:#global=2,local=0,process=2,slice=0#")]);
        let bytes = archive(
            "run_2",
            &trace_table(&ranges, Layout::Projected),
            Some(&threads),
        );
        let f = zip_file(&bytes);
        let files = read(f.path(), None, true).unwrap();
        let t = &files[0].1.timeline;
        // The module, 5 thunks and 2 NCCL ranges; 4 of them device ops (not
        // the `-done`, the command buffer holding the GEMM, nor the NCCL
        // range inside the all-reduce).
        let th: Vec<(u64, u64, usize)> = t
            .cpu
            .iter()
            .map(|c| (c.tid, c.launches, c.ops.len()))
            .collect();
        assert_eq!(th, [(7, 4, 8)]);
        let first = &t.cpu[0].ops[0];
        assert_eq!((first.start.get(), first.dur.get()), (-400, 100));
        assert_eq!(
            t.name(first.name),
            "XlaModule:#hlo_module=jit_train_step,program_id=3#"
        );
        for o in t.ops.iter() {
            assert_eq!((o.start - o.launch).get(), 400, "{}", t.name(o.name));
        }
        let lean = read(f.path(), None, false).unwrap();
        assert!(lean[0].1.timeline.cpu.is_empty());
        assert!(lean[0]
            .1
            .timeline
            .ops
            .iter()
            .all(|o| (o.start - o.launch).get() == 400));
        // The newer layout has no CPU times: no lane, launches at the start.
        let bytes = archive(
            "run_2",
            &trace_table(&ranges, Layout::StartEnd),
            Some(&threads),
        );
        let f = zip_file(&bytes);
        let t = &read(f.path(), None, true).unwrap()[0].1.timeline;
        assert!(t.cpu.is_empty());
        assert!(t.ops.iter().all(|o| o.launch == o.start));
    }

    /// Real archives' projection has one row with neither name nor id,
    /// over the whole session: read silently. A range with an id but no
    /// name is still counted as skipped.
    #[test]
    fn the_projections_session_row_is_no_range_and_no_damage() {
        use crate::synth::nsys_jax::trace_table_as_written;
        let threads = thread_table(&[(102, 7, "XlaLauncher:#global=2,local=0,process=2,slice=0#")]);
        let bytes = archive("run_2", &trace_table_as_written(&step(2)), Some(&threads));
        let f = zip_file(&bytes);
        let files = read(f.path(), None, true).unwrap();
        assert_eq!(ops(&files[0].1).len(), 4);
        assert!(files[0].1.warnings.is_empty(), "{:?}", files[0].1.warnings);
        let mut ranges = step(2);
        ranges[1].name = String::new();
        let bytes = archive("run_2", &trace_table_as_written(&ranges), Some(&threads));
        let f = zip_file(&bytes);
        let w =
            crate::model::warning::joined(&read(f.path(), None, true).unwrap()[0].1.warnings, "\n");
        assert!(
            w.contains("1 projected range(s) without an id, a name or a valid time"),
            "{w}"
        );
    }

    #[test]
    fn innermost_thunks_are_ops_and_collectives_are_communication() {
        use crate::model::CollKind::{AllGather, AllReduce};
        for layout in [Layout::Projected, Layout::StartEnd] {
            let threads =
                thread_table(&[(102, 7, "XlaLauncher:#global=2,local=0,process=2,slice=0#")]);
            let bytes = archive("run_2", &trace_table(&step(2), layout), Some(&threads));
            let f = zip_file(&bytes);
            let files = read(f.path(), None, true).unwrap();
            assert_eq!(files.len(), 1, "{layout:?}");
            let (rank, file) = &files[0];
            assert_eq!(*rank, Some(2), "the launcher's global device");
            assert_eq!(
                ops(file),
                vec![
                    ("fusion.1".to_owned(), 0, 300, None),
                    ("all-reduce-start.2".to_owned(), 300, 400, Some(AllReduce)),
                    ("cublas-gemm.3".to_owned(), 720, 160, None),
                    ("ncclAllGather".to_owned(), 910, 80, Some(AllGather)),
                ],
                "{layout:?}"
            );
            let t = &file.timeline;
            let classes: Vec<KernelClass> = t.ops.iter().map(|o| o.class).collect();
            assert_eq!(
                classes,
                [
                    KernelClass::Other,
                    KernelClass::Communication,
                    KernelClass::Gemm,
                    KernelClass::Communication
                ]
            );
            // The module execution is kept as a device-side annotation.
            assert_eq!(t.annotations.len(), 1);
            assert_eq!(t.name(t.annotations[0].name), "jit_train_step");
        }
    }

    /// Two ranges with one id (a damaged or merged table): a parent id
    /// names the last of them, and what is said of the id is said of both.
    /// Thunk 3 sits in the second thunk 2, so both thunks 2 hold another and
    /// are not ops; NCCL range 5 names id 4, which no range has: it is a
    /// collective of its own.
    /// Ids kept as runs read back as pushed, and are found as a search of
    /// the ids themselves finds them.
    #[test]
    fn ids_as_runs() {
        let of = |v: &[i64]| {
            let mut ids = Ids::default();
            v.iter().for_each(|&i| ids.push(i));
            ids
        };
        let v = [5, 6, 7, 9, 10, 10, 11, i64::MAX - 1, i64::MAX, i64::MIN, 3];
        let ids = of(&v);
        assert!(ids.iter().eq(v.iter().copied()));
        assert_eq!(ids.at, [0, 3, 5, 7, 9, 10]);
        assert!(!ids.is_sorted());
        let sorted = of(&[5, 6, 7, 9, 10, 10, 11, 20]);
        assert!(sorted.is_sorted() && sorted.repeats_sorted());
        let found: Vec<Option<u32>> = [4, 5, 7, 8, 9, 10, 11, 12, 20, i64::MIN, i64::MAX]
            .map(|id| sorted.find_sorted(id))
            .to_vec();
        assert_eq!(
            found,
            [
                None,
                Some(0),
                Some(2),
                None,
                Some(3),
                Some(5),
                Some(6),
                None,
                Some(7),
                None,
                None
            ]
        );
        let one = of(&[1, 2, 3, 4]);
        assert!(one.is_sorted() && !one.repeats_sorted() && one.at.len() == 1);
        assert_eq!(one.find_sorted(4), Some(3));
        assert!(Ids::default().is_sorted() && Ids::default().find_sorted(0).is_none());
    }

    /// Parent ids read back as pushed, near their ranges' ids or not.
    #[test]
    fn parents_near_and_far() {
        let pairs = [
            (10, 9),
            (11, 0),
            (12, 12),
            (13, 20),
            (i64::MAX, i64::MIN),
            (5, 5 - i64::from(i32::MAX)),
            (5, 5 - i64::from(i32::MIN)),
            (5, 5 + i64::from(i32::MAX) + 1),
        ];
        let mut p = Parents::default();
        pairs.iter().for_each(|&(id, parent)| p.push(id, parent));
        let back: Vec<i64> = p.iter(pairs.iter().map(|x| x.0)).collect();
        assert_eq!(back, pairs.map(|x| x.1));
        assert_eq!(p.far.len(), 3);
    }

    #[test]
    fn a_shared_id_is_its_last_range() {
        use crate::model::CollKind::{AllGather, AllReduce};
        // Ids in row order (searched as they are), then the same ranges
        // numbered out of order (searched through a sorted copy).
        for id in [|i: i64| i, |i: i64| [0, 50, 20, 40, 10, 30][i as usize]] {
            let r = |i, parent: Option<i64>, name: &str, start, end| {
                range(100, id(i), parent.map(id), name, start, end)
            };
            let ranges = vec![
                r(1, None, "XlaModule:#hlo_module=m,program_id=3#", 0, 1000),
                r(2, Some(1), "Thunk:#hlo_op=fusion.1#", 0, 100),
                r(2, Some(1), "Thunk:#hlo_op=command_buffer#", 200, 600),
                r(3, Some(2), "Thunk:#hlo_op=all-reduce-start.2#", 300, 500),
                r(5, Some(4), "ncclAllGather", 700, 800),
            ];
            let bytes = archive("run", &trace_table(&ranges, Layout::StartEnd), None);
            let f = zip_file(&bytes);
            let files = read(f.path(), None, false).unwrap();
            assert_eq!(
                ops(&files[0].1),
                vec![
                    ("all-reduce-start.2".to_owned(), 300, 200, Some(AllReduce)),
                    ("ncclAllGather".to_owned(), 700, 100, Some(AllGather)),
                ]
            );
        }
    }

    /// Thunks of collectives XLA's loop passes copied (names from a
    /// MaxText archive) are communication of their opcode's kind, and the
    /// NCCL range inside each is that collective, not a second one.
    #[test]
    fn cloned_and_peeled_collectives_are_communication_once() {
        use crate::model::CollKind::{AllToAll, ReduceScatter};
        let r = |id, parent, name: &str, start, end| range(100, id, parent, name, start, end);
        let ranges = vec![
            r(1, None, "XlaModule:#hlo_module=jit_train_step#", 0, 1000),
            r(
                2,
                Some(1),
                "Thunk:#hlo_op=reduce-scatter.57.double_buffer_clone.1#",
                0,
                200,
            ),
            r(3, Some(2), "ncclReduceScatter", 10, 190),
            r(
                4,
                Some(1),
                "Thunk:#hlo_op=reduce-scatter.57.peeled_double_buffer.1#",
                200,
                400,
            ),
            r(5, Some(4), "ncclReduceScatter", 210, 390),
            r(6, Some(1), "Thunk:#hlo_op=all-to-all.1.1#", 400, 500),
            r(7, Some(6), "ncclAllToAll", 410, 490),
            r(
                8,
                Some(1),
                "Thunk:#hlo_op=all-gather-done.3.clone#",
                500,
                510,
            ),
            r(9, Some(1), "Thunk:#hlo_op=fusion.57.clone.1#", 510, 600),
        ];
        let bytes = archive("run", &trace_table(&ranges, Layout::StartEnd), None);
        let f = zip_file(&bytes);
        let files = read(f.path(), None, true).unwrap();
        let file = &files[0].1;
        assert_eq!(
            ops(file),
            vec![
                (
                    "reduce-scatter.57.double_buffer_clone.1".to_owned(),
                    0,
                    200,
                    Some(ReduceScatter)
                ),
                (
                    "reduce-scatter.57.peeled_double_buffer.1".to_owned(),
                    200,
                    200,
                    Some(ReduceScatter)
                ),
                ("all-to-all.1.1".to_owned(), 400, 100, Some(AllToAll)),
                ("fusion.57.clone.1".to_owned(), 510, 90, None),
            ]
        );
        let classes: Vec<KernelClass> = file.timeline.ops.iter().map(|o| o.class).collect();
        assert_eq!(
            classes,
            [
                KernelClass::Communication,
                KernelClass::Communication,
                KernelClass::Communication,
                KernelClass::Other
            ]
        );
    }

    /// With the programs' HLO dumped in the archive, a thunk is what its
    /// instruction's opcode says: `all-gather-start.3` an all-gather of
    /// PAX's sizes (a bf16 shard of 205,168,720 elements gathered over 4
    /// devices), `ag-renamed.9` (an all-reduce by opcode) communication
    /// whatever its name, `all-reduce-lookalike.5` (a fusion) compute.
    #[test]
    fn dumped_programs_decide_what_a_thunk_is_and_its_sizes() {
        use super::hlo::write::{array, calling, dump, instr, pax_all_gather};
        use crate::model::CollKind::{AllGather, AllReduce};
        const BF16: i32 = 16;
        let mut instrs = pax_all_gather();
        let x = || array(BF16, &[64]);
        // Names that say nothing, where the dump does: a cuBLAS GEMM and
        // cuDNN's attention called by name (PAX's `custom-call.219.0`), a
        // loop fusion, a reduction-rooted fusion.
        instrs.extend([
            calling(
                instr("custom-call.219.0", "custom-call", x(), 10, &[1], None),
                "__cublas$lt$matmul",
            ),
            calling(
                instr("custom-call.7", "custom-call", x(), 11, &[1], None),
                "__cudnn$fmhaSoftmax",
            ),
            calling(instr("fusion.40", "fusion", x(), 12, &[1], None), "kLoop"),
            calling(instr("fusion.41", "fusion", x(), 13, &[1], None), "kInput"),
        ]);
        instrs.extend([
            instr(
                "ag-renamed.9",
                "all-reduce",
                array(BF16, &[64]),
                4,
                &[1],
                Some(4),
            ),
            instr(
                "all-reduce-lookalike.5",
                "fusion",
                array(BF16, &[64]),
                5,
                &[1],
                None,
            ),
        ]);
        let module = dump("pjit__wrapped_step_fn", instrs);
        let r = |id, parent, name: &str, start, end| range(100, id, parent, name, start, end);
        let ranges = vec![
            r(
                1,
                None,
                "XlaModule:#hlo_module=pjit__wrapped_step_fn,program_id=12#",
                0,
                1000,
            ),
            r(2, Some(1), "Thunk:#hlo_op=all-gather-start.3#", 0, 400),
            r(3, Some(2), "ncclAllGather", 10, 390),
            r(4, Some(1), "Thunk:#hlo_op=all-gather-done.3#", 400, 410),
            r(5, Some(1), "Thunk:#hlo_op=ag-renamed.9#", 410, 500),
            r(6, Some(5), "ncclAllReduce", 420, 490),
            r(
                7,
                Some(1),
                "Thunk:#hlo_op=all-reduce-lookalike.5#",
                500,
                600,
            ),
            r(8, Some(1), "Thunk:#hlo_op=custom-call.219.0#", 600, 700),
            r(9, Some(1), "Thunk:#hlo_op=custom-call.7#", 700, 800),
            r(10, Some(1), "Thunk:#hlo_op=fusion.40#", 800, 900),
            r(11, Some(1), "Thunk:#hlo_op=fusion.41#", 900, 1000),
        ];
        let bytes = crate::synth::nsys_jax::archive_with(
            "pax",
            &trace_table(&ranges, Layout::StartEnd),
            None,
            &[(
                "dump/module_0012.pjit__wrapped_step_fn.sm_9.0_gpu_after_optimizations.hlo.pb.xz",
                &module,
            )],
        );
        let f = zip_file(&bytes);
        let files = read(f.path(), None, true).unwrap();
        let file = &files[0].1;
        assert_eq!(
            ops(file)[..3],
            [
                ("all-gather-start.3".to_owned(), 0, 400, Some(AllGather)),
                ("ag-renamed.9".to_owned(), 410, 90, Some(AllReduce)),
                ("all-reduce-lookalike.5".to_owned(), 500, 100, None),
            ]
        );
        let t = &file.timeline;
        let classes: Vec<KernelClass> = t.ops.iter().skip(2).map(|o| o.class).collect();
        assert_eq!(
            classes,
            [
                KernelClass::Other,
                KernelClass::Gemm,
                KernelClass::Attention,
                KernelClass::Elementwise,
                KernelClass::Reduction
            ]
        );
        let m = t.coll_meta(&t.ops[0]).expect("the all-gather's sizes");
        assert_eq!(
            (m.in_nelems, m.out_nelems, m.dtype_size, m.group_size),
            (Some(205_168_720), Some(820_674_880), Some(2), Some(4))
        );
        assert_eq!(m.in_bytes(), Some(410_337_440));
        // A dump that does not decode is said; names decide then.
        let bytes = crate::synth::nsys_jax::archive_with(
            "pax",
            &trace_table(&ranges, Layout::StartEnd),
            None,
            &[(
                "dump/module_0012.pjit__wrapped_step_fn.after_optimizations.hlo.pb.xz",
                b"junk",
            )],
        );
        let f = zip_file(&bytes);
        let files = read(f.path(), None, true).unwrap();
        let w = crate::model::warning::joined(&files[0].1.warnings, "\n");
        assert!(
            w.contains("not xz-compressed") && w.contains("told apart by name"),
            "{w}"
        );
        // By name, `ag-renamed.9` is compute and its NCCL range a
        // collective of its own: what the dump sets right.
        assert_eq!(files[0].1.timeline.ops.len(), 8);
    }

    #[test]
    fn one_process_driving_two_gpus_gives_two_ranks() {
        let mut ranges = step(0);
        ranges.extend(step(0).into_iter().map(|mut r| {
            r.id += 100;
            r.parent = r.parent.map(|p| p + 100);
            r.tid = 8;
            r
        }));
        let threads = thread_table(&[
            (100, 7, "XlaLauncher:#global=4,local=0,process=1,slice=0#"),
            (100, 8, "XlaLauncher:#global=5,local=1,process=1,slice=0#"),
        ]);
        let bytes = archive(
            "p1",
            &trace_table(&ranges, Layout::StartEnd),
            Some(&threads),
        );
        let f = zip_file(&bytes);
        let files = read(f.path(), None, true).unwrap();
        let ranks: Vec<Option<u32>> = files.iter().map(|f| f.0).collect();
        assert_eq!(ranks, [Some(4), Some(5)]);
        assert!(files.iter().all(|(_, f)| f.timeline.ops.len() == 4));
    }

    /// MaxText driving 4 GPUs from one process, archived by an nsys-jax
    /// that kept no thread names: each launcher thread runs the training
    /// step at once, so each is a device; the main thread's one-device
    /// program lands on the first, and autotuning (no program id) is no
    /// device of its own.
    #[test]
    fn unnamed_launcher_threads_of_one_process_are_its_devices() {
        let mut ranges = Vec::new();
        for (i, tid) in [31i64, 32, 33, 34].into_iter().enumerate() {
            ranges.extend(step(0).into_iter().map(|mut r| {
                r.id += 100 * i as i64;
                r.parent = r.parent.map(|p| p + 100 * i as i64);
                r.tid = tid;
                r
            }));
        }
        let r = |id, parent, name: &str, start, end, tid| ProjRange {
            tid,
            ..range(100, id, parent, name, start, end)
        };
        ranges.extend([
            r(
                900,
                None,
                "XlaModule:#hlo_module=jit_convert,program_id=9#",
                2000,
                2100,
                7,
            ),
            r(901, Some(900), "Thunk:#hlo_op=convert.1#", 2000, 2050, 7),
            r(
                910,
                None,
                "XlaModule:#hlo_module=gemm_autotune#",
                3000,
                3100,
                50,
            ),
            r(
                911,
                Some(910),
                "Thunk:#hlo_op=cublas-gemm.9#",
                3000,
                3050,
                50,
            ),
        ]);
        let bytes = archive("maxtext", &trace_table(&ranges, Layout::StartEnd), None);
        let f = zip_file(&bytes);
        let files = read(f.path(), Some(0), true).unwrap();
        assert_eq!(files.len(), 4, "one rank per launcher thread");
        // No global numbers: the load gives them the next free ranks, in
        // thread order.
        assert!(files.iter().all(|(r, _)| r.is_none()));
        let counts: Vec<usize> = files.iter().map(|(_, f)| f.timeline.ops.len()).collect();
        assert_eq!(
            counts,
            [6, 4, 4, 4],
            "the main thread's and autotuning's ops on the first"
        );
        let devices: Vec<u32> = files
            .iter()
            .map(|(_, f)| f.timeline.ops[0].device)
            .collect();
        assert_eq!(devices, [0, 1, 2, 3]);
        let w = crate::model::warning::joined(&files[0].1.warnings, "\n");
        assert!(
            w.contains("the 4 threads of process 100 that run the same XLA programs at once are read as 4 devices")
                && w.contains("1 other thread(s)"),
            "{w}"
        );
        // Two threads that never run the same program: one device, said.
        let mut ranges = step(0);
        ranges.extend([
            r(
                900,
                None,
                "XlaModule:#hlo_module=jit_eval,program_id=9#",
                2000,
                2100,
                8,
            ),
            r(901, Some(900), "Thunk:#hlo_op=fusion.4#", 2000, 2050, 8),
        ]);
        let bytes = archive("maxtext", &trace_table(&ranges, Layout::StartEnd), None);
        let f = zip_file(&bytes);
        let files = read(f.path(), Some(3), true).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].0, Some(3), "the file's own rank");
        let w = crate::model::warning::joined(&files[0].1.warnings, "\n");
        assert!(w.contains("from 2 threads that never run the same XLA program at once, so it is read as one device"), "{w}");
    }

    #[test]
    fn damaged_archives_are_named_errors() {
        let f = zip_file(b"PK\x03\x04 not really");
        let e = read(f.path(), None, true).unwrap_err().to_string();
        assert!(e.contains("not a zip archive"), "{e}");
        let bytes = archive("x", b"PAR1 not parquet", None);
        let f = zip_file(&bytes);
        let e = read(f.path(), None, true).unwrap_err().to_string();
        assert!(e.contains("nvtx_gpu_proj_trace/trace.parquet"), "{e}");
        // A zip that is not from nsys-jax.
        let mut zip = zip::ZipWriter::new(std::io::Cursor::new(Vec::new()));
        zip.start_file("readme.txt", zip::write::SimpleFileOptions::default())
            .unwrap();
        let f = zip_file(&zip.finish().unwrap().into_inner());
        let e = read(f.path(), None, true).unwrap_err().to_string();
        assert!(e.contains("not an nsys-jax archive"), "{e}");
        // 80 MB of zeros packed into a few hundred kB: refused, not read.
        let bytes = archive("x", &vec![0u8; 80 << 20], None);
        assert!(bytes.len() < 1 << 20);
        let f = zip_file(&bytes);
        let e = read(f.path(), None, true).unwrap_err().to_string();
        assert!(
            e.contains("unpacks to 83886080 bytes or more, over the 67108864 read"),
            "{e}"
        );
        assert_eq!(member_limit(1 << 30), 4 << 30);
        assert_eq!(member_limit(1 << 20), 100 << 20);
        // Rows stated by run-length encoding are read up to a budget for
        // the size of the data pages.
        assert_eq!(
            Budget::of(0),
            Budget {
                rows: 1_000_000,
                decoded: 256 << 20
            }
        );
        assert_eq!(Budget::of(1 << 20).rows, 1_000_000 + 16 * (1 << 20));
        assert_eq!(Budget::of(1 << 20).decoded, (256 << 20) + 64 * (1 << 20));
    }

    /// Three million rows stated by run-length encoding in a few kB of data
    /// pages, the file padded to 8 MB with metadata: the padding does not
    /// raise the budget (it would allow 135 million rows), so a million and
    /// 16 per byte of the data pages are read, not all.
    #[test]
    fn integer_cells_of_every_width_and_pandas_doubles() {
        use arrow_array::{Float64Array, Int32Array, UInt64Array};
        let ints = Int32Array::from(vec![Some(-7), None]);
        assert_eq!((int(&ints, 0), int(&ints, 1)), (Some(-7), None));
        let big = UInt64Array::from(vec![u64::MAX, 5]);
        assert_eq!((int(&big, 0), int(&big, 1)), (None, Some(5)));
        // pandas writes an integer column with gaps as doubles.
        let d = Float64Array::from(vec![Some(1.9e3), Some(f64::NAN), Some(1e19), None]);
        assert_eq!(
            (0..4).map(|i| int(&d, i)).collect::<Vec<_>>(),
            [Some(1900), None, None, None]
        );
        let text = StringArray::from(vec!["x"]);
        assert_eq!(int(&text, 0), None, "text is no number");
    }

    #[test]
    fn text_cells_plain_large_or_dictionary_encoded() {
        let plain = StringArray::from(vec![Some("a"), None]);
        let t = Text::of(&plain);
        assert_eq!((t.get(0), t.get(1)), (Some(("a", None)), None));
        let large = LargeStringArray::from(vec!["b"]);
        assert_eq!(Text::of(&large).get(0), Some(("b", None)));
        let dict: DictionaryArray<Int32Type> = vec![Some("t"), Some("u"), None, Some("t")]
            .into_iter()
            .collect();
        let t = Text::of(&dict);
        assert_eq!(
            (0..4).map(|i| t.get(i)).collect::<Vec<_>>(),
            [
                Some(("t", Some(0))),
                Some(("u", Some(1))),
                None,
                Some(("t", Some(0)))
            ]
        );
        let numbers = arrow_array::Int64Array::from(vec![1]);
        assert_eq!(Text::of(&numbers).get(0), None);
    }

    /// A table of several row groups read a group at a time, as a large
    /// one is, gives what it gives held; so does one whose footer says its
    /// groups lie out of order (held then).
    #[test]
    fn row_groups_read_one_at_a_time_are_the_table_held() {
        let rows: Vec<ProjRange> = (0..10)
            .map(|i| {
                let name = if i % 3 == 0 {
                    "XlaModule:#hlo_module=m#"
                } else {
                    "Thunk:#hlo_op=fusion.1#"
                };
                range(
                    1,
                    10 + i,
                    (i % 3 != 0).then_some(10 + i - i % 3),
                    name,
                    100 * i,
                    100 * i + 50,
                )
            })
            .collect();
        let seen = |r: &Ranges| -> Vec<(i64, i64, String, Option<usize>)> {
            (0..r.list.len())
                .map(|i| {
                    let x = &r.list[i];
                    (
                        x.start.get(),
                        x.end.get(),
                        r.name(x).to_string(),
                        r.up(i).map(|u| u.0),
                    )
                })
                .collect()
        };
        for layout in [Layout::Projected, Layout::StartEnd] {
            let table = trace_table_in(&rows, layout, 3);
            let read = |hold| {
                let (mut r, skipped, unread) =
                    ranges(&mut &table[..], (u64::MAX, hold), Path::new("t.zip")).unwrap();
                assert_eq!((skipped, unread), (0, 0));
                r.link();
                seen(&r)
            };
            let held = read(u64::MAX);
            assert_eq!(held.len(), 10);
            assert_eq!(read(0), held);
        }
    }

    #[test]
    fn ranges_of_one_name_share_it() {
        let table = trace_table(
            &[
                range(1, 1, None, "Thunk:#hlo_op=fusion.1#", 0, 10),
                range(1, 2, None, "Thunk:#hlo_op=fusion.1#", 20, 30),
            ],
            Layout::StartEnd,
        );
        let (ranges, _, _) =
            ranges(&mut &table[..], (u64::MAX, u64::MAX), Path::new("t.zip")).unwrap();
        assert_eq!(ranges.list.len(), 2);
        assert_eq!(ranges.list[0].name, ranges.list[1].name);
        assert_eq!(&*ranges.names[0], "Thunk:#hlo_op=fusion.1#");
        assert_eq!(ranges.names.len(), 1);
    }

    #[test]
    fn padding_does_not_raise_the_row_budget() {
        use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
        use parquet::file::metadata::KeyValue;
        use parquet::file::properties::WriterProperties;
        use parquet::file::writer::SerializedFileWriter;
        use parquet::schema::parser::parse_message_type;
        let schema = parse_message_type(
            "message schema { required binary Name (UTF8); required int64 RangeId; \
             required int64 Start; required int64 End; required int64 PID; required int64 TID; }",
        )
        .unwrap();
        let props = WriterProperties::builder()
            .set_key_value_metadata(Some(vec![KeyValue::new(
                "padding".to_owned(),
                "x".repeat(8 << 20),
            )]))
            .build();
        let mut w =
            SerializedFileWriter::new(Vec::new(), std::sync::Arc::new(schema), props.into())
                .unwrap();
        let mut rg = w.next_row_group().unwrap();
        const ROWS: usize = 3_000_000;
        const BATCH: usize = 100_000;
        let mut col = rg.next_column().unwrap().unwrap();
        let names = vec![ByteArray::from("Thunk:#hlo_op=fusion.1#"); BATCH];
        for _ in 0..ROWS / BATCH {
            col.typed::<ByteArrayType>()
                .write_batch(&names, None, None)
                .unwrap();
        }
        col.close().unwrap();
        for v in [1i64, 0, 10, 42, 7] {
            let mut col = rg.next_column().unwrap().unwrap();
            for _ in 0..ROWS / BATCH {
                col.typed::<Int64Type>()
                    .write_batch(&vec![v; BATCH], None, None)
                    .unwrap();
            }
            col.close().unwrap();
        }
        rg.close().unwrap();
        let bytes = w.into_inner().unwrap();
        assert!(bytes.len() > 8 << 20, "padded");
        let (ranges, skipped, unread) =
            ranges(&mut &bytes[..], (u64::MAX, u64::MAX), Path::new("t.zip")).unwrap();
        let read = ranges.list.len() as u64 + skipped;
        assert!(
            (1_000_000..1_500_000).contains(&read),
            "{read} rows read of {ROWS}"
        );
        assert_eq!(read + unread, ROWS as u64);
    }
}
