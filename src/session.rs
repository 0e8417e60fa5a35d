//! How a run is held: the one place that decides, from what a view needs,
//! whether a run is read whole (every op in memory), lean (each rank's
//! figures and collectives; its other ops dropped as it is read, its
//! collectives spilled past `load::HELD_COMM_OPS`), or lean with its ops in
//! pages (a summary's tables, read a window or a rank at a time). The
//! command line, the terminal UI, the exports and the Python package ask
//! here; none decides for itself.

use std::path::Path;

use anyhow::{anyhow, Context, Result};

mod clock_check;
pub mod load;
mod runs;

use crate::derive::{Made, Matched, RankStats};
use crate::metrics::Ctx;
use crate::model::warning::Kind;
use crate::model::Trace;
use load::{Found, LoadOptions, LoadReport, Pages, Progress};

/// What a view needs of a run, from which the session decides how to hold
/// it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Figures: the metrics, compare. Held lean.
    Figures,
    /// Every op in memory: the collectives table, the clock checks. Held
    /// whole.
    EveryOp,
    /// Every op once, a rank at a time (exports, the Python package's
    /// tables): a summary held lean with its ops in pages (whole where it
    /// does not store them); any other run whole.
    Listing,
    /// The screen: a summary of more than `load::PAGED_OPS` ops (or any,
    /// under `--pages always`) held lean, its lanes drawn from stored bins
    /// and its ops read a window at a time; any other run whole.
    Screen,
}

/// A run as the session holds it.
pub struct Run {
    pub trace: Trace,
    pub report: LoadReport,
    /// The ranks' figures, indexed like `trace.ranks`, when held lean.
    pub stats: Option<Vec<RankStats>>,
    /// Where each rank's ops are read from, when held in pages.
    pub pages: Option<crate::summary::pages::Pages>,
    /// What the load's clock check matched across the ranks, for the
    /// metrics' context (see `derive::Made`): the trace is not changed
    /// after loading.
    pub(crate) matched: Option<Matched>,
    /// What the load's clock check measured, before the shift: a summary
    /// keeps it (see `clock_check`).
    pub(crate) clock: Option<clock_check::ClockCheck>,
}

/// Keeps in the summary `found` reads what `run`'s clock check measured
/// (see `clock_check`); whether it was kept.
pub(crate) fn keep_clock_check(path: &Path, found: &Found, opts: &LoadOptions, run: &Run) -> bool {
    let key = load::clock_key(path, found, opts);
    (run.clock.as_ref().zip(key)).is_some_and(|(c, (sum, key))| clock_check::keep(&sum, &key, c))
}

/// The inputs of the run at `path`: a summary's when one stands for it
/// (see `load::inputs`).
pub(crate) fn find(path: &Path, opts: &LoadOptions) -> Result<Found> {
    load::inputs(path, opts).with_context(|| cannot(path))
}

/// The run at `path` held as `need` asks (see [`open_found`]).
pub fn open(path: &Path, opts: &LoadOptions, need: Need, progress: &Progress) -> Result<Run> {
    open_found(path, &find(path, opts)?, opts, need, progress)
}

/// The run whose inputs are `found` held as `need` asks; an error naming
/// why when nothing was loaded.
pub(crate) fn open_found(
    path: &Path,
    found: &Found,
    opts: &LoadOptions,
    need: Need,
    progress: &Progress,
) -> Result<Run> {
    let run = hold(path, found, opts, need, progress)?;
    if run.trace.is_empty() {
        // The warnings say why nothing was loaded: they belong to the error.
        let why = match run.report.warnings.as_slice() {
            [] => String::new(),
            w => format!(": {}", crate::model::warning::joined(w, "; ")),
        };
        return Err(anyhow!("{}: no ranks loaded{why}", path.display()));
    }
    Ok(run)
}

/// What `--inputs` lists: every input found and whether it was read, with
/// the load's warnings, however little was loaded.
pub fn inputs(path: &Path, opts: &LoadOptions, progress: &Progress) -> Result<LoadReport> {
    let found = find(path, opts)?;
    Ok(whole(path, &found, opts, progress)?.report)
}

fn hold(
    path: &Path,
    found: &Found,
    opts: &LoadOptions,
    need: Need,
    progress: &Progress,
) -> Result<Run> {
    let summary = found.summary.is_some();
    match need {
        Need::Figures => Ok(lean(path, found, opts, progress, false)?.0),
        Need::EveryOp => whole(path, found, opts, progress),
        Need::Listing if summary => {
            let (run, stored) = lean(path, found, opts, progress, false)?;
            match in_pages(run, stored) {
                Ok(run) => Ok(run),
                Err(_) => whole(path, found, opts, progress),
            }
        }
        Need::Listing => whole(path, found, opts, progress),
        Need::Screen => screen(path, found, opts, progress),
    }
}

/// [`Need::Screen`]: see there.
fn screen(path: &Path, found: &Found, opts: &LoadOptions, progress: &Progress) -> Result<Run> {
    if found.summary.is_none() || opts.pages == Pages::Never {
        if opts.pages == Pages::Always {
            return Err(anyhow!(
                "{}: --pages always needs a summary (ccl-bench summarize, or --cache DIR)",
                path.display()
            ));
        }
        return whole(path, found, opts, progress);
    }
    let (run, stored) = lean(path, found, opts, progress, true)?;
    let ops: usize = run.stats.iter().flatten().map(|s| s.ops).sum();
    if run.trace.is_empty() || !(opts.pages == Pages::Always || ops > load::PAGED_OPS) {
        return whole(path, found, opts, progress);
    }
    // Why pages may be missing lanes, said with the refusal.
    let unbinned = (run.report.first(Kind::NotRebinned))
        .map(|w| format!(" ({w})"))
        .unwrap_or_default();
    // The lanes are drawn from stored bins: a rank whose were of other
    // classes than the rules applied, and were not binned afresh, has none.
    let drawn = (stored.tables.iter()).all(|t| t.as_ref().is_some_and(|t| t.coverage.is_some()));
    let paged = match drawn {
        true => in_pages(run, stored),
        false => Err("the stored lanes are of other classes than the rules applied"),
    };
    match paged {
        Ok(run) => Ok(run),
        Err(why) if opts.pages == Pages::Always => Err(anyhow!(
            "{}: cannot open in pages: {why}{unbinned}",
            path.display()
        )),
        Err(_) => whole(path, found, opts, progress),
    }
}

/// A lean run with its ops in pages, or why its summary cannot give them.
fn in_pages(mut run: Run, stored: load::Stored) -> std::result::Result<Run, &'static str> {
    let stats = run.stats.as_deref().ok_or("not held lean")?;
    if stats.iter().any(|s| s.step_hulls.is_none()) {
        return Err("the summary stores no step hulls");
    }
    run.pages = Some(
        crate::summary::pages::Pages::of(&run.trace, stats, stored.tables, stored.scratch)
            .ok_or("the summary lists no ops and coverage tables for some rank")?,
    );
    Ok(run)
}

fn whole(path: &Path, found: &Found, opts: &LoadOptions, progress: &Progress) -> Result<Run> {
    let (trace, report, matched, clock) =
        load::load_found(path, found, opts, progress).with_context(|| cannot(path))?;
    Ok(Run {
        trace,
        report,
        stats: None,
        pages: None,
        matched: Some(matched),
        clock: Some(clock),
    })
}

/// Lean (see `load::Lean`), with where its ranks' ops lie in a summary's
/// tables; `drawn`: with the lanes a view draws from a summary's stored
/// bins (see `load::load_lean_drawn`).
fn lean(
    path: &Path,
    found: &Found,
    opts: &LoadOptions,
    progress: &Progress,
    drawn: bool,
) -> Result<(Run, load::Stored)> {
    let l = if drawn {
        load::load_lean_drawn(path, found, opts, progress)
    } else {
        load::load_lean(path, found, opts, progress)
    }
    .with_context(|| cannot(path))?;
    let run = Run {
        trace: l.trace,
        report: l.report,
        stats: Some(l.stats),
        pages: None,
        matched: Some(l.matched),
        clock: Some(l.clock),
    };
    Ok((run, l.stored))
}

fn cannot(path: &Path) -> String {
    format!("cannot load {}", path.display())
}

impl Run {
    pub fn warnings(&self) -> &[crate::model::Warning] {
        &self.report.warnings
    }

    /// The metrics' context over every rank, or `rank` alone, with the
    /// collectives the load matched (copied: matching them again costs
    /// several times more).
    pub fn ctx(&self, rank: Option<u32>) -> std::result::Result<Ctx<'_>, String> {
        let made = Made {
            stats: self.stats.clone(),
            matched: self.matched.clone(),
        };
        Ctx::with_made(&self.trace, rank, made)
    }

    /// [`Run::ctx`] taking the stats, not copying them, and the collectives
    /// the load matched.
    pub(crate) fn into_parts(self) -> (Trace, LoadReport, Made) {
        let made = Made {
            stats: self.stats,
            matched: self.matched,
        };
        (self.trace, self.report, made)
    }
}
