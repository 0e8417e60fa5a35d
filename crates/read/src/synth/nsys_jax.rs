//! Small nsys-jax archives for tests and fuzz seeds: a zip holding
//! `nvtx_gpu_proj_trace/trace.parquet` and `thread-metadata.parquet`, in
//! either of the two table layouts Nsight Systems writes.

use std::io::{Cursor, Write};
use std::sync::Arc;

use parquet::data_type::{ByteArray, ByteArrayType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;

/// One projected NVTX range: id, parent, name, start and end (ns), PID, TID,
/// and the range's own CPU start and end (`Orig Start`/`Orig Duration`, in
/// the older layout only).
#[derive(Debug, Clone, Default)]
pub struct ProjRange {
    pub id: i64,
    pub parent: Option<i64>,
    pub name: String,
    pub start: i64,
    pub end: i64,
    pub pid: i64,
    pub tid: i64,
    pub orig: Option<(i64, i64)>,
}

/// Which `trace.parquet` columns: the older `Projected Start`/`Projected
/// Duration`/`RangeId`/`Name` or the newer `Start`/`End`/`Range ID`/`Text`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    Projected,
    StartEnd,
}

/// A column of a table to write.
enum Col {
    Text(&'static str, Vec<String>),
    /// Nullable text.
    OptText(&'static str, Vec<Option<String>>),
    Int(&'static str, Vec<i64>),
    /// Nullable integers.
    OptInt(&'static str, Vec<Option<i64>>),
}

impl Col {
    fn len(&self) -> usize {
        match self {
            Col::Text(_, v) => v.len(),
            Col::OptText(_, v) => v.len(),
            Col::Int(_, v) => v.len(),
            Col::OptInt(_, v) => v.len(),
        }
    }
}

/// Rows per row group: pyarrow's default since version 13.
pub const ROW_GROUP: usize = 1 << 20;

fn parquet(cols: Vec<Col>, group: usize) -> Vec<u8> {
    use parquet::basic::{ConvertedType, Repetition, Type as Physical};
    use parquet::schema::types::Type;
    let fields = cols
        .iter()
        .map(|c| {
            let (name, physical, repetition, converted) = match c {
                Col::Text(n, _) => (
                    n,
                    Physical::BYTE_ARRAY,
                    Repetition::REQUIRED,
                    ConvertedType::UTF8,
                ),
                Col::OptText(n, _) => (
                    n,
                    Physical::BYTE_ARRAY,
                    Repetition::OPTIONAL,
                    ConvertedType::UTF8,
                ),
                Col::Int(n, _) => (
                    n,
                    Physical::INT64,
                    Repetition::REQUIRED,
                    ConvertedType::NONE,
                ),
                Col::OptInt(n, _) => (
                    n,
                    Physical::INT64,
                    Repetition::OPTIONAL,
                    ConvertedType::NONE,
                ),
            };
            Arc::new(
                Type::primitive_type_builder(name, physical)
                    .with_repetition(repetition)
                    .with_converted_type(converted)
                    .build()
                    .expect("a column type"),
            )
        })
        .collect();
    let schema = Type::group_type_builder("schema")
        .with_fields(fields)
        .build()
        .expect("a schema");
    let props = Arc::new(WriterProperties::builder().build());
    let mut w = SerializedFileWriter::new(Vec::new(), Arc::new(schema), props).expect("writer");
    let rows = cols.first().map_or(0, Col::len);
    // Row groups of 1 Mi rows, as pyarrow (and so pandas) writes them.
    for from in (0..rows.max(1)).step_by(group.max(1)) {
        let part = from..(from + group.max(1)).min(rows);
        let mut rg = w.next_row_group().expect("row group");
        for c in &cols {
            let mut col = rg.next_column().expect("column").expect("a column left");
            match c {
                Col::Text(_, v) => {
                    let v: Vec<ByteArray> = v[part.clone()]
                        .iter()
                        .map(|s| ByteArray::from(s.as_str()))
                        .collect();
                    col.typed::<ByteArrayType>()
                        .write_batch(&v, None, None)
                        .expect("write");
                }
                Col::OptText(_, v) => {
                    let v = &v[part.clone()];
                    let values: Vec<ByteArray> = v
                        .iter()
                        .flatten()
                        .map(|s| ByteArray::from(s.as_str()))
                        .collect();
                    let def: Vec<i16> = v.iter().map(|x| i16::from(x.is_some())).collect();
                    col.typed::<ByteArrayType>()
                        .write_batch(&values, Some(&def), None)
                        .expect("write");
                }
                Col::Int(_, v) => {
                    col.typed::<Int64Type>()
                        .write_batch(&v[part.clone()], None, None)
                        .expect("write");
                }
                Col::OptInt(_, v) => {
                    let v = &v[part.clone()];
                    let values: Vec<i64> = v.iter().flatten().copied().collect();
                    let def: Vec<i16> = v.iter().map(|x| i16::from(x.is_some())).collect();
                    col.typed::<Int64Type>()
                        .write_batch(&values, Some(&def), None)
                        .expect("write");
                }
            }
            col.close().expect("close column");
        }
        rg.close().expect("close row group");
    }
    w.into_inner().expect("parquet bytes")
}

/// The projected trace table.
pub fn trace_table(ranges: &[ProjRange], layout: Layout) -> Vec<u8> {
    trace_table_in(ranges, layout, ROW_GROUP)
}

/// [`trace_table`] in row groups of `group` rows.
pub fn trace_table_in(ranges: &[ProjRange], layout: Layout, group: usize) -> Vec<u8> {
    let names = ranges.iter().map(|r| r.name.clone()).collect();
    let ids = ranges.iter().map(|r| r.id).collect();
    let parents = ranges.iter().map(|r| r.parent).collect();
    let starts = ranges.iter().map(|r| r.start).collect();
    let pids = ranges.iter().map(|r| r.pid).collect();
    let tids = ranges.iter().map(|r| r.tid).collect();
    let cols = match layout {
        Layout::Projected => {
            let mut cols = vec![
                Col::Text("Name", names),
                Col::Int("Projected Start", starts),
                Col::Int(
                    "Projected Duration",
                    ranges.iter().map(|r| r.end - r.start).collect(),
                ),
            ];
            if ranges.iter().any(|r| r.orig.is_some()) {
                cols.push(Col::OptInt(
                    "Orig Start",
                    ranges.iter().map(|r| r.orig.map(|o| o.0)).collect(),
                ));
                cols.push(Col::OptInt(
                    "Orig Duration",
                    ranges.iter().map(|r| r.orig.map(|o| o.1 - o.0)).collect(),
                ));
            }
            cols.extend([
                Col::Int("RangeId", ids),
                Col::OptInt("ParentId", parents),
                Col::Int("PID", pids),
                Col::Int("TID", tids),
            ]);
            cols
        }
        Layout::StartEnd => vec![
            Col::Text("Text", names),
            Col::Int("Start", starts),
            Col::Int("End", ranges.iter().map(|r| r.end).collect()),
            Col::Int("Range ID", ids),
            Col::OptInt("Parent ID", parents),
            Col::Int("PID", pids),
            Col::Int("TID", tids),
        ],
    };
    parquet(cols, group)
}

/// The projected trace table in the older layout as the recipe writes it
/// into real archives: nullable names and ids, and after the ranges one
/// row with neither, spanning the session.
pub fn trace_table_as_written(ranges: &[ProjRange]) -> Vec<u8> {
    let mut names: Vec<Option<String>> = ranges.iter().map(|r| Some(r.name.clone())).collect();
    let mut ids: Vec<Option<i64>> = ranges.iter().map(|r| Some(r.id)).collect();
    let mut parents: Vec<Option<i64>> = ranges.iter().map(|r| r.parent).collect();
    let mut starts: Vec<i64> = ranges.iter().map(|r| r.start).collect();
    let mut durs: Vec<i64> = ranges.iter().map(|r| r.end - r.start).collect();
    let mut pids: Vec<i64> = ranges.iter().map(|r| r.pid).collect();
    let mut tids: Vec<i64> = ranges.iter().map(|r| r.tid).collect();
    let first = starts.iter().copied().min().unwrap_or(0);
    let last = ranges.iter().map(|r| r.end).max().unwrap_or(0);
    names.push(None);
    ids.push(None);
    parents.push(None);
    starts.push(first);
    durs.push(last - first);
    pids.push(0);
    tids.push(0);
    parquet(
        vec![
            Col::OptText("Name", names),
            Col::Int("Projected Start", starts),
            Col::Int("Projected Duration", durs),
            Col::OptInt("RangeId", ids),
            Col::OptInt("ParentId", parents),
            Col::Int("PID", pids),
            Col::Int("TID", tids),
        ],
        ROW_GROUP,
    )
}

/// The thread table: (PID, TID, thread name).
pub fn thread_table(threads: &[(i64, i64, &str)]) -> Vec<u8> {
    parquet(
        vec![
            Col::Int("PID", threads.iter().map(|t| t.0).collect()),
            Col::Int("TID", threads.iter().map(|t| t.1).collect()),
            Col::Text("Name", threads.iter().map(|t| t.2.to_owned()).collect()),
        ],
        ROW_GROUP,
    )
}

/// A zip of the two tables under `prefix/`, as nsys-jax writes it.
pub fn archive(prefix: &str, trace: &[u8], threads: Option<&[u8]>) -> Vec<u8> {
    archive_with(prefix, trace, threads, &[])
}

/// [`archive`] with more members (`dump/module_0001.….hlo.pb.xz`) under
/// `prefix/`.
pub fn archive_with(
    prefix: &str,
    trace: &[u8],
    threads: Option<&[u8]>,
    more: &[(&str, &[u8])],
) -> Vec<u8> {
    let mut zip = zip::ZipWriter::new(Cursor::new(Vec::new()));
    let opts = zip::write::SimpleFileOptions::default()
        .compression_method(zip::CompressionMethod::Deflated);
    let mut add = |name: String, bytes: &[u8]| {
        zip.start_file(name, opts).expect("zip entry");
        zip.write_all(bytes).expect("zip write");
    };
    add(format!("{prefix}/nvtx_gpu_proj_trace/trace.parquet"), trace);
    if let Some(t) = threads {
        add(format!("{prefix}/thread-metadata.parquet"), t);
    }
    add(format!("{prefix}/report_nvtx_pushpop_trace.csv.xz"), b"");
    for (name, bytes) in more {
        add(format!("{prefix}/{name}"), bytes);
    }
    zip.finish().expect("zip").into_inner()
}

/// One process driving devices 0 and 1 from two launcher threads, each
/// running a fusion, an async all-reduce (start and done thunks) and a GEMM:
/// three ops per device.
pub fn example() -> Vec<u8> {
    let mut ranges = Vec::new();
    let mut threads = Vec::new();
    for (device, name) in [
        (0, "XlaLauncher:#global=0,local=0,process=0,slice=0#"),
        (1, "XlaLauncher:#global=1,local=1,process=0,slice=0#"),
    ] {
        let tid = 10 + device;
        let base = device * 100;
        let r = |id: i64, parent: Option<i64>, name: &str, start: i64, end: i64| ProjRange {
            id: base + id,
            parent: parent.map(|p| base + p),
            name: name.into(),
            start,
            end,
            pid: 42,
            tid,
            ..Default::default()
        };
        ranges.extend([
            r(
                1,
                None,
                "XlaModule:#hlo_module=jit_step,program_id=1#",
                0,
                1_000,
            ),
            r(2, Some(1), "Thunk:#hlo_op=fusion.1#", 0, 200),
            r(3, Some(1), "Thunk:#hlo_op=all-reduce-start.1#", 200, 600),
            r(4, Some(1), "Thunk:#hlo_op=all-reduce-done.1#", 600, 610),
            r(5, Some(1), "Thunk:#hlo_op=cublas-gemm.2#", 610, 900),
        ]);
        threads.push((42, tid, name));
    }
    archive(
        "example",
        &trace_table(&ranges, Layout::Projected),
        Some(&thread_table(&threads)),
    )
}
