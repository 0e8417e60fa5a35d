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
        let tmp = dir.join(format!(".{name}.parquet.partial"));
        let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
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
        let write = || -> std::result::Result<(), parquet::errors::ParquetError> {
            let mut w = ArrowWriter::try_new(file, table.schema.clone(), Some(props))?;
            for b in &table.batches {
                w.write(b)?;
            }
            w.close()?;
            Ok(())
        };
        if let Err(e) = write() {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::Output {
                path: path.clone(),
                why: format!("cannot write Parquet: {e}"),
            });
        }
        std::fs::rename(&tmp, &path).map_err(io(&path))?;
        out.push(Written {
            table: name,
            path,
            rows: table.rows(),
        });
    }
    Ok(out)
}

fn arrow_error(dir: &Path, e: arrow_schema::ArrowError) -> Error {
    Error::Output {
        path: dir.to_path_buf(),
        why: format!("cannot build the export tables: {e}"),
    }
}
