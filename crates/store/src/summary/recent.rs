//! The table files this thread read and checked last. The small ranks of a
//! pack (up to 64 inputs) share its files and are read one after another
//! on a thread: each read every file whole and hashed it again, ten times
//! over for ranks of 0.4 MB. A file is served for the size and hash its
//! entry lists only: the bytes served are those that had them when read.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::path::{Path, PathBuf};

use bytes::Bytes;

/// Files kept per thread: a rank's five tables and its figures, and room.
const FILES: usize = 8;
/// Larger files are a rank's own: kept, they would only hold memory.
const MAX_FILE: u64 = 1 << 20;

/// A file's path, the size and XXH3-64 its entry lists, and its bytes,
/// which had them.
type Checked = (PathBuf, u64, String, Bytes);

thread_local! {
    static RECENT: RefCell<VecDeque<Checked>> = const { RefCell::new(VecDeque::new()) };
}

/// The bytes of `path` read on this thread when they had `size` and
/// `xxh3` (what the entry now lists), when still kept.
pub(super) fn get(path: &Path, size: u64, xxh3: &str) -> Option<Bytes> {
    RECENT.with_borrow(|r| {
        (r.iter())
            .find(|c| c.1 == size && c.2 == xxh3 && c.0 == path)
            .map(|c| c.3.clone())
    })
}

/// Keeps `bytes`, read from `path` and found to have `size` and `xxh3`,
/// when small enough to be a pack's file, in place of the oldest kept.
pub(super) fn put(path: &Path, size: u64, xxh3: &str, bytes: &Bytes) {
    if size > MAX_FILE {
        return;
    }
    RECENT.with_borrow_mut(|r| {
        if r.len() == FILES {
            r.pop_front();
        }
        r.push_back((path.to_owned(), size, xxh3.to_owned(), bytes.clone()));
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_served_for_the_size_and_hash_it_had_while_kept() {
        let bytes = Bytes::from_static(b"PAR1 table PAR1");
        let p = Path::new("/sum/ops/pack-1.parquet");
        put(p, 15, "00000000000000aa", &bytes);
        assert_eq!(get(p, 15, "00000000000000aa"), Some(bytes.clone()));
        // The entry now lists another file there: a miss.
        assert_eq!(get(p, 15, "00000000000000bb"), None);
        assert_eq!(get(p, 16, "00000000000000aa"), None);
        assert_eq!(
            get(Path::new("/sum/ops/pack-2.parquet"), 15, "00000000000000aa"),
            None
        );
        // The oldest goes once more are kept than there is room for.
        for i in 0..FILES {
            put(
                Path::new(&format!("/sum/t{i}")),
                1,
                "00000000000000cc",
                &bytes,
            );
        }
        assert_eq!(get(p, 15, "00000000000000aa"), None);
        assert!(get(Path::new("/sum/t0"), 1, "00000000000000cc").is_some());
        // A rank's own large file is not kept.
        let big = Path::new("/sum/comm/pack-3.parquet");
        put(big, MAX_FILE + 1, "00000000000000dd", &bytes);
        assert_eq!(get(big, MAX_FILE + 1, "00000000000000dd"), None);
        // Other threads keep their own.
        std::thread::spawn(|| assert!(get(Path::new("/sum/t0"), 1, "00000000000000cc").is_none()))
            .join()
            .unwrap();
    }
}
