//! `export --to parquet`: each table of [`super::tables`] as `OUT/<table>.parquet`.

use std::path::{Path, PathBuf};

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};
use crate::metrics::Ctx;

/// One written file: its table, path and rows.
#[derive(Debug, Clone)]
pub struct Written {
    pub table: &'static str,
    pub path: PathBuf,
    pub rows: usize,
}

/// Writes every table into `dir` (created if missing), each rank's ops
/// read from `ops` (see [`super::tables::stream`]). Each file is written
/// beside its final name and renamed into place, so a reader never sees a
/// half-written table.
pub fn write_all(ctx: &Ctx, ops: super::Ops, dir: &Path) -> Result<Vec<Written>> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut out = Vec::new();
    for name in super::TABLES {
        let schema = super::tables::schema_of(name).expect("a known table");
        let path = dir.join(format!("{name}.parquet"));
        let props = WriterProperties::builder()
            .set_compression(Compression::SNAPPY)
            .set_key_value_metadata(Some(vec![
                KeyValue::new(
                    "ccl_bench.schema_version".to_owned(),
                    super::SCHEMA_VERSION.to_string(),
                ),
                KeyValue::new("ccl_bench.table".to_owned(), name.to_owned()),
                KeyValue::new(
                    "ccl_bench.trace".to_owned(),
                    ctx.trace.source.display().to_string(),
                ),
            ]))
            .build();
        let mut rows = 0;
        write_with(&path, &schema, props, &mut |put| {
            super::tables::stream(ctx, ops, name, &mut |b| {
                rows += b.num_rows();
                put(b)
            })
        })?;
        out.push(Written {
            table: name,
            path,
            rows,
        });
    }
    Ok(out)
}

/// Writes `batches` as one Parquet file, atomically (see [`crate::atomic`]).
pub fn write_file(
    path: &Path,
    schema: &arrow_schema::SchemaRef,
    batches: &[RecordBatch],
    props: WriterProperties,
) -> Result<()> {
    write_with(path, schema, props, &mut |put| {
        batches.iter().try_for_each(|b| put(b.clone()))
    })
}

/// What a batch is handed to while a file is written.
type Put<'a> = dyn FnMut(RecordBatch) -> std::result::Result<(), String> + 'a;

/// Writes the batches `fill` hands to its argument as one Parquet file,
/// atomically (see [`crate::atomic`]): a batch at a time, so that they need
/// not all be held.
pub fn write_with(
    path: &Path,
    schema: &arrow_schema::SchemaRef,
    props: WriterProperties,
    fill: &mut dyn FnMut(&mut Put<'_>) -> std::result::Result<(), String>,
) -> Result<()> {
    crate::atomic::with(path, |file| {
        let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props))
            .map_err(|e| format!("cannot write Parquet: {e}"))?;
        fill(&mut |b| {
            w.write(&b)
                .map_err(|e| format!("cannot write Parquet: {e}"))
        })?;
        w.close()
            .map_err(|e| format!("cannot write Parquet: {e}"))?;
        Ok(())
    })
}
