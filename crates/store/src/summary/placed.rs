//! Files written into a summary: placed inside it through no link, tables
//! as Parquet of the layout, each listed as entries list their files (path,
//! size, XXH3-64). What the map step, the reduce's index and the UI's
//! binning write alike.

use std::path::{Path, PathBuf};

use parquet::basic::Compression;
use parquet::file::metadata::KeyValue;
use parquet::file::properties::{EnabledStatistics, WriterProperties};

use super::manifest::{self, VERSION};
use crate::error::{Error, Result};

/// Row groups of 64 Ki rows: a reader can skip by their start-time
/// statistics without holding a whole rank's ops.
const ROW_GROUP: usize = 64 * 1024;

/// How a table is stored. The tables every first open reads (a rank's
/// collectives and communication ops, names, steps, annotations) are left
/// uncompressed: decoding them is most of that open, and Snappy took 7 % of
/// it for 1.5x their bytes. The rest (every op, CPU ranges, bins, annexes),
/// read only by the UI and exports, are compressed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub(super) enum Codec {
    Plain,
    Snappy,
}

/// Columns whose values are (nearly) all distinct, besides times (`*_ns`).
const DISTINCT: [&str; 4] = ["id", "index", "coll_index", "seq"];

/// Writes one table atomically.
pub(super) fn write_parquet(
    path: &Path,
    batches: &[arrow_array::RecordBatch],
    input: &str,
    codec: Codec,
) -> Result<()> {
    make_parent(path)?;
    let mut props = WriterProperties::builder()
        .set_compression(match codec {
            Codec::Plain => Compression::UNCOMPRESSED,
            Codec::Snappy => Compression::SNAPPY,
        })
        .set_max_row_group_row_count(Some(ROW_GROUP))
        // Row-group statistics (min/max per column chunk) let a reader skip
        // by time; a page index beside them doubled a small rank's footers.
        .set_statistics_enabled(EnabledStatistics::Chunk)
        .set_key_value_metadata(Some(vec![
            KeyValue::new("ccl_bench.summary".to_owned(), VERSION.to_string()),
            KeyValue::new("ccl_bench.input".to_owned(), input.to_owned()),
        ]));
    // Times, durations (`*_ns`), ids and sequence numbers hardly repeat: a
    // dictionary of them is as large as the values and costs a lookup per
    // value to decode.
    if let Some(first) = batches.first() {
        for f in first.schema().fields() {
            let name = f.name().as_str();
            if name.ends_with("_ns") || DISTINCT.contains(&name) {
                props = props.set_column_dictionary_enabled(f.name().as_str().into(), false);
            }
        }
    }
    let props = props.build();
    let Some(first) = batches.first() else {
        return Err(Error::Output {
            path: path.to_owned(),
            why: "a table of no batch".into(),
        });
    };
    super::parquet_file::write_file(path, &first.schema(), batches, props)
}

/// Where `rel` is written in the summary `out`: inside it, through no link.
pub(super) fn place(out: &Path, rel: &str) -> Result<PathBuf> {
    crate::confined::inside(out, rel).map_err(|why| Error::Output {
        path: out.to_owned(),
        why: format!("will not write {rel}: {why}"),
    })
}

/// Makes the folder `path` is written in.
pub(super) fn make_parent(path: &Path) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|source| Error::Io {
        path: dir.to_owned(),
        source,
    })
}

/// A file written for an entry: its path, size and hash.
pub(super) fn written(out: &Path, rel: String) -> Result<(String, u64, String)> {
    let path = out.join(&rel);
    let size = manifest::stat(&path)?.size;
    let hash = manifest::hash(&path)?;
    Ok((rel, size, hash))
}

/// Whether `bytes`, of the file `rel` in a summary, are of the tool's own
/// content: a JSON list (`.json`) or a Parquet file with this layout's mark.
/// What may be removed by name is removed only then.
/// The first bytes of a file of ours in an encoding that does not say
/// what it is (the reduce's index and gathered figures, in postcard).
pub(super) const MARK: &[u8] = b"ccl-bench summary\0";

pub(super) fn ours(rel: &str, bytes: &[u8]) -> bool {
    if rel.ends_with(".bin") {
        bytes.starts_with(MARK)
    } else if rel.ends_with(".json") {
        serde_json::from_slice::<Vec<&serde_json::value::RawValue>>(bytes).is_ok()
    } else {
        bytes.starts_with(b"PAR1")
            && bytes.ends_with(b"PAR1")
            && (bytes.windows(b"ccl_bench.summary".len())).any(|w| w == b"ccl_bench.summary")
    }
}
