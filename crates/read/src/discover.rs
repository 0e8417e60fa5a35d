//! Finds the inputs in a trace directory, as CCL-Bench users lay them out:
//! `rank{N}_trace.json`, `kineto_trace_{N}.json`, `worker{N}*.pt.trace.json`,
//! `rank-{N}.*.json.gz`, `profile_traces/iteration_{K}/…`, plus the workload card,
//! execution traces, memory snapshots and Nsight Systems files beside them.

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::LazyLock;

use regex::Regex;

use crate::error::{Error, Result};
use crate::formats::{self, Format, Head, Role, FORMATS, HEAD};
use crate::model::Warning;
use crate::naming::rank_from_name;
use crate::source::open;

pub mod rank_dirs;

pub use rank_dirs::{Window, Windows};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Input {
    pub path: PathBuf,
    pub format: Format,
    /// Rank parsed from the file name (or its rank folder's), if it carries one.
    pub rank: Option<u32>,
    /// Where the file sits among its rank's profiling windows, in a layout
    /// of one folder per rank.
    pub window: Option<Window>,
}

#[derive(Debug, Clone, Default)]
pub struct Discovery {
    pub inputs: Vec<Input>,
    /// The `iteration_K` folder chosen, for `profile_traces` layouts.
    pub iteration: Option<u32>,
    /// Things the user should know (which iteration was picked, files skipped).
    pub notes: Vec<crate::model::Warning>,
}

/// Which of several recorded runs or windows to read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Pick {
    /// `profile_traces/iteration_K` (default: the newest).
    pub iteration: Option<u32>,
    /// Profiling windows of per-rank folders (default: the newest).
    pub windows: Windows,
    /// Of several unrelated runs in one folder, the `K`th in name order
    /// (default: the newest).
    pub run: Option<u32>,
}

/// Inputs at `path`: a single trace file, or a trace directory.
pub fn discover(path: &Path, pick: Pick) -> Result<Discovery> {
    discover_in(path, pick, FORMATS)
}

/// [`discover`] with the formats of `table`.
pub fn discover_in(path: &Path, pick: Pick, table: &[Format]) -> Result<Discovery> {
    discover_known(path, pick, table, None)
}

/// Files recognised before, by path, with the size and modification time
/// they had then and the format found: a summary's inputs. A file still of
/// that size and time is taken as that format without reading its head
/// again (at 1,024 ranks, 64 MiB of heads on every look).
pub type Known = HashMap<PathBuf, (Stamp, Format)>;

/// A file's size and modification time (nanoseconds since the Unix epoch,
/// 0 where the file system keeps none).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    pub size: u64,
    pub mtime_ns: u64,
}

impl Stamp {
    pub fn of(m: &fs::Metadata) -> Self {
        let mtime_ns = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
        Stamp {
            size: m.len(),
            mtime_ns,
        }
    }
}

/// The formats a scan recognises, the files it already knows, and how
/// many of those it found as they were.
#[derive(Clone, Copy)]
struct Sniffer<'a> {
    table: &'a [Format],
    known: Option<&'a Known>,
    same: &'a AtomicUsize,
}

impl Sniffer<'_> {
    /// The format of the file at `path` (whose metadata `meta` is, when
    /// the caller has it).
    fn sniff(&self, path: &Path, meta: Option<&fs::Metadata>) -> Result<Option<Format>> {
        if let Some((stamp, format)) = self.known.and_then(|k| k.get(path)) {
            let now = match meta {
                Some(m) => Some(Stamp::of(m)),
                None => fs::metadata(path).ok().map(|m| Stamp::of(&m)),
            };
            if now == Some(*stamp) {
                self.same.fetch_add(1, Ordering::Relaxed);
                return Ok(Some(*format));
            }
        }
        sniff(path, self.table)
    }
}

/// [`discover_in`], taking the files of `known` as they were recognised.
pub fn discover_known(
    path: &Path,
    pick: Pick,
    table: &[Format],
    known: Option<&Known>,
) -> Result<Discovery> {
    discover_counting(path, pick, table, known, &AtomicUsize::new(0))
}

/// [`discover_known`], with how many files of `known` it found of the size
/// and time they had: all of them, when nothing changed.
pub fn discover_checked(
    path: &Path,
    pick: Pick,
    table: &[Format],
    known: &Known,
) -> Result<(Discovery, usize)> {
    let same = AtomicUsize::new(0);
    let found = discover_counting(path, pick, table, Some(known), &same)?;
    Ok((found, same.into_inner()))
}

fn discover_counting(
    path: &Path,
    pick: Pick,
    table: &[Format],
    known: Option<&Known>,
    same: &AtomicUsize,
) -> Result<Discovery> {
    let sniffer = Sniffer { table, known, same };
    let iteration = pick.iteration;
    let meta = fs::metadata(path).map_err(|source| Error::Io {
        path: path.to_owned(),
        source,
    })?;
    if meta.is_file() {
        let format = sniffer
            .sniff(path, Some(&meta))?
            .ok_or_else(|| Error::NotATrace {
                path: path.to_owned(),
                why: format!(
                    "{} (this tool reads {})",
                    not_a_trace_why(path),
                    formats::summary(table)
                ),
            })?;
        // A file this tool cannot read, but knows how to make readable.
        if let Role::Unreadable { advice } = format.role {
            return Err(Error::Unsupported {
                path: path.to_owned(),
                why: advice(path),
            });
        }
        return Ok(Discovery {
            inputs: vec![Input {
                path: path.to_owned(),
                format,
                rank: rank_from_name(path),
                window: None,
            }],
            ..Default::default()
        });
    }
    if !meta.is_dir() {
        // Reading a pipe or a device could block or never end.
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: "neither a file nor a directory (a pipe, socket or device)".into(),
        });
    }
    let mut d = Discovery::default();
    let mut dir = path.to_owned();
    let profile = dir.join("profile_traces");
    if profile.is_dir() {
        dir = profile;
    }
    if let Some((run, count)) = pick_profile_run(&dir)? {
        if count > 1 {
            d.notes.push(Warning::reading(format!(
                "read the newest of {count} profiler runs, {}; point at another run's folder to read it",
                run.display()
            )));
        }
        dir = run;
    }
    if let Some((k, chosen)) = pick_iteration(&dir, iteration)? {
        d.iteration = Some(k);
        dir = chosen;
    } else if let Some(k) = iteration {
        return Err(Error::IterationNotFound {
            dir: path.to_owned(),
            wanted: k,
            available: "none (no iteration_K folders)".into(),
        });
    }
    let windows = rank_dirs::scan(&dir, pick.windows, sniffer, &mut d)?;
    // The card may sit at the top of the run folder, above profile_traces/.
    for folder in [path, dir.as_path()] {
        // A rank's own folder holds its windows, read above.
        if folder == dir && windows == rank_dirs::Found::Itself {
            break;
        }
        scan_folder(folder, sniffer, &mut d)?;
        if folder == dir {
            break;
        }
    }
    // ccl-bench layout: memory_snapshot/iteration_K/ beside profile_traces/.
    let snapshots = path.join("memory_snapshot");
    if snapshots.is_dir() {
        let k = d.iteration;
        match pick_iteration(&snapshots, k) {
            Ok(Some((_, folder))) => scan_folder(&folder, sniffer, &mut d)?,
            Ok(None) => scan_folder(&snapshots, sniffer, &mut d)?,
            Err(e) => d
                .notes
                .push(Warning::not_read(format!("memory snapshots not read: {e}"))),
        }
    }
    if !d.inputs.iter().any(|i| i.format.is_usable()) {
        // A run folder copied or unpacked into one of its own (`job/run_1/`):
        // read it, and say so (never through a link).
        if let (true, Some(inner)) = (d.inputs.is_empty(), only_folder(path)) {
            if let Ok(mut found) = discover_counting(&inner, pick, table, known, same) {
                found.notes.insert(
                    0,
                    Warning::reading(format!(
                        "read {}, the only folder in {}",
                        inner.display(),
                        path.display()
                    )),
                );
                return Ok(found);
            }
        }
        return Err(no_traces(path, &dir, &d));
    }
    Ok(d)
}

/// The one entry of `dir` (hidden ones aside) when it is a folder, not a
/// link to one.
fn only_folder(dir: &Path) -> Option<PathBuf> {
    let entries: Vec<PathBuf> = read_dir(dir)
        .ok()?
        .into_iter()
        .filter(|p| {
            !p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    match &entries[..] {
        [one] if fs::symlink_metadata(one).is_ok_and(|m| m.is_dir()) => Some(one.clone()),
        _ => None,
    }
}

fn no_traces(path: &Path, dir: &Path, d: &Discovery) -> Error {
    for input in &d.inputs {
        if let Role::Unreadable { advice } = input.format.role {
            return Error::Unsupported {
                path: input.path.clone(),
                why: advice(&input.path),
            };
        }
    }
    let found: Vec<String> = d
        .inputs
        .iter()
        .map(|i| format!("{} ({})", i.path.display(), i.format.name))
        .collect();
    let detail = if found.is_empty() {
        let mut detail = format!(
            "looked in {} for rank*_trace.json, kineto_trace_*.json, worker*.pt.trace.json, *.json.gz, \
             *.sqlite (Nsight Systems), *.xplane.pb (JAX/XLA, also under plugins/profile/<run>/), \
             *.zip (nsys-jax), rank_N/ folders of profiler windows",
            dir.display()
        );
        for note in &d.notes {
            detail.push_str("; ");
            detail.push_str(&note.text);
        }
        detail
    } else {
        format!(
            "found only {}; reading those is not supported yet",
            found.join(", ")
        )
    };
    Error::NoTraces {
        dir: path.to_owned(),
        detail,
    }
}

/// The JAX/TensorFlow profiler (TensorBoard layout) writes one folder per
/// capture under `logdir/plugins/profile/`, named by its start time
/// (`2024_05_01_12_30_45`), so the greatest name is the newest. Returns that
/// run and how many there were, when `dir` is such a log dir (or its
/// `plugins/profile` folder).
fn pick_profile_run(dir: &Path) -> Result<Option<(PathBuf, usize)>> {
    let nested = dir.join("plugins").join("profile");
    let profile = if nested.is_dir() {
        nested
    } else if dir.file_name().is_some_and(|n| n == "profile")
        && dir
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "plugins")
    {
        dir.to_owned()
    } else {
        return Ok(None);
    };
    let runs: Vec<PathBuf> = read_dir(&profile)?
        .into_iter()
        .filter(|p| p.is_dir())
        .collect();
    // `read_dir` sorts, so the last is the newest.
    Ok(runs.last().map(|run| (run.clone(), runs.len())))
}

static ITERATION: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"^iteration_(\d+)$").expect("valid regex"));

/// Picks `iteration_K` under `dir`: the requested one, else the newest (largest K).
fn pick_iteration(dir: &Path, wanted: Option<u32>) -> Result<Option<(u32, PathBuf)>> {
    // Names first: a look at each of 1,024 rank files is 1,024 round trips.
    let mut found: Vec<(u32, PathBuf)> = read_dir(dir)?
        .into_iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let k = ITERATION.captures(name)?[1].parse().ok()?;
            Some((k, p))
        })
        .filter(|(_, p)| p.is_dir())
        .collect();
    if found.is_empty() {
        return Ok(None);
    }
    found.sort();
    // `iteration_5` and `iteration_05` are both iteration 5: two runs' worth
    // of one number is an error, not a silent pick.
    if let Some(w) = found.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(Error::TwoIterations {
            k: w[0].0,
            first: w[0].1.clone(),
            second: w[1].1.clone(),
        });
    }
    match wanted {
        None => Ok(found.pop()),
        Some(k) => match found.iter().position(|(i, _)| *i == k) {
            Some(i) => Ok(Some(found.swap_remove(i))),
            None => Err(Error::IterationNotFound {
                dir: dir.to_owned(),
                wanted: k,
                available: found
                    .iter()
                    .map(|(i, _)| i.to_string())
                    .collect::<Vec<_>>()
                    .join(", "),
            }),
        },
    }
}

fn read_dir(dir: &Path) -> Result<Vec<PathBuf>> {
    let io = |source| Error::Io {
        path: dir.to_owned(),
        source,
    };
    let mut v = fs::read_dir(dir)
        .map_err(io)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::io::Result<Vec<_>>>()
        .map_err(io)?;
    // One folder's entries: their paths differ in the last part alone, so
    // comparing bytes orders them as comparing components would, at a
    // fraction of the cost for a thousand ranks.
    v.sort_unstable_by(|a, b| a.as_os_str().cmp(b.as_os_str()));
    Ok(v)
}

/// What a look at one file of a folder found.
enum Seen {
    /// A folder, or anything else not a regular file.
    NotAFile,
    /// A dangling link or a link loop.
    Gone(String),
    /// A name that is not UTF-8 text.
    NotText,
    Sniffed(Result<Option<Format>>),
}

fn scan_folder(dir: &Path, sniffer: Sniffer, d: &mut Discovery) -> Result<()> {
    use rayon::prelude::*;
    // Each file looked at (and its head read, when not known) in parallel:
    // on a cluster file system a look is a round trip, and there is one per
    // rank.
    let seen: Vec<(PathBuf, Seen)> = (read_dir(dir)?.into_par_iter())
        .map(|path| {
            let seen = match fs::metadata(&path) {
                Ok(m) if m.is_file() => {
                    // Matching a name needs text: a name that is not UTF-8
                    // would otherwise be passed over without a word.
                    if path.file_name().is_some_and(|n| n.to_str().is_none()) {
                        Seen::NotText
                    } else {
                        Seen::Sniffed(sniffer.sniff(&path, Some(&m)))
                    }
                }
                Ok(_) => Seen::NotAFile,
                Err(e) => Seen::Gone(e.to_string()),
            };
            (path, seen)
        })
        .collect();
    let mut skipped = Skipped::default();
    for (path, seen) in seen {
        let sniffed: Result<Option<Format>> = match seen {
            Seen::NotAFile => continue,
            // Said only where a trace was likely meant.
            Seen::Gone(why) => {
                if looks_like_trace(&path) {
                    skipped.add(&path, why);
                }
                continue;
            }
            Seen::NotText => {
                skipped.add(
                    &path,
                    "its name is not UTF-8 text; rename it to read it".into(),
                );
                continue;
            }
            Seen::Sniffed(s) => s,
        };
        match sniffed {
            Ok(Some(format)) => d.inputs.push(Input {
                rank: rank_from_name(&path),
                path,
                format,
                window: None,
            }),
            Ok(None) => {
                if looks_like_trace(&path) {
                    skipped.add(&path, not_a_trace_why(&path));
                }
            }
            // An unreadable neighbour file should not stop the run; say so.
            Err(e) => d.notes.push(Warning::not_read(format!("skipped {e}"))),
        }
    }
    d.notes.extend(skipped.notes());
    Ok(())
}

/// Files passed over in one folder. A folder of 100,000 empty rank files is
/// a few lines, not 100,000: the first few by name, the rest counted by why.
#[derive(Default)]
struct Skipped {
    named: Vec<String>,
    rest: Vec<(String, usize)>,
}

impl Skipped {
    const NAMED: usize = 8;

    fn add(&mut self, path: &Path, why: String) {
        if self.named.len() < Self::NAMED {
            self.named
                .push(format!("skipped {}: {why}", path.display()));
            return;
        }
        match self.rest.iter_mut().find(|(w, _)| *w == why) {
            Some((_, n)) => *n += 1,
            None => self.rest.push((why, 1)),
        }
    }

    fn notes(self) -> Vec<Warning> {
        let mut out: Vec<Warning> = self.named.into_iter().map(Warning::not_read).collect();
        out.extend(
            self.rest
                .into_iter()
                .map(|(why, n)| Warning::not_read(format!("skipped {n} more file(s): {why}"))),
        );
        out
    }
}

/// A JSON file named like one rank's trace (`rank3_trace.json`, `worker0.pt.trace.json`):
/// when it cannot be read, a rank is missing, which the user must hear about.
fn looks_like_trace(path: &Path) -> bool {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    (name.ends_with(".json") || name.ends_with(".gz"))
        && (rank_from_name(path).is_some() || name.contains("trace"))
}

/// Why a file that `sniff` turned down is not a trace, from its size and first bytes.
fn not_a_trace_why(path: &Path) -> String {
    let mut head = Vec::new();
    let read = open(path).and_then(|r| {
        r.take(HEAD as u64)
            .read_to_end(&mut head)
            .map_err(|source| Error::Io {
                path: path.to_owned(),
                source,
            })
    });
    if head.is_empty() && fs::metadata(path).is_ok_and(|m| m.len() == 0) {
        "empty file (0 bytes)".into()
    } else if head.starts_with(b"\xFF\xFE") || head.starts_with(b"\xFE\xFF") {
        "UTF-16 text; traces are UTF-8 JSON (save it as UTF-8 to read it)".into()
    } else if read.is_ok() && head.iter().all(u8::is_ascii_whitespace) {
        "empty file (only whitespace)".into()
    } else if head.len() < HEAD {
        format!(
            "no \"traceEvents\" in its {} bytes: not a profiler trace, or one cut off before its events",
            head.len()
        )
    } else {
        "no \"traceEvents\" (or other known trace format) in its first 64 KiB, so not a profiler trace".into()
    }
}

/// The format of a file, from its name and, where that is not enough, its
/// first bytes (gzip is detected by magic bytes, not by extension).
pub(crate) fn sniff(path: &Path, table: &[Format]) -> Result<Option<Format>> {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if !formats::needs_head(table, &name) {
        return Ok(formats::recognise(table, None, &name).copied());
    }
    let mut bytes = Vec::with_capacity(HEAD);
    let reader = open(path)?;
    if let Err(source) = reader.take(HEAD as u64).read_to_end(&mut bytes) {
        // A damaged gzip stream still gives us what it decoded before the damage.
        if bytes.is_empty() {
            return Err(Error::Io {
                path: path.to_owned(),
                source,
            });
        }
    }
    let head = Head { name, bytes };
    Ok(formats::recognise(table, Some(&head), &head.name).copied())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kineto() -> Format {
        *FORMATS
            .iter()
            .find(|f| f.name == "PyTorch profiler trace")
            .expect("a Kineto format")
    }

    /// A file known by its stamp is taken as it was recognised, its head
    /// unread; a file of another size or time is read again.
    #[test]
    fn a_known_file_is_not_read_again_until_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("rank0_trace.json");
        // Not a trace by its bytes: only the stamp can make it one.
        fs::write(&path, b"{\"not\": \"a trace\"}").unwrap();
        let stamp = Stamp::of(&fs::metadata(&path).unwrap());
        let known: Known = [(path.clone(), (stamp, kineto()))].into();
        let found = discover_known(dir.path(), Pick::default(), FORMATS, Some(&known)).unwrap();
        assert_eq!(found.inputs.len(), 1);
        assert_eq!(found.inputs[0].format, kineto());
        assert_eq!(found.inputs[0].rank, Some(0));
        // Another size: its head is read, and it is no trace.
        fs::write(&path, b"{\"not\": \"a trace, still\"}").unwrap();
        let e = discover_known(dir.path(), Pick::default(), FORMATS, Some(&known)).unwrap_err();
        assert!(e.to_string().contains("rank0_trace.json"), "{e}");
        // Without what is known, the same.
        assert!(discover_in(dir.path(), Pick::default(), FORMATS).is_err());
    }
}
