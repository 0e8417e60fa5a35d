//! One folder per rank, one file per profiling window:
//! `torch.profiler.tensorboard_trace_handler` called in a loop writes
//! `run/rank_0/<host>_<pid>.<ms>.pt.trace.json.gz` for every profiler cycle.
//! The rank comes from the folder (`rank_N`, `rank-N`, `rankN`, `worker_N`),
//! the windows are ordered in time, and only the windows asked for are opened:
//! a folder of 12,000 windows costs a directory listing, not 12,000 reads.

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::LazyLock;
use std::time::SystemTime;

use regex::Regex;

use super::{read_dir, Discovery, Input, Skipped, Sniffer};
use crate::error::Result;
use crate::model::Warning;

/// Which profiling windows of each rank to read.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Windows {
    /// The newest (last written) window of each rank.
    #[default]
    Newest,
    /// The K-th window in time order, from 1.
    Nth(u32),
    /// Every window, joined into one timeline per rank.
    All,
}

/// Where a file sits among its rank's windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// From 1, in time order.
    pub index: u32,
    pub of: u32,
}

static RANK_DIR: LazyLock<Regex> =
    LazyLock::new(|| Regex::new(r"(?-u)^(?:rank|worker)[-_]?([0-9]+)$").expect("valid regex"));

/// The millisecond timestamp `tensorboard_trace_handler` puts in a window's
/// name (`host_1234.1716200000123.pt.trace.json.gz`).
static STAMP: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?-u)\.([0-9]+)\.pt\.trace\.json(?:\.gz)?$").expect("valid regex")
});

/// The rank a folder's name gives (`rank_3`, `rank-3`, `worker_3`).
pub(crate) fn rank_of_dir(path: &Path) -> Option<u32> {
    let name = path.file_name()?.to_str()?.to_ascii_lowercase();
    RANK_DIR.captures(&name)?[1].parse().ok()
}

/// The per-rank folders directly under `dir`, by rank.
pub(crate) fn rank_dirs(dir: &Path) -> Result<Vec<(u32, PathBuf)>> {
    let mut found: Vec<(u32, PathBuf)> = read_dir(dir)?
        .into_iter()
        .filter_map(|p| Some((rank_of_dir(&p)?, p)))
        .filter(|(_, p)| p.is_dir())
        .collect();
    found.sort();
    Ok(found)
}

/// A file that can only be a profiler window by its name; anything else in a
/// rank folder (`metadata_rank_0.yml`, logs) is not one.
fn is_window_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    name.ends_with(".json") || name.ends_with(".json.gz")
}

/// The windows of one rank folder in time order: by the timestamp in their
/// names, else by modification time, then by name.
fn windows_of(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut files: Vec<(u128, SystemTime, PathBuf)> = read_dir(dir)?
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(is_window_name)
        })
        .filter_map(|p| {
            let meta = fs::metadata(&p).ok().filter(fs::Metadata::is_file)?;
            let name = p.file_name()?.to_str()?.to_ascii_lowercase();
            let stamp = STAMP
                .captures(&name)
                .and_then(|c| c[1].parse().ok())
                .unwrap_or(u128::MAX);
            let mtime = meta.modified().unwrap_or(SystemTime::UNIX_EPOCH);
            Some((stamp, mtime, p))
        })
        .collect();
    files.sort();
    Ok(files.into_iter().map(|(_, _, p)| p).collect())
}

/// Where the rank folders of a run were found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    None,
    /// Under the folder searched.
    Below,
    /// The folder searched is one rank's folder.
    Itself,
}

/// Adds the asked-for windows of every rank folder under `dir` (or of `dir`
/// itself, when it is one) to `d`.
pub(super) fn scan(
    dir: &Path,
    windows: Windows,
    sniffer: Sniffer,
    d: &mut Discovery,
) -> Result<Found> {
    let mut ranks = rank_dirs(dir)?;
    let mut found = Found::Below;
    if ranks.is_empty() {
        match rank_of_dir(dir) {
            Some(rank) if !windows_of(dir)?.is_empty() => {
                ranks.push((rank, dir.to_owned()));
                found = Found::Itself;
            }
            _ => return Ok(Found::None),
        }
    }
    // Two folders of one rank (`rank_0/` and `worker_0/`) are two runs, or
    // one copied twice: reading both would count the rank twice.
    if let Some(w) = ranks.windows(2).find(|w| w[0].0 == w[1].0) {
        return Err(crate::error::Error::MixedRuns {
            rank: w[0].0,
            first: w[0].1.clone(),
            second: w[1].1.clone(),
        });
    }
    let mut skipped = Skipped::default();
    let mut counts = Vec::with_capacity(ranks.len());
    for (rank, folder) in &ranks {
        let files = windows_of(folder)?;
        let of = u32::try_from(files.len()).unwrap_or(u32::MAX);
        counts.push(of);
        let mut numbered = files
            .into_iter()
            .enumerate()
            .map(|(i, p)| (u32::try_from(i + 1).unwrap_or(u32::MAX), p));
        let chosen: Vec<(u32, PathBuf)> = match windows {
            Windows::Newest => numbered.next_back().into_iter().collect(),
            Windows::Nth(k) => numbered.filter(|(i, _)| *i == k).collect(),
            Windows::All => numbered.collect(),
        };
        if chosen.is_empty() && of > 0 {
            d.notes.push(Warning::not_read(format!(
                "{}: no window {} (it has {of}); rank {rank} is not read",
                folder.display(),
                match windows {
                    Windows::Nth(k) => k,
                    _ => 0,
                }
            )));
        }
        for (index, path) in chosen {
            match sniffer.sniff(&path, None) {
                Ok(Some(format)) if format.is_timeline() => d.inputs.push(Input {
                    path,
                    format,
                    rank: Some(*rank),
                    window: Some(Window { index, of }),
                }),
                Ok(_) => skipped.add(&path, super::not_a_trace_why(&path)),
                Err(e) => d.notes.push(Warning::not_read(format!("skipped {e}"))),
            }
        }
    }
    d.notes.extend(skipped.notes());
    let most = counts.iter().copied().max().unwrap_or(0);
    if most > 1 {
        let uneven = counts.iter().any(|&c| c != most);
        d.notes.push(Warning::reading(format!(
            "{} rank folder{} ({}) with up to {most} profiler windows each{}; read {}",
            ranks.len(),
            if ranks.len() == 1 { "" } else { "s" },
            folder_range(&ranks),
            if uneven { " (ranks differ in how many)" } else { "" },
            match windows {
                Windows::Newest => "the newest window of each rank (--window K for another, --windows all for every one)".to_owned(),
                Windows::Nth(k) => format!("window {k} of each rank, in time order"),
                Windows::All => "every window of each rank, joined in time order (per-step metrics leave out the first and last step of the joined run only)".to_owned(),
            }
        )));
    }
    Ok(found)
}

fn folder_range(ranks: &[(u32, PathBuf)]) -> String {
    let name = |p: &Path| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    match (ranks.first(), ranks.last()) {
        (Some(a), Some(b)) if ranks.len() > 1 => format!("{} .. {}", name(&a.1), name(&b.1)),
        (Some(a), _) => name(&a.1),
        _ => String::new(),
    }
}

/// `--window` / `--windows` as given on the command line.
/// `windows` as [`parse_windows`] reads it back.
pub fn windows_text(windows: Windows) -> String {
    match windows {
        Windows::Newest => "newest".into(),
        Windows::All => "all".into(),
        Windows::Nth(k) => k.to_string(),
    }
}

pub fn parse_windows(s: &str) -> std::result::Result<Windows, String> {
    match s.trim().to_ascii_lowercase().as_str() {
        "all" => Ok(Windows::All),
        "newest" | "last" => Ok(Windows::Newest),
        n => match n.parse::<u32>() {
            Ok(k) if k > 0 => Ok(Windows::Nth(k)),
            _ => Err(format!(
                "'{s}' is not a window: a number from 1 (the oldest), `newest` or `all`"
            )),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rank_folders() {
        let r = |n: &str| rank_of_dir(Path::new(n));
        assert_eq!(r("rank_0"), Some(0));
        assert_eq!(r("rank-12"), Some(12));
        assert_eq!(r("rank3"), Some(3));
        assert_eq!(r("Worker_7"), Some(7));
        assert_eq!(r("rank_0_old"), None);
        assert_eq!(r("ranks"), None);
    }

    #[test]
    fn window_arguments() {
        assert_eq!(parse_windows("all"), Ok(Windows::All));
        assert_eq!(parse_windows("3"), Ok(Windows::Nth(3)));
        assert_eq!(parse_windows("newest"), Ok(Windows::Newest));
        assert!(parse_windows("0").is_err());
        assert!(parse_windows("-1").is_err());
    }
}
