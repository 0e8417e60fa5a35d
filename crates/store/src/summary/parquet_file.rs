//! Parquet files written whole or not at all (see [`crate::atomic`]): the
//! one writer of summaries' tables and of `export --to parquet`.

use std::path::Path;

use arrow_array::RecordBatch;
use parquet::arrow::ArrowWriter;
use parquet::file::properties::WriterProperties;

use crate::error::Result;

/// Writes `batches` as one Parquet file, atomically (see [`crate::atomic`]).
pub(crate) fn write_file(
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
