//! Results kept in a summary: one file per key in its `results/` folder,
//! each a body the caller encodes (what a metrics run printed) sealed with
//! its key, so that a file edited by hand or copied under another key is a
//! miss. What the key hashes and what the body holds are the caller's; this
//! module only keeps, serves and prunes the files, inside the summary and
//! through no link.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use super::manifest::RESULTS;

/// Results of other keys kept beside the newest (other option sets).
const KEEP: usize = 16;

/// Layout of a results file; a different one is not read.
const VERSION: u32 = 2;

/// The body stored under `key` in `sum`, when there is one, it is whole,
/// and its seal is that of this key and this body; anything else is a miss,
/// never an error.
pub fn get(sum: &Path, key: &str) -> Option<String> {
    read_sealed(&file(sum, key)?, key)
}

/// Stores the JSON `body` under `key` (atomically), keeping the [`KEEP`]
/// newest other keys; whether it was stored. A summary that cannot be
/// written to (a read-only tree), or whose results folder is a link, simply
/// keeps none.
pub fn put(sum: &Path, key: &str, body: &str) -> bool {
    let stored = file(sum, key).is_some_and(|path| write_sealed(sum, &path, key, body));
    if stored {
        prune(sum);
    }
    stored
}

/// What the open of a summary made that every question shares (the clock
/// check), kept in one file `name` of the results folder for `key` alone:
/// [`get`] of that file. Pruning leaves it; another key's body replaces it.
pub fn get_shared(sum: &Path, name: &str, key: &str) -> Option<String> {
    read_sealed(&shared_file(sum, name)?, key)
}

/// [`put`] of the file `name` that [`get_shared`] reads.
pub fn put_shared(sum: &Path, name: &str, key: &str, body: &str) -> bool {
    shared_file(sum, name).is_some_and(|path| write_sealed(sum, &path, key, body))
}

fn shared_file(sum: &Path, name: &str) -> Option<PathBuf> {
    let file = format!("{name}.json");
    // Never a results file's name, which pruning would take.
    if results_name(&file).is_some() {
        return None;
    }
    crate::confined::inside(sum, &format!("{RESULTS}/{file}")).ok()
}

fn read_sealed(path: &Path, key: &str) -> Option<String> {
    let sealed: Sealed = super::manifest::read_json(path).ok()?;
    (sealed.version == VERSION && sealed.seal == seal(key, sealed.body.get()))
        .then(|| sealed.body.get().to_owned())
}

fn write_sealed(sum: &Path, path: &Path, key: &str, body: &str) -> bool {
    let Ok(body) = serde_json::value::RawValue::from_string(body.to_owned()) else {
        return false;
    };
    let sealed = Sealed {
        version: VERSION,
        seal: seal(key, body.get()),
        body,
    };
    let Ok(bytes) = serde_json::to_vec(&sealed) else {
        return false;
    };
    let Ok(dir) = crate::confined::folder_inside(sum, RESULTS) else {
        return false;
    };
    std::fs::create_dir_all(&dir).is_ok() && crate::atomic::write(path, &bytes).is_ok()
}

/// The results file of `key`, inside the summary through no link.
fn file(sum: &Path, key: &str) -> Option<PathBuf> {
    crate::confined::inside(sum, &format!("{RESULTS}/{key}.json")).ok()
}

/// What ties a results file to its key: a hash of the key and the stored
/// body.
fn seal(key: &str, body: &str) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(key.as_bytes());
    h.update(&[0]);
    h.update(body.as_bytes());
    format!("{:016x}", h.digest())
}

/// Whether `bytes` are a results file of `key`: of this layout, or of the
/// first (unsealed, its key inside), which a newer binary no longer reads
/// but still prunes.
fn is_results(bytes: &[u8], key: &str) -> bool {
    #[derive(Deserialize)]
    struct Head {
        version: u32,
        key: Option<String>,
        seal: Option<String>,
    }
    serde_json::from_slice::<Head>(bytes).is_ok_and(|h| match h.version {
        1 => h.key.as_deref() == Some(key),
        _ => h.seal.is_some(),
    })
}

/// Whether `name` is a results file's name (`<16 hex>.json`).
fn results_name(name: &str) -> Option<&str> {
    name.strip_suffix(".json")
        .filter(|k| k.len() == 16 && k.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// The most of a results file pruning reads to know it for one.
const MAX_FILE: u64 = 64 << 20;

/// Removes all but the newest [`KEEP`] + 1 results files: files of the
/// results folder named as results are and holding results (any other file
/// there, and anything a link leads to, is left alone).
fn prune(sum: &Path) {
    let Ok(dir) = crate::confined::folder_inside(sum, RESULTS) else {
        return;
    };
    let Ok(list) = std::fs::read_dir(&dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, String)> = list
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            results_name(&name)?;
            // Of the entry itself, not of a link's target.
            let meta = std::fs::symlink_metadata(e.path()).ok()?;
            meta.is_file().then_some((meta.modified().ok()?, name))
        })
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (_, name) in files.into_iter().skip(KEEP + 1) {
        let key = results_name(&name).unwrap_or_default().to_owned();
        crate::confined::remove_own(sum, &format!("{RESULTS}/{name}"), MAX_FILE, |bytes| {
            is_results(bytes, &key)
        });
    }
}

/// A results file: the body as written, and its seal.
#[derive(Serialize, Deserialize)]
struct Sealed {
    version: u32,
    seal: String,
    body: Box<serde_json::value::RawValue>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_body_is_served_under_its_own_key_only() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = ("00000000000000aa", "00000000000000bb");
        put(dir.path(), a, r#"{"x":[1,2]}"#);
        assert_eq!(get(dir.path(), a).as_deref(), Some(r#"{"x":[1,2]}"#));
        assert!(get(dir.path(), b).is_none());
        // Renamed to another key: the seal is of the first.
        std::fs::rename(file(dir.path(), a).unwrap(), file(dir.path(), b).unwrap()).unwrap();
        assert!(get(dir.path(), b).is_none());
        // Not JSON: nothing is written.
        put(dir.path(), a, "{not json");
        assert!(get(dir.path(), a).is_none());
    }

    #[test]
    fn an_edited_body_is_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let key = "00000000000000cc";
        put(dir.path(), key, r#"{"v":4598175219545276416}"#);
        assert!(get(dir.path(), key).is_some());
        let path = file(dir.path(), key).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        std::fs::write(
            &path,
            text.replace("4598175219545276416", "4602678819172646912"),
        )
        .unwrap();
        assert!(get(dir.path(), key).is_none(), "an edited file is served");
        // What pruning takes for results: this layout, or the first with its
        // own key inside; nothing else.
        put(dir.path(), key, "{}");
        assert!(is_results(&std::fs::read(&path).unwrap(), key));
        assert!(is_results(
            br#"{"version":1,"key":"00000000000000cc","rows":[]}"#,
            key
        ));
        assert!(!is_results(
            br#"{"version":1,"key":"00000000000000dd"}"#,
            key
        ));
        assert!(!is_results(br#"{"mine":1}"#, key));
    }

    #[test]
    fn only_the_newest_are_kept() {
        let dir = tempfile::tempdir().unwrap();
        for k in 0..(KEEP as u64 + 4) {
            put(dir.path(), &format!("{k:016x}"), "{}");
            // Distinct modification times, oldest first.
            let t = std::time::SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1000 + k);
            let f = std::fs::File::options()
                .write(true)
                .open(file(dir.path(), &format!("{k:016x}")).unwrap())
                .unwrap();
            f.set_modified(t).unwrap();
        }
        put(dir.path(), &format!("{:016x}", 999u64), "{}");
        let n = std::fs::read_dir(dir.path().join(RESULTS)).unwrap().count();
        assert_eq!(n, KEEP + 1);
        assert!(get(dir.path(), &format!("{:016x}", 0u64)).is_none());
        assert!(get(dir.path(), &format!("{:016x}", 999u64)).is_some());
    }

    #[test]
    fn a_shared_file_is_served_for_its_key_and_outlives_pruning() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = ("00000000000000aa", "00000000000000bb");
        assert!(put_shared(dir.path(), "clock-check", a, r#"{"c":1}"#));
        assert_eq!(
            get_shared(dir.path(), "clock-check", a).as_deref(),
            Some(r#"{"c":1}"#)
        );
        assert!(get_shared(dir.path(), "clock-check", b).is_none());
        // Not a key's results file, nor one named like one.
        assert!(get(dir.path(), a).is_none());
        assert!(!put_shared(dir.path(), "00000000000000cc", a, "{}"));
        for k in 0..(KEEP as u64 + 4) {
            put(dir.path(), &format!("{k:016x}"), "{}");
        }
        assert!(get_shared(dir.path(), "clock-check", a).is_some());
        // Another key's body replaces it.
        assert!(put_shared(dir.path(), "clock-check", b, r#"{"c":2}"#));
        assert!(get_shared(dir.path(), "clock-check", a).is_none());
        assert_eq!(
            get_shared(dir.path(), "clock-check", b).as_deref(),
            Some(r#"{"c":2}"#)
        );
    }
}
