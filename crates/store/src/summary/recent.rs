//! The table files this thread read and checked last, and the tables
//! decoded from them. The small ranks of a pack (up to 64 inputs) share its
//! files and are read one after another on a thread: each read every file
//! whole and hashed it again, parsed its footer and decoded the rows before
//! its own to skip them, ten times over for ranks of 0.4 MB. A file is
//! served for the size and hash its entry lists only: what is served is
//! what had them when read.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use bytes::Bytes;

/// Files kept per thread: a rank's five tables and its figures, and room.
const FILES: usize = 8;
/// Larger files are a rank's own: kept, they would only hold memory.
const MAX_FILE: u64 = 1 << 20;

/// A file's path, the size and XXH3-64 its entry lists, and its bytes,
/// which had them, or every row of the table they hold.
type Checked = (PathBuf, u64, String, Kept);

#[derive(Clone)]
pub(super) enum Kept {
    Bytes(Bytes),
    Table(Vec<arrow_array::RecordBatch>),
}

thread_local! {
    static RECENT: RefCell<VecDeque<Checked>> = const { RefCell::new(VecDeque::new()) };
}

/// What this thread kept of `path` when it had `size` and `xxh3` (what the
/// entry now lists).
pub(super) fn get(path: &Path, size: u64, xxh3: &str) -> Option<Kept> {
    RECENT.with_borrow(|r| {
        (r.iter())
            .find(|c| c.1 == size && c.2 == xxh3 && c.0 == path)
            .map(|c| c.3.clone())
    })
}

/// Whether a file of `size` bytes is kept: larger ones are a rank's own.
pub(super) fn keeps(size: u64) -> bool {
    size <= MAX_FILE
}

/// Keeps `what`, of `path` found to have `size` and `xxh3`, when small
/// enough to be a pack's file, in place of what was kept of it or, when
/// full, of the oldest kept.
pub(super) fn put(path: &Path, size: u64, xxh3: &str, what: Kept) {
    if !keeps(size) {
        return;
    }
    RECENT.with_borrow_mut(|r| {
        r.retain(|c| c.0 != path);
        if r.len() == FILES {
            r.pop_front();
        }
        r.push_back((path.to_owned(), size, xxh3.to_owned(), what));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn got(p: &str, size: u64, xxh3: &str) -> Option<Bytes> {
        match get(Path::new(p), size, xxh3) {
            Some(Kept::Bytes(b)) => Some(b),
            Some(Kept::Table(_)) => panic!("a table where bytes were kept"),
            None => None,
        }
    }

    #[test]
    fn a_file_is_served_for_the_size_and_hash_it_had_while_kept() {
        let bytes = Kept::Bytes(Bytes::from_static(b"PAR1 table PAR1"));
        let p = "/sum/ops/pack-1.parquet";
        put(Path::new(p), 15, "00000000000000aa", bytes.clone());
        let want = Bytes::from_static(b"PAR1 table PAR1");
        assert_eq!(got(p, 15, "00000000000000aa"), Some(want));
        // The entry now lists another file there: a miss.
        assert_eq!(got(p, 15, "00000000000000bb"), None);
        assert_eq!(got(p, 16, "00000000000000aa"), None);
        assert_eq!(got("/sum/ops/pack-2.parquet", 15, "00000000000000aa"), None);
        // Its table, decoded, replaces its bytes.
        put(
            Path::new(p),
            15,
            "00000000000000aa",
            Kept::Table(Vec::new()),
        );
        let table = get(Path::new(p), 15, "00000000000000aa");
        assert!(matches!(table, Some(Kept::Table(_))));
        RECENT.with_borrow(|r| assert_eq!(r.len(), 1));
        // The oldest goes once more are kept than there is room for.
        for i in 0..FILES {
            let at = format!("/sum/t{i}");
            put(Path::new(&at), 1, "00000000000000cc", bytes.clone());
        }
        assert!(get(Path::new(p), 15, "00000000000000aa").is_none());
        assert!(got("/sum/t0", 1, "00000000000000cc").is_some());
        // A rank's own large file is not kept.
        let big = "/sum/comm/pack-3.parquet";
        put(Path::new(big), MAX_FILE + 1, "00000000000000dd", bytes);
        assert_eq!(got(big, MAX_FILE + 1, "00000000000000dd"), None);
        // Other threads keep their own.
        std::thread::spawn(|| assert!(got("/sum/t0", 1, "00000000000000cc").is_none()))
            .join()
            .unwrap();
    }
}
