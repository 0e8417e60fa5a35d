//! Writing a file so that a reader sees the old one or the new one, never
//! half of one: write a temporary beside it, then rename. A leaf: exports
//! and summaries both write this way.

use std::path::{Path, PathBuf};

use crate::error::{Error, Result};

/// The temporary name `path` is written under: hidden, ending in
/// `.partial` (no `*.parquet` glob picks it up), and the process's own,
/// so tasks writing one folder never share one.
pub fn partial(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(Default::default, |n| n.to_string_lossy());
    path.with_file_name(format!(".{name}.{}.partial", std::process::id()))
}

/// Writes `bytes` to `path` through [`partial`] and a rename.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    with(path, |tmp| {
        std::fs::write(tmp, bytes).map_err(|e| e.to_string())
    })
}

/// Calls `write` on the temporary name, then renames it to `path`; a failed
/// write leaves nothing behind and is an error naming `path`.
pub fn with(
    path: &Path,
    write: impl FnOnce(&Path) -> std::result::Result<(), String>,
) -> Result<()> {
    let tmp = partial(path);
    if let Err(why) = write(&tmp) {
        let _ = std::fs::remove_file(&tmp);
        return Err(Error::Output {
            path: path.to_owned(),
            why,
        });
    }
    std::fs::rename(&tmp, path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_leaves_only_the_final_file_and_a_failed_one_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        assert!(partial(&p).to_string_lossy().ends_with(".partial"));
        write(&p, b"abc").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        let q = dir.path().join("u.parquet");
        let e = with(&q, |tmp| {
            std::fs::write(tmp, b"half").unwrap();
            Err("disk full".into())
        })
        .unwrap_err();
        assert!(e.to_string().contains("disk full"));
        let names: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(names.len(), 1, "only t.parquet");
    }
}
