//! The floor under a reader, for `scripts/bench_readers.sh`: the same bytes
//! read by the library that parses them, building nothing the tool keeps.
//!
//!   floor json FILE...    # serde_json checks each file (gzip inflated first)
//!   floor jsonl FILE...   # serde_json checks each line
//!   floor xspace FILE...  # prost decodes the XSpace fields the reader reads
//!   floor sqlite FILE...  # SQLite steps through every row and column of the tables the reader reads
//!   floor zip FILE...     # every Parquet table of the archive decoded to Arrow batches
//!
//! One thread: the table divides by CPU time, not wall time.

use std::fs;
use std::io::Read;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::de::IgnoredAny;

fn main() -> Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [kind, files @ ..] = args.as_slice() else {
        bail!("usage: floor json|jsonl|xspace|sqlite|zip FILE...");
    };
    let mut units = 0u64;
    for f in files {
        let path = Path::new(f);
        units += match kind.as_str() {
            "json" => {
                serde_json::from_slice::<IgnoredAny>(&bytes(path)?).with_context(|| f.clone())?;
                1
            }
            "jsonl" => {
                let b = bytes(path)?;
                let mut n = 0;
                for line in b.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
                    serde_json::from_slice::<IgnoredAny>(line).with_context(|| f.clone())?;
                    n += 1;
                }
                n
            }
            "xspace" => {
                use prost::Message;
                let space = ccl_read::read::xplane::XSpace::decode(fs::read(path)?.as_slice())?;
                space
                    .planes
                    .iter()
                    .map(|p| p.lines.iter().map(|l| l.events.len() as u64).sum::<u64>())
                    .sum()
            }
            "sqlite" => sqlite(path)?,
            "zip" => parquet_members(path)?,
            other => bail!("unknown floor {other}"),
        };
    }
    eprintln!("{units} units");
    Ok(())
}

fn bytes(path: &Path) -> Result<Vec<u8>> {
    let raw = fs::read(path)?;
    if raw.starts_with(&[0x1f, 0x8b]) {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(raw.as_slice()).read_to_end(&mut out)?;
        Ok(out)
    } else {
        Ok(raw)
    }
}

fn sqlite(path: &Path) -> Result<u64> {
    let db =
        rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)?;
    let mut n = 0;
    for t in [
        "StringIds",
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_RUNTIME",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
        "NVTX_EVENTS",
    ] {
        let Ok(mut stmt) = db.prepare(&format!("SELECT * FROM {t}")) else {
            continue;
        };
        let cols = stmt.column_count();
        let mut rows = stmt.query([])?;
        while let Some(row) = rows.next()? {
            for i in 0..cols {
                std::hint::black_box(row.get_ref(i)?);
            }
            n += 1;
        }
    }
    Ok(n)
}

fn parquet_members(path: &Path) -> Result<u64> {
    let mut zip = zip::ZipArchive::new(fs::File::open(path)?)?;
    let mut n = 0;
    for i in 0..zip.len() {
        let mut member = zip.by_index(i)?;
        if !member.name()?.ends_with(".parquet") {
            continue;
        }
        let mut buf = Vec::new();
        member.read_to_end(&mut buf)?;
        let reader = parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(
            bytes::Bytes::from(buf),
            64 * 1024,
        )?;
        for batch in reader {
            n += batch?.num_rows() as u64;
        }
    }
    Ok(n)
}
