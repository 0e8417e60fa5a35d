//! Opening a summary as a trace directory: its manifest stands for
//! discovery (the same inputs in the same order, each read by a reader of
//! its tables), after checking that it is complete, undamaged and, where the
//! traces are reachable, current.

use std::borrow::Cow;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use super::manifest::{self, damaged, Entry, Manifest, ENTRIES, MANIFEST, VERSION};
use super::reduce::Reduce;
use crate::discover::{Discovery, Input, Pick, Window};
use crate::error::{Error, Result};
use crate::formats::{Format, PerRank, Role};

use rayon::prelude::*;

/// How many inputs a stale or incomplete summary's error names.
const NAMED: usize = 4;

/// Whether `path` is a summary folder.
pub fn is_summary(path: &Path) -> bool {
    path.join(MANIFEST).is_file()
}

/// An opened summary: its inputs as a discovery, its manifest, and a digest
/// of the manifest and every entry (what results kept in it depend on).
#[derive(Debug)]
pub struct Opened {
    pub discovery: Discovery,
    pub manifest: Manifest,
    pub digest: u64,
    /// Its index, when one was made beside these entries: a lean load
    /// reads its entries and gathered tables from it.
    pub reduce: Option<std::sync::Arc<Reduce>>,
}

/// An input's entry as read: not read by loads, missing, or there and intact
/// (with the XXH3-64 of its bytes), read or the index's (see `reduce`).
enum Got<'a> {
    Unread,
    Missing,
    Entry(PathBuf, Box<Entry>, u64),
    Indexed(PathBuf, &'a Entry, u64),
}

impl Got<'_> {
    /// The entry got, and its path.
    fn entry(&self) -> Option<(&Path, &Entry)> {
        match self {
            Got::Entry(path, e, _) => Some((path, e)),
            Got::Indexed(path, e, _) => Some((path, e)),
            Got::Unread | Got::Missing => None,
        }
    }
}

/// The summary's inputs as a discovery. `named` is the traces' path when
/// the user named the traces (the summary beside them, or in the cache):
/// the summary must then describe the traces there, as they are now. When
/// the user named the summary itself, it describes the traces where they
/// were summarized, while they are there.
pub fn discover(
    sum: &Path,
    pick: Pick,
    table: &'static [Format],
    named: Option<&Path>,
) -> Result<Opened> {
    refuse_links(sum)?;
    let (m, m_hash): (Manifest, u64) = manifest::read_json_hashed(&sum.join(MANIFEST))?;
    if m.ccl_bench_summary != VERSION {
        return Err(damaged(
            &sum.join(MANIFEST),
            format!(
                "layout {} where this tool reads {VERSION}",
                m.ccl_bench_summary
            ),
        ));
    }
    // Where the traces are for this open: the folder named stands for the
    // one summarized.
    let root = match named {
        Some(path) => root_of(&m, path).ok_or_else(|| Error::NotATrace {
            path: sum.to_owned(),
            why: format!(
                "the summary of {} does not describe {}",
                traces(&m).display(),
                path.display()
            ),
        })?,
        None => m.root.clone(),
    };
    let wanted = (
        pick.iteration,
        crate::discover::rank_dirs::windows_text(pick.windows),
    );
    if pick != Pick::default() && wanted != (m.iteration, m.windows.clone()) {
        return Err(Error::Unsupported {
            path: sum.to_owned(),
            why: format!(
                "the summary holds iteration {} and windows `{}`; summarize with --iteration/--window to get others",
                m.iteration.map_or("(none)".into(), |k| k.to_string()),
                m.windows
            ),
        });
    }
    // The index, when there is one beside these entries, stands for them.
    let reduce = Reduce::open(sum, &m, m_hash);
    let indexed = |name: &str| reduce.as_ref()?.entry(name);
    // Entries read in parallel: on a cluster file system each look is a
    // round trip, and there is one per rank.
    let got: Vec<Result<Got>> = m
        .inputs
        .par_iter()
        .map(|rec| {
            let Some(name) = &rec.entry else {
                return Ok(Got::Unread);
            };
            if !manifest::safe_name(name) {
                return Err(damaged(&sum.join(MANIFEST), format!("entry name {name}")));
            }
            let entry_path = sum.join(ENTRIES).join(name);
            let got = match indexed(name) {
                Some((entry, Some(hash))) => Got::Indexed(entry_path, entry, hash),
                _ if !entry_path.is_file() => return Ok(Got::Missing),
                _ => {
                    let (entry, hash): (Entry, u64) = manifest::read_json_hashed(&entry_path)?;
                    Got::Entry(entry_path, Box::new(entry), hash)
                }
            };
            // Its tables are checked (size and hash) where they are read.
            match got.entry() {
                Some((path, entry)) if entry.path != rec.path => Err(damaged(
                    path,
                    format!("it describes {}, not {}", entry.path, rec.path),
                )),
                _ => Ok(got),
            }
        })
        .collect();
    let mut digest = xxhash_rust::xxh3::Xxh3::new();
    digest.update(&m_hash.to_le_bytes());
    let mut inputs = Vec::with_capacity(m.inputs.len());
    let mut missing = Vec::new();
    let mut entries = Vec::new();
    for (rec, got) in m.inputs.iter().zip(got) {
        let format = table.iter().find(|f| f.name == rec.format).ok_or_else(|| {
            damaged(
                &sum.join(MANIFEST),
                format!("unknown format {}", rec.format),
            )
        })?;
        if !manifest::safe_rel(&rec.path) {
            return Err(damaged(
                &sum.join(MANIFEST),
                format!("input path {} leaves the traces' folder", rec.path),
            ));
        }
        let original = root.join(&rec.path);
        let window = rec.window.map(|(index, of)| Window { index, of });
        let (entry_path, entry) = match got? {
            Got::Unread => {
                // Not read by a load: listed so warnings name it as the traces do.
                inputs.push(Input {
                    path: original,
                    format: *format,
                    rank: rec.rank,
                    window,
                });
                continue;
            }
            Got::Missing => {
                missing.push(rec.path.clone());
                continue;
            }
            Got::Entry(path, entry, hash) => {
                digest.update(&hash.to_le_bytes());
                (path, Cow::Owned(*entry))
            }
            Got::Indexed(path, entry, hash) => {
                digest.update(&hash.to_le_bytes());
                (path, Cow::Borrowed(entry))
            }
        };
        let path = match format.role {
            // A card is read from its copy by its own reader.
            Role::Card { .. } => match entry.files.first() {
                Some(file) => card_copy(sum, &entry_path, file)?,
                None => return Err(damaged(&entry_path, "no card copy")),
            },
            _ => entry_path,
        };
        inputs.push(Input {
            path,
            format: summary_format(format),
            rank: rec.rank,
            window,
        });
        entries.push((original, entry));
    }
    if !missing.is_empty() {
        return Err(Error::NotATrace {
            path: sum.to_owned(),
            why: format!(
                "incomplete summary: {} of {} inputs not summarized ({}{}); a summarize task stopped early? run it again to complete the set",
                missing.len(),
                m.inputs.iter().filter(|i| i.entry.is_some()).count(),
                missing[..missing.len().min(NAMED)].join(", "),
                if missing.len() > NAMED { ", ..." } else { "" }
            ),
        });
    }
    check_current(sum, &m, &root, &entries, table)?;
    let mut m = m;
    m.root = root;
    Ok(Opened {
        discovery: Discovery {
            inputs,
            iteration: m.iteration,
            notes: m.notes.clone(),
        },
        manifest: m,
        digest: digest.digest(),
        reduce: reduce.map(std::sync::Arc::new),
    })
}

/// Refuses a summary holding links among its folders and files: the tool
/// writes none, and one planted there could lead reads, and the removals
/// of kept results and old tables, to files outside the summary.
pub(crate) fn refuse_links(sum: &Path) -> Result<()> {
    let links = crate::confined::links_in(sum);
    if links.is_empty() {
        return Ok(());
    }
    Err(Error::NotATrace {
        path: sum.to_owned(),
        why: format!(
            "not a summary this tool wrote: {} {} a link (a summary holds no links, and the tool \
             will not read, write or remove files through one); run `ccl-bench summarize` into \
             a new folder",
            links.join(", "),
            if links.len() == 1 { "is" } else { "are" }
        ),
    })
}

/// A card's copy in the summary, checked before a reader sees it: inside
/// the summary, a regular file, and the bytes that were copied (an edited
/// copy is not served).
fn card_copy(
    sum: &Path,
    entry_path: &Path,
    (rel, size, xxh3): &(String, u64, String),
) -> Result<PathBuf> {
    let path = crate::confined::inside(sum, rel).map_err(|why| damaged(entry_path, why))?;
    let bytes = crate::confined::read_file(&path, *size).map_err(|e| damaged(&path, e))?;
    if bytes.len() as u64 != *size
        || format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes)) != *xxh3
    {
        return Err(damaged(
            &path,
            "the card's copy changed since it was written",
        ));
    }
    Ok(path)
}

/// The folder the manifest's input paths are relative to, for traces at
/// `path`: `path` itself for a summarized folder, its parent for a
/// summarized file of the same name.
fn root_of(m: &Manifest, path: &Path) -> Option<PathBuf> {
    if m.trace.is_empty() {
        return Some(path.to_owned());
    }
    let trace = Path::new(&m.trace);
    let mut root = path;
    for _ in trace.components() {
        root = root.parent()?;
    }
    (root.join(trace) == path).then(|| root.to_owned())
}

/// Whether the input at `path` is the one an entry was made of: the same
/// size and time, or, touched since, the same size and content.
fn unchanged(path: &Path, e: &Entry) -> bool {
    let Ok(now) = manifest::stat(path) else {
        return false;
    };
    let then = &e.fingerprint;
    now.size == then.size
        && (now.mtime_ns == then.mtime_ns
            || (!then.xxh3.is_empty() && manifest::hash(path).is_ok_and(|h| h == then.xxh3)))
}

/// The summary must describe the traces at `root` as they are: an input
/// changed (by content), added or removed makes it stale, and a stale
/// summary is refused (never silently trusted). Where there are no traces
/// at `root`, the summary is taken as it is: it was copied away from them.
fn check_current(
    sum: &Path,
    m: &Manifest,
    root: &Path,
    entries: &[(PathBuf, Cow<Entry>)],
    table: &'static [Format],
) -> Result<()> {
    let trace = if m.trace.is_empty() {
        root.to_owned()
    } else {
        root.join(&m.trace)
    };
    if !root.is_dir() {
        return Ok(());
    }
    let pick = Pick {
        iteration: m.iteration,
        windows: crate::discover::rank_dirs::parse_windows(&m.windows).unwrap_or_default(),
        // A summary keeps every run's inputs; a load chooses.
        run: None,
    };
    // Discovery again, by names and heads; a file of the size and time its
    // entry records is not read.
    let known: crate::discover::Known = entries
        .iter()
        .filter_map(|(original, e)| {
            let format = table.iter().find(|f| f.name == e.format)?;
            let stamp = crate::discover::Stamp {
                size: e.fingerprint.size,
                mtime_ns: e.fingerprint.mtime_ns,
            };
            Some((original.clone(), (stamp, *format)))
        })
        .collect();
    let found = crate::discover::discover_checked(&trace, pick, table, &known);
    // Inputs changed by content since: looked at one by one only when
    // discovery did not find each as it was (each a look, thousands on a
    // cluster file system).
    let same = found.as_ref().map_or(0, |f| f.1);
    let mut changed: Vec<String> = if same == entries.len() {
        Vec::new()
    } else {
        (entries.par_iter())
            .filter(|(original, e)| !unchanged(original, e))
            .map(|(_, e)| e.path.clone())
            .collect()
    };
    if changed.is_empty() {
        // Inputs added or removed since.
        let found = found.map(|f| f.0);
        let now: Vec<PathBuf> = found
            .as_ref()
            .map(|d| d.inputs.iter().map(|i| i.path.clone()).collect())
            .unwrap_or_default();
        let then: Vec<PathBuf> = m.inputs.iter().map(|i| root.join(&i.path)).collect();
        // A file skipped now and not then (or the reverse) changes the warnings.
        if found.is_ok_and(|d| d.notes != m.notes) {
            changed.push("the files passed over beside them".into());
        }
        // Sets: comparing paths component by component is slow, n² of them
        // slower still at 1,024 ranks.
        let (now_set, then_set): (HashSet<&PathBuf>, HashSet<&PathBuf>) =
            (now.iter().collect(), then.iter().collect());
        for p in now.iter().filter(|p| !then_set.contains(p)) {
            changed.push(format!("{} (new)", p.display()));
        }
        for p in then.iter().filter(|p| !now_set.contains(p)) {
            changed.push(format!("{} (gone)", p.display()));
        }
    }
    if changed.is_empty() {
        return Ok(());
    }
    Err(Error::NotATrace {
        path: sum.to_owned(),
        why: format!(
            "stale summary: {} input(s) of {} changed since it was built ({}{}); run `ccl-bench summarize {}` again",
            changed.len(),
            trace.display(),
            changed[..changed.len().min(NAMED)].join(", "),
            if changed.len() > NAMED { ", ..." } else { "" },
            trace.display()
        ),
    })
}

/// The folder or file the summary was made of.
pub fn traces(m: &Manifest) -> PathBuf {
    if m.trace.is_empty() {
        m.root.clone()
    } else {
        m.root.join(&m.trace)
    }
}

/// `format` with readers of the summary's tables in place of its own; its
/// name, precedence and layout rules stay, so a load treats the inputs as
/// it treats the traces.
fn summary_format(format: &Format) -> Format {
    let role = match format.role {
        Role::Timeline {
            precedence,
            devices_per_host,
            ..
        } => Role::Timeline {
            precedence,
            devices_per_host,
            read: super::read::timelines,
        },
        // The entry's name carries the rank the input's name gave.
        Role::Memory(how) => Role::Memory(PerRank {
            read: super::read::memory,
            rank_of: crate::naming::rank_from_name,
            naming: how.naming,
        }),
        Role::ExecTrace(how) => Role::ExecTrace(PerRank {
            read: super::read::exec_trace,
            rank_of: crate::naming::rank_from_name,
            naming: how.naming,
        }),
        other => other,
    };
    Format { role, ..*format }
}
