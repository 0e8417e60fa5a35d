//! `export --to parquet`: each table of [`super::tables`] as `OUT/<table>.parquet`.

use std::path::{Path, PathBuf};

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

/// Writes every table into `dir` (created if missing). Each file is written
/// beside its final name and renamed into place, so a reader never sees a
/// half-written table.
pub fn write_all(ctx: &Ctx, dir: &Path) -> Result<Vec<Written>> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let mut out = Vec::new();
    for name in super::TABLES {
        let table = super::tables::table(ctx, name)
            .expect("a known table")
            .map_err(|e| arrow_error(dir, e))?;
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
        write_file(&path, &table.schema, &table.batches, props)?;
        out.push(Written {
            table: name,
            path,
            rows: table.rows(),
        });
    }
    Ok(out)
}

/// Writes `batches` as one Parquet file, atomically (see [`crate::atomic`]).
pub fn write_file(
    path: &Path,
    schema: &arrow_schema::SchemaRef,
    batches: &[arrow_array::RecordBatch],
    props: WriterProperties,
) -> Result<()> {
    crate::atomic::with(path, |tmp| {
        let write = || -> std::result::Result<(), Box<dyn std::error::Error>> {
            let file = std::fs::File::create(tmp)?;
            let mut w = ArrowWriter::try_new(file, schema.clone(), Some(props))?;
            for b in batches {
                w.write(b)?;
            }
            w.close()?;
            Ok(())
        };
        write().map_err(|e| format!("cannot write Parquet: {e}"))
    })
}

fn arrow_error(dir: &Path, e: arrow_schema::ArrowError) -> Error {
    Error::Output {
        path: dir.to_path_buf(),
        why: format!("cannot build the export tables: {e}"),
    }
}
