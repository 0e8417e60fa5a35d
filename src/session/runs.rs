//! Unrelated runs in one folder: a trace folder that gathered the archives
//! of two jobs (4 PAX processes and a MaxText one) must not open as one run
//! of 5 ranks, whose "straggler" is the other job and whose waits are its
//! clock. The inputs are told apart after reading, by what each file says of
//! its run, and one run is read: the one `--run K` names, else the newest.

use crate::model::Warning;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use crate::error::{Error, Result};
use crate::model::timeline::SourceFormat;

/// Times past this (ns) are on the Unix epoch (2001 onwards): files of one
/// run on such clocks were profiled at about the same time. Smaller times
/// count from a zero the file does not state, and say nothing.
const EPOCH_NS: i64 = 1_000_000_000_000_000_000;

/// Files profiled further apart than this (and than their own length) are
/// not one run's: ranks' clocks disagree by ms, not minutes.
const APART_NS: i64 = 60_000_000_000;

/// What a file says of the run it belongs to.
#[derive(Debug, Default)]
pub(super) struct Sign {
    pub path: PathBuf,
    /// The world size its ranks state.
    pub world: Option<u32>,
    /// First start and last end in Unix time, where the file tells it.
    pub window: Option<(i64, i64)>,
    /// XLA programs its devices ran (`jit_train_step`); empty for others.
    pub programs: BTreeSet<String>,
    /// The programs whose runs are its devices' steps (see
    /// `model::program`): two jobs share helper programs (`jit_convert_…`,
    /// the autotuner's), not their training step.
    pub step_programs: BTreeSet<String>,
    /// Ranks it holds.
    pub ranks: usize,
}

impl Sign {
    /// The signs of `timelines`, one per file, in the order of first sight.
    pub fn of<'a>(timelines: impl Iterator<Item = &'a crate::model::RankTimeline>) -> Vec<Sign> {
        let mut out: Vec<Sign> = Vec::new();
        // By the path's bytes: ordered paths compare component by
        // component, 17 M instructions at 1,024 ranks.
        let mut at: std::collections::HashMap<&std::ffi::OsStr, usize> = Default::default();
        for t in timelines {
            let i = *at.entry(t.source.as_os_str()).or_insert_with(|| {
                out.push(Sign {
                    path: t.source.clone(),
                    ..Default::default()
                });
                out.len() - 1
            });
            let s = &mut out[i];
            s.ranks += 1;
            s.world = s.world.max(t.world_size);
            // On Unix time: the file's own zero added where it states one
            // (Kineto's base, an Nsight session's start), else times that
            // are Unix time already.
            let unix = t.window.and_then(|w| match t.epoch {
                Some(e) => Some((
                    w.start.get().checked_add(e.get())?,
                    w.end.get().checked_add(e.get())?,
                )),
                None => (w.start.get() >= EPOCH_NS).then_some((w.start.get(), w.end.get())),
            });
            if let Some((a, b)) = unix.filter(|&(a, _)| a >= EPOCH_NS) {
                s.window = Some(s.window.map_or((a, b), |(x, y)| (x.min(a), y.max(b))));
            }
            if t.format == SourceFormat::Xla {
                s.programs
                    .extend(t.annotations.iter().map(|a| t.name(a.name).to_owned()));
                // A step made from program runs starts with a run.
                let step_run = t.steps.first().and_then(|first| {
                    t.annotations
                        .iter()
                        .find(|a| a.on_gpu && a.start == first.start)
                });
                if let Some(a) = step_run {
                    s.step_programs.insert(t.name(a.name).to_owned());
                }
            }
        }
        out
    }

    /// Why `self` and `other` cannot be one run, if they cannot.
    fn apart(&self, other: &Sign) -> Option<Reason> {
        if let (Some(a), Some(b)) = (self.world, other.world) {
            if a != b {
                return Some(Reason::World);
            }
        }
        let disjoint = |a: &BTreeSet<String>, b: &BTreeSet<String>| {
            !a.is_empty() && !b.is_empty() && a.is_disjoint(b)
        };
        if disjoint(&self.programs, &other.programs)
            || disjoint(&self.step_programs, &other.step_programs)
        {
            return Some(Reason::Programs);
        }
        if let (Some((a0, a1)), Some((b0, b1))) = (self.window, other.window) {
            let gap = a0.max(b0).saturating_sub(a1.min(b1));
            let longer = a1.saturating_sub(a0).max(b1.saturating_sub(b0));
            if gap > APART_NS.max(longer) {
                return Some(Reason::Time);
            }
        }
        None
    }
}

/// What told two runs apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Reason {
    World,
    Programs,
    Time,
}

impl Reason {
    fn text(self) -> &'static str {
        match self {
            Reason::World => "different world sizes",
            Reason::Programs => "different XLA programs",
            Reason::Time => "profiled minutes or more apart",
        }
    }
}

/// The runs among `signs`: indices into it, each run's in input order, the
/// runs in the order of their first file's name. Files that could be one
/// run are joined (a file that says little joins whatever it could be part
/// of), so a folder of one run is never split.
fn split(signs: &[Sign]) -> (Vec<Vec<usize>>, BTreeSet<Reason>) {
    let n = signs.len();
    let mut parent: Vec<usize> = (0..n).collect();
    fn root(parent: &mut [usize], mut i: usize) -> usize {
        while parent[i] != i {
            parent[i] = parent[parent[i]];
            i = parent[i];
        }
        i
    }
    let mut reasons = BTreeSet::new();
    for i in 0..n {
        for j in i + 1..n {
            match signs[i].apart(&signs[j]) {
                Some(r) => {
                    reasons.insert(r);
                }
                None => {
                    let (a, b) = (root(&mut parent, i), root(&mut parent, j));
                    parent[a.max(b)] = a.min(b);
                }
            }
        }
    }
    let mut by_root: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    for i in 0..n {
        let r = root(&mut parent, i);
        by_root.entry(r).or_default().push(i);
    }
    let mut out: Vec<Vec<usize>> = by_root.into_values().collect();
    out.sort_by(|a, b| first_name(signs, a).cmp(first_name(signs, b)));
    if out.len() < 2 {
        reasons.clear();
    }
    (out, reasons)
}

fn first_name<'a>(signs: &'a [Sign], run: &[usize]) -> &'a Path {
    run.iter()
        .map(|&i| signs[i].path.as_path())
        .min()
        .unwrap_or(Path::new(""))
}

/// Whether any two of `signs` could be apart: a cheap look first, so that
/// a folder of thousands of ranks of one run costs no pairwise pass.
fn maybe_apart(signs: &[Sign]) -> bool {
    let worlds: BTreeSet<u32> = signs.iter().filter_map(|s| s.world).collect();
    if worlds.len() > 1 {
        return true;
    }
    let mut programs = signs.iter().map(|s| &s.programs).filter(|p| !p.is_empty());
    if let Some(first) = programs.next() {
        let mut common: BTreeSet<&String> = first.iter().collect();
        for p in programs {
            common.retain(|name| p.contains(*name));
        }
        if common.is_empty() {
            return true;
        }
    }
    let steps: BTreeSet<&String> = signs.iter().flat_map(|s| &s.step_programs).collect();
    if steps.len() > 1 {
        return true;
    }
    let mut windows: Vec<(i64, i64)> = signs.iter().filter_map(|s| s.window).collect();
    windows.sort_unstable();
    let mut end = i64::MIN;
    for (a, b) in windows {
        if end != i64::MIN && a.saturating_sub(end) > APART_NS {
            return true;
        }
        end = end.max(b);
    }
    false
}

/// The files of the run to read, by path: all of them when the inputs are
/// one run; else those of run `wanted` (1-based, runs in the order of their
/// first file's name) or of the newest run (the one whose files were
/// written last), with a warning naming the others.
pub(super) fn choose(
    dir: &Path,
    signs: &[Sign],
    wanted: Option<u32>,
    warnings: &mut Vec<Warning>,
) -> Result<Option<BTreeSet<PathBuf>>> {
    let (runs, reasons) = if maybe_apart(signs) {
        split(signs)
    } else {
        (Vec::new(), BTreeSet::new())
    };
    if runs.len() < 2 {
        return match wanted {
            None | Some(1) => Ok(None),
            Some(k) => Err(not_found(dir, k, &["1 (the only run)".to_owned()])),
        };
    }
    let described: Vec<String> = runs
        .iter()
        .enumerate()
        .map(|(k, run)| describe(k + 1, signs, run))
        .collect();
    let pick = match wanted {
        Some(k) if k >= 1 && (k as usize) <= runs.len() => k as usize - 1,
        Some(k) => return Err(not_found(dir, k, &described)),
        None => (0..runs.len())
            .max_by_key(|&k| runs[k].iter().map(|&i| written(&signs[i].path)).max())
            .unwrap_or(0),
    };
    let why: Vec<&str> = reasons.iter().map(|r| r.text()).collect();
    let others: Vec<&str> = (described.iter().enumerate())
        .filter(|&(k, _)| k != pick)
        .map(|(_, d)| d.as_str())
        .collect();
    warnings.push(Warning::reading(format!(
        "{}: {} unrelated runs in one folder ({}); reading {}{}; not read: {}; choose another with --run K",
        dir.display(),
        runs.len(),
        why.join(", "),
        described[pick],
        if wanted.is_some() { "" } else { ", the newest" },
        others.join("; "),
    )));
    Ok(Some(
        runs[pick].iter().map(|&i| signs[i].path.clone()).collect(),
    ))
}

/// `run 2: maxtext_fsdp4.zip (4 ranks)`, `run 1: 4 files, pax_0.zip … pax_3.zip (4 ranks)`.
fn describe(k: usize, signs: &[Sign], run: &[usize]) -> String {
    let mut names: Vec<String> = run
        .iter()
        .map(|&i| {
            let p = &signs[i].path;
            p.file_name().map_or_else(
                || p.display().to_string(),
                |n| n.to_string_lossy().into_owned(),
            )
        })
        .collect();
    names.sort();
    let ranks: usize = run.iter().map(|&i| signs[i].ranks).sum();
    let files = match &names[..] {
        [one] => one.clone(),
        [first, .., last] => format!("{} files, {first} … {last}", names.len()),
        [] => String::new(),
    };
    format!(
        "run {k}: {files} ({})",
        crate::human::plural(ranks, "rank", "ranks")
    )
}

/// When `path` was last written (0 where unknown).
fn written(path: &Path) -> std::time::SystemTime {
    std::fs::metadata(path)
        .and_then(|m| m.modified())
        .unwrap_or(std::time::UNIX_EPOCH)
}

fn not_found(dir: &Path, wanted: u32, available: &[String]) -> Error {
    Error::RunNotFound {
        dir: dir.to_owned(),
        wanted,
        available: available.join("; "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sign(path: &str, world: Option<u32>, window: Option<(i64, i64)>, programs: &[&str]) -> Sign {
        Sign {
            path: path.into(),
            world,
            window,
            programs: programs.iter().map(|s| s.to_string()).collect(),
            step_programs: BTreeSet::new(),
            ranks: 1,
        }
    }

    const T: i64 = 1_700_000_000_000_000_000;

    #[test]
    fn files_of_one_run_stay_together() {
        // Overlapping epoch windows, one world size, shared programs, and
        // files that say nothing: one run, no warning.
        let signs = [
            sign("r0.json", Some(2), Some((T, T + 5_000)), &[]),
            sign("r1.json", Some(2), Some((T + 100, T + 6_000)), &[]),
            sign("r2.sqlite", None, None, &[]),
        ];
        let mut w = Vec::new();
        assert_eq!(choose(Path::new("d"), &signs, None, &mut w).unwrap(), None);
        assert!(w.is_empty());
        assert_eq!(
            choose(Path::new("d"), &signs, Some(1), &mut w).unwrap(),
            None
        );
        let e = choose(Path::new("d"), &signs, Some(2), &mut w).unwrap_err();
        assert!(e.to_string().contains("1 (the only run)"), "{e}");
        // Nsight clocks count from each session: no window, never apart.
        let pax = [
            sign("pax_0.zip", None, None, &["pjit__wrapped_step_fn"]),
            sign(
                "pax_1.zip",
                None,
                None,
                &["pjit__wrapped_step_fn", "jit_init"],
            ),
        ];
        assert!(!maybe_apart(&pax));
    }

    /// Nsight sessions count from their start, Kineto from its base: with
    /// the zero the file states, two sessions an hour apart are two runs;
    /// a file that states none and whose times are no Unix time says
    /// nothing of when.
    #[test]
    fn windows_are_placed_by_the_files_own_zero() {
        use crate::model::{Interval, Ns, RankTimeline};
        let t = |src: &str, epoch: Option<i64>| RankTimeline {
            source: src.into(),
            window: Some(Interval::new(Ns(5), Ns(100))),
            epoch: epoch.map(Ns),
            ..RankTimeline::default()
        };
        let hour = 3_600_000_000_000;
        let ts = [
            t("a.sqlite", Some(T)),
            t("b.sqlite", Some(T + hour)),
            t("c.json", None),
        ];
        let signs = Sign::of(ts.iter());
        let w: Vec<Option<(i64, i64)>> = signs.iter().map(|s| s.window).collect();
        assert_eq!(
            w,
            [
                Some((T + 5, T + 100)),
                Some((T + hour + 5, T + hour + 100)),
                None
            ]
        );
        assert_eq!(signs[0].apart(&signs[1]), Some(Reason::Time));
        assert_eq!(signs[0].apart(&signs[2]), None);
    }

    #[test]
    fn unrelated_runs_are_told_apart_and_named() {
        let signs = [
            sign(
                "pax_fsdp_process0.zip",
                None,
                None,
                &["pjit__wrapped_step_fn"],
            ),
            sign(
                "pax_fsdp_process1.zip",
                None,
                None,
                &["pjit__wrapped_step_fn"],
            ),
            Sign {
                ranks: 4,
                ..sign("maxtext_fsdp4.zip", None, None, &["jit_train_step"])
            },
        ];
        assert!(maybe_apart(&signs));
        let (runs, reasons) = split(&signs);
        assert_eq!(
            runs,
            [vec![2], vec![0, 1]],
            "in the order of their first name"
        );
        assert_eq!(reasons.into_iter().collect::<Vec<_>>(), [Reason::Programs]);
        let mut w = Vec::new();
        let files = choose(Path::new("d"), &signs, Some(2), &mut w)
            .unwrap()
            .unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(w[0].kind, crate::model::warning::Kind::Reading);
        assert_eq!(
            w[0].text,
            "d: 2 unrelated runs in one folder (different XLA programs); reading run 2: 2 files, \
             pax_fsdp_process0.zip … pax_fsdp_process1.zip (2 ranks); not read: run 1: \
             maxtext_fsdp4.zip (4 ranks); choose another with --run K"
        );
        let e = choose(Path::new("d"), &signs, Some(3), &mut w).unwrap_err();
        assert!(e.to_string().contains("run 3 not found"), "{e}");
        // As the real archives are: both jobs ran the same helper programs
        // (`jit_convert_element_type`, the autotuner's `gemm_fusion_dot.411`),
        // not the same step program. Two processes of one job, the same.
        let job = |path: &str, step: &str| Sign {
            step_programs: [step.to_owned()].into(),
            ..sign(
                path,
                None,
                None,
                &[step, "jit_convert_element_type", "gemm_fusion_dot.411"],
            )
        };
        let signs = [
            job("pax_0.zip", "pjit__wrapped_step_fn"),
            job("pax_1.zip", "pjit__wrapped_step_fn"),
            job("maxtext.zip", "jit_train_step"),
        ];
        assert!(maybe_apart(&signs));
        let (runs, reasons) = split(&signs);
        assert_eq!(runs, [vec![2], vec![0, 1]]);
        assert_eq!(reasons.into_iter().collect::<Vec<_>>(), [Reason::Programs]);
        assert!(!maybe_apart(&signs[..2]));
        // World sizes, and epoch windows an hour apart, part runs too.
        let hour = 3_600_000_000_000;
        let signs = [
            sign("a0.json", Some(8), Some((T, T + 10)), &[]),
            sign("b0.json", Some(8), Some((T + hour, T + hour + 10)), &[]),
            sign("c0.json", Some(16), Some((T, T + 10)), &[]),
        ];
        let (runs, reasons) = split(&signs);
        assert_eq!(runs.len(), 3);
        assert_eq!(
            reasons.into_iter().collect::<Vec<_>>(),
            [Reason::World, Reason::Time]
        );
        // A minute's skew within a long window is not apart.
        let signs = [
            sign("a0.json", None, Some((T, T + 10 * hour)), &[]),
            sign(
                "a1.json",
                None,
                Some((T + 10 * hour + 90_000_000_000, T + 11 * hour)),
                &[],
            ),
        ];
        assert_eq!(split(&signs).0.len(), 1);
    }
}
