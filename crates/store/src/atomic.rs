//! Writing a file so that a reader sees the old one or the new one, never
//! half of one: write a temporary beside it, then rename. A leaf: exports
//! and summaries both write this way.
//!
//! The temporary is created exclusively under a fresh random name
//! (`tempfile`), so a link planted at a predictable name is never written
//! through, and two writers of one path each write their own file (the
//! last rename wins, whole). It is removed on every error.

use std::fs::File;
use std::path::Path;

use crate::error::{Error, Result};

/// Whether `name` is a temporary this module makes: hidden, ending in
/// `.partial` (no `*.parquet` or `*.json` glob picks it up).
pub(crate) fn is_partial(name: &str) -> bool {
    name.starts_with('.') && name.ends_with(".partial")
}

/// Writes `bytes` to `path` through a temporary and a rename.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    put(path, true, all(bytes))
}

/// Writes all of `bytes` to the file it is given.
fn all(bytes: &[u8]) -> impl FnOnce(&mut File) -> std::result::Result<(), String> + '_ {
    move |file| {
        use std::io::Write as _;
        file.write_all(bytes).map_err(|e| e.to_string())
    }
}

/// Writes `bytes` to `path` through a temporary, unless something is at
/// `path` already (then an error, and nothing is replaced).
pub fn write_new(path: &Path, bytes: &[u8]) -> Result<()> {
    put(path, false, all(bytes))
}

/// Calls `write` on a new temporary file beside `path`, then renames it to
/// `path` (replacing a file, or a link, there: never writing through it). A
/// failed write leaves nothing behind and is an error naming `path`; so is
/// a `path` that is a folder.
pub fn with(
    path: &Path,
    write: impl FnOnce(&mut File) -> std::result::Result<(), String>,
) -> Result<()> {
    put(path, true, write)
}

fn put(
    path: &Path,
    replace: bool,
    write: impl FnOnce(&mut File) -> std::result::Result<(), String>,
) -> Result<()> {
    let fail = |why: String| Error::Output {
        path: path.to_owned(),
        why,
    };
    if std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir()) {
        return Err(fail("is a folder; name a file to write".into()));
    }
    let name = path
        .file_name()
        .ok_or_else(|| fail("names no file".into()))?
        .to_string_lossy();
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let prefix = format!(".{name}.");
    let mut builder = tempfile::Builder::new();
    builder.prefix(&prefix).suffix(".partial");
    // As `File::create` makes a file (0666 less the umask), not the 0600 of
    // a temporary: a summary or export on a shared file system is read by
    // others.
    #[cfg(unix)]
    builder.permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666));
    let mut tmp = builder
        .tempfile_in(dir)
        .map_err(|e| fail(format!("cannot create a file in {}: {e}", dir.display())))?;
    write(tmp.as_file_mut()).map_err(fail)?;
    if replace {
        tmp.persist(path).map_err(|e| fail(e.error.to_string()))?;
    } else {
        tmp.persist_noclobber(path)
            .map_err(|e| fail(e.error.to_string()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn a_write_leaves_only_the_final_file_and_a_failed_one_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.parquet");
        write(&p, b"abc").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"abc");
        let q = dir.path().join("u.parquet");
        let e = with(&q, |f| {
            use std::io::Write as _;
            f.write_all(b"half").unwrap();
            Err("disk full".into())
        })
        .unwrap_err();
        assert!(e.to_string().contains("disk full"));
        assert_eq!(names(dir.path()), ["t.parquet"]);
    }

    #[test]
    fn a_folder_is_refused_and_nothing_is_left_beside_it() {
        let dir = tempfile::tempdir().unwrap();
        let sub = dir.path().join("out.json");
        std::fs::create_dir(&sub).unwrap();
        let e = write(&sub, b"abc").unwrap_err().to_string();
        assert!(e.contains("is a folder"), "{e}");
        assert_eq!(names(dir.path()), ["out.json"]);
    }

    #[cfg(unix)]
    #[test]
    fn links_at_the_old_temporary_name_or_the_target_are_not_written_through() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"precious").unwrap();
        let out = dir.path().join("run.json");
        // The fixed names earlier versions wrote through.
        for planted in [".run.json.partial", ".run.json.4242.partial"] {
            std::os::unix::fs::symlink(&victim, dir.path().join(planted)).unwrap();
        }
        write(&out, b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        // A link at the target itself is replaced, not followed.
        let linked = dir.path().join("linked.json");
        std::os::unix::fs::symlink(&victim, &linked).unwrap();
        write(&linked, b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"precious");
        assert!(!std::fs::symlink_metadata(&linked)
            .unwrap()
            .file_type()
            .is_symlink());
        assert!(is_partial(".run.json.x1y2z3.partial") && !is_partial("run.json"));
    }

    #[test]
    fn a_new_file_never_replaces_one() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("view.svg");
        write_new(&p, b"first").unwrap();
        assert!(write_new(&p, b"second").is_err());
        assert_eq!(std::fs::read(&p).unwrap(), b"first");
        assert_eq!(names(dir.path()), ["view.svg"]);
    }

    #[cfg(unix)]
    #[test]
    fn a_written_file_gets_the_mode_file_create_gives() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let plain = dir.path().join("plain");
        std::fs::File::create(&plain).unwrap();
        let ours = dir.path().join("ours");
        write(&ours, b"x").unwrap();
        assert_eq!(mode(&ours), mode(&plain));
    }

    #[test]
    fn two_writers_of_one_path_leave_one_whole_file() {
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("run.json");
        let (a, b) = (vec![b'a'; 1 << 20], vec![b'b'; 1 << 20]);
        std::thread::scope(|s| {
            for bytes in [&a, &b] {
                let out = &out;
                s.spawn(move || {
                    for _ in 0..20 {
                        write(out, bytes).unwrap();
                    }
                });
            }
        });
        let got = std::fs::read(&out).unwrap();
        assert!(got == a || got == b, "a mix of the two writers");
        assert_eq!(names(dir.path()), ["run.json"]);
    }
}
