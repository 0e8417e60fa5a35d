//! A file an entry (or the reduce's index) lists, read: its bytes, after
//! checking its size and hash against those written.

use std::path::Path;
use std::sync::atomic::Ordering;

use super::manifest::damaged;
use crate::error::{Error, Result};
use crate::source::FileIn;

/// A file an entry lists: its path in the summary, size and XXH3-64.
pub(super) type Listed = (String, u64, String);

/// One file's bytes, after checking its size and hash against those
/// written; its bytes are counted as read. (Opening a summary looks at no
/// table: on a cluster file system, a look at each of a run's thousands of
/// tables would cost more than the answer kept for it.)
pub(super) fn checked(f: &FileIn, path: &Path, listed: &Listed) -> Result<bytes::Bytes> {
    let (_, size, xxh3) = listed;
    if let Some(super::recent::Kept::Bytes(bytes)) = super::recent::get(path, *size, xxh3) {
        f.counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
        return Ok(bytes);
    }
    let bytes = as_written(path, listed)?;
    f.counter.fetch_add(bytes.len() as u64, Ordering::Relaxed);
    super::recent::put(path, *size, xxh3, super::recent::Kept::Bytes(bytes.clone()));
    Ok(bytes)
}

/// The file's bytes as they are now, when they are those written (its
/// size and hash); [`checked`] serves a thread's recent reads, where
/// `summarize` must see what is there.
pub(super) fn as_written(path: &Path, (_, size, xxh3): &Listed) -> Result<bytes::Bytes> {
    let bytes = match crate::confined::read_file(path, *size) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(damaged(path, "missing or changed: the file is gone"));
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            return Err(damaged(
                path,
                format!("missing or changed: more than the {size} bytes written"),
            ));
        }
        Err(e) if e.kind() == std::io::ErrorKind::InvalidInput => return Err(damaged(path, e)),
        Err(source) => {
            return Err(Error::Io {
                path: path.to_owned(),
                source,
            })
        }
    };
    if bytes.len() as u64 != *size {
        return Err(damaged(
            path,
            format!(
                "missing or changed: {} bytes where {size} were written",
                bytes.len()
            ),
        ));
    }
    if format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes)) != *xxh3 {
        return Err(damaged(path, "its content changed since it was written"));
    }
    Ok(bytes::Bytes::from(bytes))
}

/// The bytes `[a, z)` of a file read (a timeline's figures in a list of
/// them), when they lie inside it.
pub(super) fn part_of(bytes: &bytes::Bytes, (a, z): (u64, u64)) -> Option<bytes::Bytes> {
    let (a, z) = (usize::try_from(a).ok()?, usize::try_from(z).ok()?);
    (a <= z && z <= bytes.len()).then(|| bytes.slice(a..z))
}
