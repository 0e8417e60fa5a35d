//! `export --to parquet`: each table of [`super::tables`] as `OUT/<table>.parquet`.

use std::path::{Path, PathBuf};

use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::WriterProperties;

use crate::error::{Error, Result};
use crate::metrics::Ctx;
use crate::summary::parquet_file::write_with;

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
