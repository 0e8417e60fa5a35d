//! What a summary folder records: the manifest (the run's inputs as
//! discovery found them) and one entry per summarized input (its
//! fingerprint and what its reader produced). An entry is written after its
//! tables, so it marks them complete.

use std::io::Read;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::model::{Ns, Warning};

/// The manifest's file name: a folder holding it is a summary.
pub const MANIFEST: &str = "ccl-bench-summary.json";

/// The layout's version; a summary of another is rebuilt or refused.
/// 3: XLA timelines carry program runs as steps and their devices' names.
/// 4: warnings carry their kind.
pub(crate) const VERSION: u32 = 4;

/// Entries' folder.
pub const ENTRIES: &str = "inputs";

/// The folder inside a summary that holds kept results, one file per key
/// (`kept.rs`).
pub const RESULTS: &str = "results";

/// The largest manifest or entry read: they list inputs and warnings, not events.
const MAX_JSON: u64 = 256 << 20;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// [`VERSION`].
    pub ccl_bench_summary: u32,
    /// The tool that wrote it, for people.
    pub tool: String,
    /// The folder the input paths are relative to (absolute).
    pub root: PathBuf,
    /// What the user pointed `summarize` at, relative to `root` ("" for it).
    pub trace: String,
    /// The iteration folder and profiling windows chosen.
    pub iteration: Option<u32>,
    pub windows: String,
    /// Discovery's notes, replayed as warnings when the summary is opened.
    pub notes: Vec<Warning>,
    pub inputs: Vec<InputRec>,
}

/// One input discovery found.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InputRec {
    /// Relative to the manifest's root, `/`-separated.
    pub path: String,
    /// The format's name in the format table.
    pub format: String,
    pub rank: Option<u32>,
    /// (index, of) among the rank's profiling windows.
    pub window: Option<(u32, u32)>,
    /// Its entry's file name in `inputs/`; `None` for inputs a load does not
    /// read (exports beside the chosen format, unreadable files).
    pub entry: Option<String>,
}

/// A file name of the summary's own (no folders, not hidden).
pub(crate) fn safe_name(name: &str) -> bool {
    !name.is_empty() && !name.starts_with('.') && !name.contains(['/', '\\'])
}

/// A relative path that stays inside the summary (an entry is input too).
pub(crate) fn safe_rel(rel: &str) -> bool {
    !rel.is_empty()
        && Path::new(rel)
            .components()
            .all(|c| matches!(c, std::path::Component::Normal(_)))
}

/// Size, modification time and content hash of an input when it was read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fingerprint {
    pub size: u64,
    /// Nanoseconds since the Unix epoch (0 when the file system has none).
    pub mtime_ns: u64,
    /// XXH3-64 of the file's bytes, hex; 0 until computed.
    pub xxh3: String,
}

/// One summarized input.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Entry {
    pub path: String,
    pub format: String,
    pub fingerprint: Fingerprint,
    /// The reader's error, replayed on opening: a summary fails where the
    /// trace fails.
    pub error: Option<String>,
    /// The timelines the input holds (timeline formats).
    pub parts: Vec<Part>,
    /// Warnings of a memory snapshot or execution trace reader.
    pub warnings: Vec<Warning>,
    /// A memory snapshot's figures beside its samples table.
    #[serde(default)]
    pub memory: Option<MemoryMeta>,
    /// An execution trace's schema beside its collectives table.
    #[serde(default)]
    pub et: Option<EtMeta>,
    /// The files written for it, relative to the summary, with their sizes
    /// and XXH3-64: one missing, of another size or another hash is a
    /// damaged summary.
    pub files: Vec<(String, u64, String)>,
}

impl Entry {
    /// The entry of the input `rec` of fingerprint `fingerprint`, before
    /// its reader ran.
    pub(crate) fn of(rec: &InputRec, fingerprint: Fingerprint) -> Self {
        Self {
            path: rec.path.clone(),
            format: rec.format.clone(),
            fingerprint,
            error: None,
            parts: Vec::new(),
            warnings: Vec::new(),
            memory: None,
            et: None,
            files: Vec::new(),
        }
    }
}

/// One timeline: the reader's scalar fields (tables hold the rest).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Part {
    /// Which timeline of which input (`<key>-<j>`): its rows' `part`.
    pub stem: String,
    /// The stem of the table files it shares with the other timelines
    /// summarized with it (`ops/<pack>.parquet`, ...): small ranks share
    /// files.
    pub pack: String,
    /// Its rows in each of those files, `[start, end)`, by table.
    pub rows: Vec<(String, u64, u64)>,
    /// Its figures' bytes, `[start, end)`, in the pack's stats file
    /// (`stats/<pack>.json`, a list of one object per timeline).
    pub stats: (u64, u64),
    /// The rank the file name gave, and the one its content states.
    pub name_rank: Option<u32>,
    pub dist_rank: Option<u32>,
    pub rank: u32,
    pub events: u64,
    pub warnings: Vec<Warning>,
    pub source: String,
    pub world_size: Option<u32>,
    pub groups: Vec<Group>,
    pub devices: Vec<Device>,
    pub window: Option<(Ns, Ns)>,
    pub flops: Option<f64>,
    pub launch_calls: u64,
    pub launch_time: Ns,
    pub launch_by_step: Vec<(u64, Ns)>,
    pub engine_steps: bool,
    /// The Unix time of the timeline's zero (absent in a summary written
    /// before it was kept).
    #[serde(default)]
    pub epoch: Option<Ns>,
    pub format: String,
    /// (thread id, kernel launches) of each CPU thread, in order.
    pub threads: Vec<(u64, u64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryMeta {
    pub source: String,
    /// Allocated, reserved, active and requested bytes at snapshot time.
    pub end: [i64; 4],
    pub allocs: u64,
    pub frees: u64,
    /// At the allocation peak, bytes live by allocation site (absent in a
    /// summary written before they were kept).
    #[serde(default)]
    pub peak_sites: Vec<(String, i64)>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EtMeta {
    pub source: String,
    pub schema: String,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub name: String,
    pub desc: Option<String>,
    pub ranks: Vec<u32>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Device {
    pub id: u32,
    pub name: String,
    pub num_sms: Option<u32>,
}

/// A stable name for an input's files: its path's hash.
pub(crate) fn key(rel: &str) -> String {
    format!("{:016x}", xxhash_rust::xxh3::xxh3_64(rel.as_bytes()))
}

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Io {
        path: path.to_owned(),
        source,
    }
}

/// Size and modification time (the hash left empty: see [`hash`]).
pub fn stat(path: &Path) -> Result<Fingerprint> {
    let m = std::fs::metadata(path).map_err(io(path))?;
    let crate::discover::Stamp { size, mtime_ns } = crate::discover::Stamp::of(&m);
    Ok(Fingerprint {
        size,
        mtime_ns,
        xxh3: String::new(),
    })
}

/// The file's XXH3-64, hex (reads it whole, at memory speed).
pub(crate) fn hash(path: &Path) -> Result<String> {
    let mut f = std::fs::File::open(path).map_err(io(path))?;
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf).map_err(io(path))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(format!("{:016x}", h.digest()))
}

/// Reads and parses a manifest or entry, bounded in size.
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T> {
    read_json_hashed(path).map(|(v, _)| v)
}

/// `read_json`, and the XXH3-64 of the bytes read. Only a regular file is
/// read, never through a link (see [`crate::confined`]).
pub(crate) fn read_json_hashed<T: serde::de::DeserializeOwned>(path: &Path) -> Result<(T, u64)> {
    let text = crate::confined::read_file(path, MAX_JSON).map_err(|e| match e.kind() {
        std::io::ErrorKind::InvalidData => damaged(path, "larger than any summary writes"),
        std::io::ErrorKind::InvalidInput => damaged(path, e),
        _ => Error::Io {
            path: path.to_owned(),
            source: e,
        },
    })?;
    let v = serde_json::from_slice(&text).map_err(|e| damaged(path, e))?;
    Ok((v, xxhash_rust::xxh3::xxh3_64(&text)))
}

/// Serializes and writes atomically, compact: a run's manifest and entries
/// are read on every open, and a small rank's entry would be mostly
/// indentation.
pub(crate) fn write_json<T: Serialize>(path: &Path, value: &T) -> Result<()> {
    let text = serde_json::to_vec(value).map_err(|e| Error::Output {
        path: path.to_owned(),
        why: e.to_string(),
    })?;
    crate::atomic::write(path, &text)
}

/// The error for a summary file that is not what the summary wrote.
pub(crate) fn damaged(path: &Path, why: impl std::fmt::Display) -> Error {
    Error::NotATrace {
        path: path.to_owned(),
        why: format!("damaged summary ({why}); run `ccl-bench summarize` again to rebuild it"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_writes_leave_no_temporary_and_hash_is_stable() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("a.json");
        write_json(&p, &vec![1, 2, 3]).unwrap();
        assert_eq!(read_json::<Vec<u32>>(&p).unwrap(), vec![1, 2, 3]);
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only the final file remains");
        // XXH3-64 of the 7 bytes serde_json writes.
        assert_eq!(
            hash(&p).unwrap(),
            format!("{:016x}", xxhash_rust::xxh3::xxh3_64(b"[1,2,3]"))
        );
        assert_eq!(stat(&p).unwrap().size, 7);
        std::fs::write(&p, b"{").unwrap();
        let e = read_json::<Vec<u32>>(&p).unwrap_err().to_string();
        assert!(e.contains("damaged summary"), "{e}");
    }
}
