//! Files inside a folder the tool did not necessarily write: a summary
//! someone else prepared on a shared file system is an ordinary input. A
//! path it lists stays inside it (no `..`, no absolute part, no link on the
//! way), only regular files are opened (a FIFO would block forever), and a
//! file is removed only when it is the tool's own by name and content.
//!
//! The checks look before they act, so a folder changed between the look
//! and the act by someone racing the tool is not covered; a folder prepared
//! beforehand, as on a shared file system, is.

use std::fs::{File, OpenOptions};
use std::io::{self, Read};
use std::path::{Component, Path, PathBuf};

/// `rel` (relative, `/`-separated) under `root`, when it names a place
/// inside `root`: every component a plain name, and none of the folders on
/// the way a link. Folders that do not exist yet pass (a file about to be
/// written). The last component is not looked at: a link there is never
/// followed by [`open_file`], and a rename into place replaces it (one
/// look fewer per file on a cluster file system, where each is a round
/// trip).
pub(crate) fn inside(root: &Path, rel: &str) -> Result<PathBuf, String> {
    checked(root, rel, 1)
}

/// [`inside`] for a folder: `rel`'s last component is checked too.
pub(crate) fn folder_inside(root: &Path, rel: &str) -> Result<PathBuf, String> {
    checked(root, rel, 0)
}

/// `root/rel`, every component but the last `unchecked` a folder that is
/// not a link (where it exists).
fn checked(root: &Path, rel: &str, unchecked: usize) -> Result<PathBuf, String> {
    let path = Path::new(rel);
    if rel.is_empty() || !path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Err(format!("`{rel}` is not a path inside the folder"));
    }
    let mut at = root.to_path_buf();
    let folders = path.components().count().saturating_sub(unchecked);
    for c in path.components().take(folders) {
        at.push(c);
        if recently_a_folder(&at) {
            continue;
        }
        match std::fs::symlink_metadata(&at) {
            Ok(m) if m.is_dir() => remember_folder(&at),
            Ok(m) if m.file_type().is_symlink() => {
                return Err(format!(
                    "{} is a link; the folder's own folders are never links",
                    at.display()
                ))
            }
            Ok(m) if !m.is_dir() => return Err(format!("{} is not a folder", at.display())),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => break,
            Err(e) => return Err(format!("{}: {e}", at.display())),
        }
    }
    Ok(root.join(path))
}

/// Folders this thread found to be folders (not links) in the last
/// [`FOLDER_SEEN`]: a summary's 1,024 ranks name the same few table
/// folders, and a look at each for each rank cost a tenth of opening it.
/// A folder swapped for a link within that time is a race, which these
/// checks do not cover anyway (see the module's doc).
const FOLDER_SEEN: std::time::Duration = std::time::Duration::from_secs(1);
const FOLDERS_KEPT: usize = 16;

thread_local! {
    static FOLDERS: std::cell::RefCell<Vec<(PathBuf, std::time::Instant)>> =
        const { std::cell::RefCell::new(Vec::new()) };
}

fn recently_a_folder(at: &Path) -> bool {
    FOLDERS.with_borrow(|f| (f.iter()).any(|(p, when)| p == at && when.elapsed() < FOLDER_SEEN))
}

fn remember_folder(at: &Path) {
    FOLDERS.with_borrow_mut(|f| {
        f.retain(|(p, when)| p != at && when.elapsed() < FOLDER_SEEN);
        if f.len() == FOLDERS_KEPT {
            f.remove(0);
        }
        f.push((at.to_owned(), std::time::Instant::now()));
    });
}

/// The entries of `dir` that are links, by name: a folder the tool writes
/// holds none, and one that does could lead reads, writes and removals out
/// of it.
pub(crate) fn links_in(dir: &Path) -> Vec<String> {
    let Ok(list) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut names: Vec<String> = list
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_symlink()))
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

/// Opens `path` for reading when it is a regular file: a link at its last
/// component is not followed, and a FIFO or device is refused without
/// waiting for a writer.
pub(crate) fn open_file(path: &Path) -> io::Result<File> {
    let mut o = OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        // Non-blocking only so that opening a FIFO returns at once; reads of
        // a regular file ignore the flag.
        o.custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK);
    }
    #[cfg(not(unix))]
    if std::fs::symlink_metadata(path)?.file_type().is_symlink() {
        return Err(link_error());
    }
    let f = o.open(path).map_err(|e| {
        #[cfg(unix)]
        if e.raw_os_error() == Some(libc::ELOOP) {
            return link_error();
        }
        e
    })?;
    if !f.metadata()?.is_file() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "not a regular file (a FIFO, device or folder)",
        ));
    }
    Ok(f)
}

fn link_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidInput,
        "a link where a regular file was expected; not followed",
    )
}

/// The bytes of the regular file `path` (see [`open_file`]), at most `max`
/// of them: a longer file is an error.
pub fn read_file(path: &Path, max: u64) -> io::Result<Vec<u8>> {
    let f = open_file(path)?;
    let size = f.metadata().map_or(0, |m| m.len()).min(max + 1);
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    f.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("larger than {max} bytes"),
        ));
    }
    Ok(bytes)
}

/// Removes `root/rel` when it is inside `root` ([`inside`]), a regular file
/// and `ours` says its content is the tool's; returns whether it did.
/// Anything else (a link, a folder, a stranger's file) is left alone.
pub(crate) fn remove_own(root: &Path, rel: &str, max: u64, ours: impl Fn(&[u8]) -> bool) -> bool {
    let Ok(path) = inside(root, rel) else {
        return false;
    };
    match read_file(&path, max) {
        Ok(bytes) if ours(&bytes) => std::fs::remove_file(&path).is_ok(),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_that_leave_the_folder_or_cross_a_link_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let outside = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir_all(root.join("ops/rank=0")).unwrap();
        std::fs::write(root.join("ops/rank=0/a.parquet"), b"x").unwrap();
        assert_eq!(
            inside(root, "ops/rank=0/a.parquet").unwrap(),
            root.join("ops/rank=0/a.parquet")
        );
        // Not there yet: a file about to be written.
        assert!(inside(root, "ops/rank=1/b.parquet").is_ok());
        for bad in ["", "../x", "/etc/passwd", "ops/../../x", "./ops"] {
            assert!(inside(root, bad).is_err(), "{bad}");
        }
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(outside.path(), root.join("ops/rank=2")).unwrap();
            let e = inside(root, "ops/rank=2/a.parquet").unwrap_err();
            assert!(e.contains("is a link"), "{e}");
            // A link as the last component is left to the open (O_NOFOLLOW).
            std::os::unix::fs::symlink(outside.path().join("f"), root.join("link.json")).unwrap();
            let p = inside(root, "link.json").unwrap();
            assert!(open_file(&p).is_err());
            assert_eq!(links_in(root.join("ops").as_path()), ["rank=2"]);
            assert!(folder_inside(root, "ops/rank=2").is_err());
            assert!(folder_inside(root, "ops/rank=0").is_ok());
        }
    }

    #[cfg(unix)]
    #[test]
    fn links_fifos_and_folders_are_not_opened() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f.json");
        std::fs::write(&file, b"{}").unwrap();
        assert_eq!(read_file(&file, 2).unwrap(), b"{}");
        assert!(read_file(&file, 1).is_err(), "over the bound");
        let link = dir.path().join("l.json");
        std::os::unix::fs::symlink(&file, &link).unwrap();
        let e = open_file(&link).unwrap_err().to_string();
        assert!(e.contains("link"), "{e}");
        assert!(open_file(dir.path()).is_err());
        let fifo = dir.path().join("p");
        let made = std::process::Command::new("mkfifo").arg(&fifo).status();
        if made.is_ok_and(|s| s.success()) {
            // Returns at once instead of waiting for a writer.
            let e = open_file(&fifo).unwrap_err().to_string();
            assert!(e.contains("not a regular file"), "{e}");
        }
    }

    #[test]
    fn only_the_tools_own_files_are_removed() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::write(root.join("ours.json"), b"{\"ours\":1}").unwrap();
        std::fs::write(root.join("theirs.json"), b"{\"x\":1}").unwrap();
        let ours = |b: &[u8]| b.starts_with(b"{\"ours\"");
        assert!(remove_own(root, "ours.json", 100, ours));
        assert!(!remove_own(root, "theirs.json", 100, ours));
        assert!(root.join("theirs.json").exists());
        assert!(!remove_own(root, "../x.json", 100, ours));
    }
}
