//! Loading a run: discover its inputs, read each with its format's reader
//! (ranks in parallel), resolve ranks across files, then apply class rules
//! and clock alignment.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use rayon::prelude::*;

use super::clock_check::ClockCheck;
use crate::derive::{Matched, RankStats};
use crate::discover::{Discovery, Input};
use crate::error::{Error, Result};
use crate::formats::{Format, PerRank, Ranked, Role, FORMATS};
use crate::model::classify::UserRules;
use crate::model::warning::{Kind, Warning};
use crate::model::{RankTimeline, Trace};
use crate::read::{RankFile, Tables};
use crate::source::FileIn;

/// How to load a trace beyond reading its files.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// Which recorded iteration and profiling windows to read (default: the newest).
    pub pick: crate::discover::Pick,
    /// Put the ranks on one clock (see `model::collectives`).
    pub align: bool,
    /// Kernel class rules to apply first; default: `ccl-bench-classes.toml`
    /// beside the trace, when there is one.
    pub classes: Option<PathBuf>,
    /// Per-step averages over every step, warm-up and profiler stop included.
    pub all_steps: bool,
    /// The workload card to use instead of one found beside the traces.
    pub card: Option<PathBuf>,
    /// The input formats known (tests add toy ones).
    pub formats: &'static [Format],
    /// Keep the CPU ranges of launching threads (the UI's CPU lanes); the
    /// metrics do not need them.
    pub cpu_ranges: bool,
    /// A folder for summaries: a trace's summary there is used when current,
    /// and written (then used) when missing or stale.
    pub cache: Option<PathBuf>,
    /// Whether the UI reads a summary's ops a window at a time.
    pub pages: Pages,
    /// Read the traces even where a current summary of them stands beside
    /// them or in the cache.
    pub no_summary: bool,
}

/// Whether the UI opens a summary lean and reads its ops a window at a
/// time (bounded memory) or reads every op.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Pages {
    /// In pages when a summary holds more than `PAGED_OPS` ops.
    #[default]
    Auto,
    Always,
    Never,
}

/// Ops past which `Pages::Auto` opens a summary in pages: read whole, a
/// run takes about 150 bytes an op (ops and lanes), so about 1.2 GB.
pub(crate) const PAGED_OPS: usize = 8 << 20;

/// Collectives a lean load holds in memory under `Pages::Auto`, over all
/// ranks (about 235 MB at 56 bytes an op): each further rank's are spilled
/// to a temporary file (see `model::slab`).
pub(crate) const HELD_COMM_OPS: usize = 4 << 20;

impl Pages {
    /// How many collectives a lean load holds before it spills them:
    /// `always` spills every rank's, `never` none.
    fn held_comm_ops(self) -> usize {
        match self {
            Self::Auto => HELD_COMM_OPS,
            Self::Always => 0,
            Self::Never => usize::MAX,
        }
    }
}

/// How the warning that collectives could not be spilled begins.
pub(crate) const NOT_SPILLED: &str = "collectives held in memory, not spilled to a temporary file";

impl LoadReport {
    /// One line per input found: what it is, its rank, whether it was read.
    pub fn input_lines(&self) -> Vec<String> {
        let read: std::collections::HashSet<&PathBuf> = self.files.iter().collect();
        self.inputs
            .iter()
            .map(|i| {
                let rank = i.rank.map_or(String::new(), |r| format!(" rank {r}"));
                // A summary's entry stands for the trace it was made of.
                let original = crate::summary::read::source_of(&i.path);
                let used = if read.contains(&i.path)
                    || original.as_ref().is_some_and(|o| read.contains(o))
                {
                    "read"
                } else {
                    "not read (see warnings)"
                };
                let of =
                    original.map_or(String::new(), |o| format!(" (summary of {})", o.display()));
                format!("{}{rank}: {}{of} — {used}", i.format.name, i.path.display())
            })
            .collect()
    }
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            pick: Default::default(),
            align: true,
            classes: None,
            all_steps: false,
            card: None,
            formats: FORMATS,
            cpu_ranges: false,
            cache: None,
            pages: Pages::Auto,
            no_summary: false,
        }
    }
}

/// The largest rules file read: 1 MiB.
const MAX_RULES_FILE: u64 = 1 << 20;

/// The rules file name looked for beside a trace.
pub(crate) const CLASSES_FILE: &str = "ccl-bench-classes.toml";

/// Reads the inputs `found` (by [`inputs`]), then applies user class rules
/// and clock alignment as `opts` asks.
pub(super) fn load_found(
    path: &Path,
    found: &Found,
    opts: &LoadOptions,
    progress: &Progress,
) -> Result<(Trace, LoadReport, Matched, ClockCheck)> {
    let (l, matched, clock) = load_with(path, found, opts, progress, Keep::Whole)?;
    Ok((l.trace, l.report, matched, clock))
}

/// A trace loaded for its metrics only: every rank's timeline keeps only its
/// collectives (see `RankTimeline::slim`), its other figures made into
/// `stats` as soon as it is read. Memory then grows with the collectives of
/// the run, not its ops; views that draw or list ops need [`load_found`].
pub(super) struct Lean {
    pub trace: Trace,
    pub report: LoadReport,
    /// Indexed like `trace.ranks`.
    pub stats: Vec<RankStats>,
    pub stored: Stored,
    /// What the clock check matched (see `derive::Made`).
    pub matched: Matched,
    /// What it measured, before the shift.
    pub clock: ClockCheck,
}

/// Where each rank's ops lie in a summary's tables, and the folder of lanes
/// binned afresh: what reading a lean run in pages needs. Held by the
/// session beside the trace; the timelines point at no file.
#[derive(Default)]
pub(crate) struct Stored {
    /// Indexed like the trace's ranks; `None` for a rank not read from a
    /// summary listing its ops and lanes.
    pub tables: Vec<Option<Tables>>,
    pub scratch: Option<Scratch>,
}

type Scratch = crate::summary::pages::Scratch;

/// What [`load`] read, and what [`load_with`] made of it (which also gives
/// what its clock check matched).
struct Loaded {
    trace: Trace,
    report: LoadReport,
    /// Indexed like `trace.ranks`, when the load is lean.
    stats: Option<Vec<RankStats>>,
    stored: Stored,
}

/// [`load_found`] for the metrics only: see [`Lean`].
pub(super) fn load_lean(
    path: &Path,
    found: &Found,
    opts: &LoadOptions,
    progress: &Progress,
) -> Result<Lean> {
    lean_with(path, found, opts, progress, Keep::Lean)
}

/// [`load_lean`] for a view that draws a summary's lanes from its stored
/// bins (the Timeline in pages): a rank whose ops class rules changed has
/// its lanes binned afresh, into a temporary folder, as the map step bins
/// them.
pub(super) fn load_lean_drawn(
    path: &Path,
    found: &Found,
    opts: &LoadOptions,
    progress: &Progress,
) -> Result<Lean> {
    lean_with(path, found, opts, progress, Keep::Drawn)
}

fn lean_with(
    path: &Path,
    found: &Found,
    opts: &LoadOptions,
    progress: &Progress,
    keep: Keep,
) -> Result<Lean> {
    let (l, matched, clock) = load_with(path, found, opts, progress, keep)?;
    Ok(Lean {
        clock,
        trace: l.trace,
        report: l.report,
        stats: l.stats.expect("a lean load makes every rank's stats"),
        stored: l.stored,
        matched,
    })
}

/// How the warning that lanes could not be binned afresh begins.
pub(crate) const NOT_REBINNED: &str = "lanes not binned afresh";

/// What a load keeps of each rank.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Keep {
    Whole,
    Lean,
    /// Lean, with lanes to draw (see [`load_lean_drawn`]).
    Drawn,
}

fn load_with(
    path: &Path,
    found: &Found,
    opts: &LoadOptions,
    progress: &Progress,
    keep: Keep,
) -> Result<(Loaded, Matched, ClockCheck)> {
    // Read first, reported after the traces: their errors come first.
    let rules = read_rules(path, found, opts);
    let prepare = Prepare {
        rules: rules.as_ref().ok().and_then(|r| r.as_ref()).map(|r| &r.1),
        all_steps: opts.all_steps,
        lean: keep != Keep::Whole,
        reclassified: AtomicUsize::new(0),
        rebin: (keep == Keep::Drawn).then(Default::default),
        spill: Spill {
            hold: opts.pages.held_comm_ops(),
            ..Default::default()
        },
    };
    // A lean rank keeps no CPU ranges: reading them would be for nothing.
    let cpu_ranges = opts.cpu_ranges && keep == Keep::Whole;
    let Loaded {
        mut trace,
        mut report,
        mut stats,
        mut stored,
    } = load(path, found, progress, cpu_ranges, &prepare, opts.pick.run)?;
    let (scratch, failed) = prepare.rebin.map_or((None, None), |r| {
        let failed = r.failed.into_inner().ok().flatten();
        (r.dir.into_inner().and_then(|d| d.ok()), failed)
    });
    stored.scratch = scratch;
    if let Some(why) = failed {
        report.warn(
            Kind::NotRebinned,
            format!("{NOT_REBINNED} under the class rules, so they are not read in pages: {why}"),
        );
    }
    if let Some(why) = prepare.spill.failed.into_inner().ok().flatten() {
        report.warn(Kind::NotSpilled, format!("{NOT_SPILLED}: {why}"));
    }
    if let Some(card) = &opts.card {
        trace.card = Some(crate::read::card::read(card)?);
    }
    let reclassified = prepare.reclassified.load(Ordering::Relaxed);
    if let Some((rp, rules)) = rules? {
        report.warn(
            Kind::Rules,
            format!(
                "{}: {} kernel class rule(s) applied first; {reclassified} op(s) reclassified",
                rp.display(),
                rules.rules.len(),
            ),
        );
        trace.rules = Some(rules);
    }
    let kept = clock_key(path, found, opts)
        .and_then(|(sum, key)| super::clock_check::kept(&sum, &key, &trace));
    let (found_by_clocks, matched, clock) =
        align_clocks(&mut trace, opts.align, stats.as_deref_mut(), kept);
    report.warnings.extend(found_by_clocks);
    let loaded = Loaded {
        trace,
        report,
        stats,
        stored,
    };
    Ok((loaded, matched, clock))
}

/// The class rules a load applies (see [`rules_path`]), parsed.
fn read_rules(
    path: &Path,
    found: &Found,
    opts: &LoadOptions,
) -> Result<Option<(PathBuf, UserRules)>> {
    let Some(rp) = rules_path(path, &found.traces, opts) else {
        return Ok(None);
    };
    // A pipe or device would block or never end; a rules file is small.
    let meta = std::fs::metadata(&rp).map_err(|source| Error::Io {
        path: rp.clone(),
        source,
    })?;
    if !meta.is_file() || meta.len() > MAX_RULES_FILE {
        return Err(Error::BadConfig {
            path: rp.clone(),
            why: format!(
                "not a rules file: {}",
                if meta.is_file() {
                    format!("{} bytes (at most {MAX_RULES_FILE})", meta.len())
                } else {
                    "not a regular file (a pipe, socket or device)".to_owned()
                }
            ),
        });
    }
    let text = std::fs::read_to_string(&rp).map_err(|source| Error::Io {
        path: rp.clone(),
        source,
    })?;
    let rules = UserRules::parse(&text, &rp).map_err(|why| Error::BadConfig {
        path: rp.clone(),
        why,
    })?;
    Ok(Some((rp, rules)))
}

/// A file's timeline, prepared, with its stats when the load is lean.
type Prepared = (Ranked, Option<RankStats>);

/// What is done to each rank's timeline as soon as it is read (in parallel):
/// the class rules and the step choice, then, for a lean load, its stats,
/// after which it keeps only its collectives.
struct Prepare<'a> {
    rules: Option<&'a UserRules>,
    all_steps: bool,
    lean: bool,
    reclassified: AtomicUsize,
    /// Lanes binned afresh (see [`load_lean_drawn`]); `None`: a load that
    /// draws no stored lanes.
    rebin: Option<Rebin>,
    spill: Spill,
}

/// Which lean ranks' collectives go to a temporary file: those read once
/// `hold` were held (counted in `held`), in whatever order the ranks are
/// read; why one could not be spilled, if one could not.
#[derive(Default)]
struct Spill {
    hold: usize,
    held: AtomicUsize,
    failed: std::sync::Mutex<Option<String>>,
}

/// Where lanes binned afresh go: a folder made on first use, its files
/// numbered, and why one could not be written, if one could not.
#[derive(Default)]
struct Rebin {
    dir: OnceLock<std::result::Result<Scratch, String>>,
    next: AtomicUsize,
    failed: std::sync::Mutex<Option<String>>,
}

impl Prepare<'_> {
    /// A lean load that changes nothing of what was read: a summary's
    /// stats, made so in the map step, stand for its ranks' ops.
    fn default_lean(&self) -> bool {
        self.lean && self.rules.is_none() && !self.all_steps
    }

    fn rank(&self, f: &mut RankFile) -> Option<RankStats> {
        if let Some(rules) = self.rules {
            let n = rules.apply_rank(&mut f.timeline);
            self.reclassified.fetch_add(n, Ordering::Relaxed);
            if n > 0 {
                self.rebin(f);
            }
        }
        let t = &mut f.timeline;
        t.all_steps = self.all_steps;
        self.lean.then(|| {
            let stats = RankStats::of(t);
            t.slim();
            stats
        })
    }

    /// The summary's lanes of `t` were binned from ops of other classes:
    /// binned afresh when the load draws them, else marked as not held.
    fn rebin(&self, f: &mut RankFile) {
        let Some(tables) = &mut f.tables else {
            return;
        };
        tables.coverage = None;
        let Some(rebin) = &self.rebin else {
            return;
        };
        let dir = rebin.dir.get_or_init(|| {
            tempfile::Builder::new()
                .prefix("ccl-bench-lanes")
                .tempdir()
                .map(std::sync::Arc::new)
                .map_err(|e| format!("a temporary folder: {e}"))
        });
        let n = rebin.next.fetch_add(1, Ordering::Relaxed);
        let made = dir.as_ref().map_err(Clone::clone).and_then(|scratch| {
            let name = format!("coverage-rank{}-{n}", f.timeline.rank);
            crate::summary::pages::rebin(&f.timeline, scratch.path(), &name)
        });
        match made {
            Ok(file) => tables.coverage = Some(file),
            Err(why) => {
                let mut failed = rebin.failed.lock().unwrap_or_else(|e| e.into_inner());
                failed.get_or_insert(why);
            }
        }
    }

    fn file(&self, mut f: Ranked) -> Prepared {
        let mut stats = self.rank(&mut f.1);
        self.keep(&mut f.1.timeline, stats.as_mut());
        (f, stats)
    }

    /// Spills a lean rank's collectives past the ones the load holds, and
    /// with them its exposed communication (up to an interval each, kept
    /// until the waits across ranks are known).
    fn keep(&self, t: &mut RankTimeline, stats: Option<&mut RankStats>) {
        if !t.comm_only {
            return;
        }
        let n = t.ops.len();
        let before = self.spill.held.fetch_add(n, Ordering::Relaxed);
        if before.saturating_add(n) <= self.spill.hold {
            return;
        }
        let to = &crate::spill::TEMP_FILES;
        let spilled =
            (t.ops.spill(to)).and_then(|()| stats.map_or(Ok(()), |s| s.exposed.spill(to)));
        if let Err(e) = spilled {
            let mut failed = self.spill.failed.lock().unwrap_or_else(|e| e.into_inner());
            failed.get_or_insert(e.to_string());
        }
    }
}

/// The rules file a load applies: `--classes`, else the one beside the
/// traces (a summary's rules are those beside its traces while they are
/// there, else the copy it carries).
pub(crate) fn rules_path(path: &Path, traces: &Path, opts: &LoadOptions) -> Option<PathBuf> {
    let beside = [traces, path].into_iter().find_map(|p| {
        let dir = if p.is_dir() { Some(p) } else { p.parent() };
        dir.map(|d| d.join(CLASSES_FILE)).filter(|f| f.is_file())
    });
    opts.classes.clone().or(beside)
}

/// Where the clock check of a load of the summary `found` reads is kept,
/// and its key (see `clock_check`): the summary's digest and the options
/// that choose the ops read. None without a summary, and where class rules
/// apply (a rules file is the user's to edit: the check is measured each
/// time).
pub(crate) fn clock_key(
    path: &Path,
    found: &Found,
    opts: &LoadOptions,
) -> Option<(PathBuf, String)> {
    let sum = found.summary.as_ref()?;
    if rules_path(path, &found.traces, opts).is_some() {
        return None;
    }
    let formats: Vec<&str> = opts.formats.iter().map(|f| f.name).collect();
    let options = format!("{:?} {} {:?}", opts.pick, opts.all_steps, formats);
    let key = super::clock_check::key(sum.digest, &options)?;
    Some((sum.path.clone(), key))
}

/// What a load reads: the inputs, where the traces are, and the summary
/// read in their place, if one is.
#[derive(Debug)]
pub(crate) struct Found {
    pub discovery: Discovery,
    pub traces: PathBuf,
    pub summary: Option<SummaryUsed>,
}

/// A summary read in place of the traces.
#[derive(Debug)]
pub(crate) struct SummaryUsed {
    pub path: PathBuf,
    /// Of its manifest and entries (see `summary::open::Opened`).
    pub digest: u64,
    /// The traces it stands for, where they are (or were).
    pub originals: Vec<PathBuf>,
    /// Its index of entries and gathered tables, when it has one.
    pub reduce: Option<std::sync::Arc<crate::summary::reduce::Reduce>>,
}

/// The run's inputs, and where its traces are: a summary's inputs when
/// `path` is one, or when a current one stands beside the traces
/// (`DIR.sum`) or in the cache (written there first when missing or stale);
/// else what discovery finds.
pub(super) fn inputs(path: &Path, opts: &LoadOptions) -> Result<Found> {
    use crate::summary;
    let open = |sum: &Path, named: Option<&Path>| {
        summary::open::discover(sum, opts.pick, opts.formats, named).map(|o| Found {
            traces: summary::open::traces(&o.manifest),
            discovery: o.discovery,
            summary: Some(SummaryUsed {
                path: sum.to_owned(),
                digest: o.digest,
                originals: (o.manifest.inputs.iter())
                    .map(|i| o.manifest.root.join(&i.path))
                    .collect(),
                reduce: o.reduce,
            }),
        })
    };
    if summary::is_summary(path) {
        if opts.no_summary {
            return Err(Error::Unsupported {
                path: path.to_owned(),
                why: "is a summary, and --no-summary reads traces: name the traces' folder".into(),
            });
        }
        return open(path, None);
    }
    if opts.no_summary {
        return Ok(Found {
            discovery: crate::discover::discover_in(path, opts.pick, opts.formats)?,
            traces: path.to_owned(),
            summary: None,
        });
    }
    let mut notes = Vec::new();
    if let Some(sum) = summary::beside(path).filter(|s| summary::is_summary(s)) {
        match open(&sum, Some(path)) {
            Ok(mut found) => {
                found.discovery.notes.push(Warning::reading(format!(
                    "read the summary {} (its inputs are unchanged)",
                    sum.display()
                )));
                return Ok(found);
            }
            Err(e) => notes.push(Warning::reading(format!(
                "the summary beside the traces was not used: {e}"
            ))),
        }
    }
    if let Some(cache) = &opts.cache {
        let sum = summary::cached(cache, path)?;
        // The cache's own folder for this run: a link planted at its name
        // would have the summary written, and pruned, elsewhere.
        if std::fs::symlink_metadata(&sum).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(Error::Output {
                path: sum,
                why: "is a link, not a folder the cache made; remove it to cache this run".into(),
            });
        }
        let fresh = open(&sum, Some(path));
        let mut found = match fresh {
            Ok(found) => found,
            Err(_) => {
                let built = summary::summarize(
                    path,
                    &summary::Options {
                        out: sum.clone(),
                        shard: summary::Shard::default(),
                        only: Vec::new(),
                        pick: opts.pick,
                        formats: opts.formats,
                    },
                )?;
                notes.push(Warning::reading(format!(
                    "summarized {} input(s) into the cache, {}",
                    built.written,
                    sum.display()
                )));
                open(&sum, Some(path))?
            }
        };
        found.discovery.notes.extend(notes);
        return Ok(found);
    }
    let mut discovery = crate::discover::discover_in(path, opts.pick, opts.formats)?;
    discovery.notes.extend(notes);
    Ok(Found {
        discovery,
        traces: path.to_owned(),
        summary: None,
    })
}

/// Checks the ranks' clocks (on the raw times) and, when `align`, puts them on
/// the first rank's clock by shared collectives; returns what the check found.
pub(crate) fn check_and_align_clocks(trace: &mut Trace, align: bool) -> Vec<Warning> {
    align_clocks(trace, align, None, None).0
}

/// [`check_and_align_clocks`], moving the ranks' `stats` (indexed like
/// `trace.ranks`) with their timelines, from the measurements `kept` (a
/// summary's, checked against `trace`) where given; with the findings, the
/// collectives matched across the ranks and their groups (found at once),
/// which the shift leaves as they were, for the metrics' context, and the
/// measurements.
fn align_clocks(
    trace: &mut Trace,
    align: bool,
    stats: Option<&mut [RankStats]>,
    kept: Option<ClockCheck>,
) -> (Vec<Warning>, Matched, ClockCheck) {
    use crate::model::{clock, collectives};
    let matched = Matched::of(trace);
    let inst = &matched.instances;
    let disagreements = collectives::disagreements(trace, inst);
    let check = kept.unwrap_or_else(|| ClockCheck::of(trace, inst));
    let measured = &check.measured;
    let offsets = align.then(|| check.offsets.clone());
    let (offsets, doubt) = match offsets {
        Some(o) => {
            let (o, doubt) = collectives::trusted(trace, o);
            (Some(o), doubt)
        }
        None => (None, None),
    };
    let applied = offsets
        .as_ref()
        .filter(|o| o.iter().skip(1).any(|o| o.offset != crate::model::Ns::ZERO));
    let mut findings: Vec<Warning> = (disagreements.into_iter())
        .map(|w| Warning::new(Kind::Matching, w))
        .collect();
    findings.extend(
        clock::check(trace, measured, applied.map(|o| &o[..]))
            .into_iter()
            .map(|w| Warning::new(Kind::Clock, w)),
    );
    if let Some(d) = &doubt {
        findings.push(Warning::new(
            Kind::Clock,
            format!("{d}: cross-rank verdicts say unknown"),
        ));
    }
    trace.clock_doubt = doubt;
    if let Some(offsets) = offsets {
        for (s, o) in stats.into_iter().flatten().zip(&offsets) {
            s.shift(o.offset);
        }
        collectives::apply(trace, offsets);
    }
    (findings, matched, check)
}

pub use crate::progress::Progress;

/// What loading noticed that the user should know.
#[derive(Debug, Default)]
pub struct LoadReport {
    /// In the order said; a view acts on a warning by its kind (say it
    /// under the verdict it puts in doubt, keep it with results or not).
    pub warnings: Vec<Warning>,
    /// Everything discovery found, read or not (`--inputs`).
    pub inputs: Vec<crate::discover::Input>,
    pub files: Vec<PathBuf>,
    pub events: u64,
    pub bytes: u64,
}

impl LoadReport {
    /// Adds the warning `text` of kind `kind`.
    pub(crate) fn warn(&mut self, kind: Kind, text: impl Into<String>) {
        self.warnings.push(Warning::new(kind, text));
    }

    /// The warnings of kind `kind`, in the order said.
    pub fn of_kind(&self, kind: Kind) -> impl Iterator<Item = &str> {
        (self.warnings.iter())
            .filter(move |w| w.kind == kind)
            .map(|w| w.text.as_str())
    }

    /// The first warning of kind `kind`, if the load gave one.
    pub fn first(&self, kind: Kind) -> Option<&str> {
        self.of_kind(kind).next()
    }
}

/// Reads the inputs in `discovery` into one [`Trace`]: the per-rank
/// timelines of the formats of lowest precedence present, then the memory
/// snapshots, execution traces and workload card beside them.
fn load(
    source: &Path,
    found: &Found,
    progress: &Progress,
    cpu_ranges: bool,
    prepare: &Prepare,
    run: Option<u32>,
) -> Result<Loaded> {
    let (discovery, summary) = (&found.discovery, found.summary.is_some());
    let reduce = (found.summary.as_ref()).and_then(|s| s.reduce.as_deref());
    let mut report = LoadReport {
        warnings: discovery.notes.clone(),
        inputs: discovery.inputs.clone(),
        ..Default::default()
    };
    let precedence = |i: &Input| match i.format.role {
        Role::Timeline { precedence, .. } => Some(precedence),
        _ => None,
    };
    let first = discovery.inputs.iter().filter_map(precedence).min();
    let inputs: Vec<&Input> = discovery
        .inputs
        .iter()
        .filter(|i| first.is_some() && precedence(i) == first)
        .collect();
    report.warnings.extend(not_read_beside(discovery, &inputs));
    // Added, not stored: two runs opened together share one progress count.
    progress
        .files_total
        .fetch_add(inputs.len(), Ordering::Relaxed);
    // Profiling windows chosen per rank folder (see `discover::rank_dirs`):
    // several are joined into one timeline per rank, and prepared then.
    let mut windows: BTreeMap<Option<u32>, usize> = BTreeMap::new();
    for i in inputs.iter().filter(|i| i.window.is_some()) {
        *windows.entry(i.rank).or_default() += 1;
    }
    let several_windows = |i: &Input| i.window.is_some() && windows[&i.rank] > 1;
    let lean = summary && prepare.default_lean();
    if let Some(r) = reduce.filter(|_| lean) {
        r.gather(&progress.bytes)?;
    }
    let results: Vec<Result<Vec<Prepared>>> = inputs
        .par_iter()
        .map(|input| {
            let Role::Timeline { read, .. } = input.format.role else {
                unreachable!("only timeline inputs are selected")
            };
            let several = several_windows(input);
            let file = file_in(input, &progress.bytes, cpu_ranges);
            // A summary's entry gives, for a lean load with the default
            // preparation, the figures the map step made of the ops.
            // A rank as read, prepared (one window of several: once joined).
            let prepared = |f| if several { (f, None) } else { prepare.file(f) };
            let files: Vec<Prepared> = if lean && !several {
                (crate::summary::read::lean_timelines(&file, reduce)?.into_iter())
                    .map(|(mut f, stats)| match stats {
                        // Made in the map step; the timeline is already slim.
                        Some(mut stats) => {
                            prepare.keep(&mut f.1.timeline, Some(&mut stats));
                            (f, Some(stats))
                        }
                        None => prepared(f),
                    })
                    .collect()
            } else {
                // Each rank prepared as it is read: a file of many devices'
                // ops is not held whole.
                let mut files = Vec::new();
                read(&file, &mut |f| files.push(prepared(f)))?;
                files
            };
            progress.files_done.fetch_add(1, Ordering::Relaxed);
            Ok(files)
        })
        .collect();
    if let Some(r) = reduce {
        r.let_go();
    }
    let mut files: Vec<Prepared> = Vec::with_capacity(results.len());
    let mut next_device_rank = 0;
    let mut group: Vec<Ranked> = Vec::new();
    for (input, r) in inputs.iter().zip(results) {
        let several_windows = several_windows(input);
        let mut ranked = match r {
            Ok(ranked) => ranked,
            // One damaged window of many does not stop the rank.
            Err(e) if several_windows => {
                report.warn(Kind::NotRead, format!("window left out: {e}"));
                continue;
            }
            Err(e) => return Err(e),
        };
        if several_windows {
            if group.first().is_some_and(|g| g.0 != input.rank) {
                let joined = join_windows(std::mem::take(&mut group), &mut report);
                files.extend(joined.map(|f| prepare.file(f)));
            }
            group.extend(ranked.into_iter().map(|(f, _)| f));
            continue;
        }
        if let Role::Timeline {
            devices_per_host: true,
            ..
        } = input.format.role
        {
            for ((rank, _), _) in &mut ranked {
                *rank = rank.map(|r| r + next_device_rank);
            }
            next_device_rank = ranked
                .iter()
                .filter_map(|r| r.0 .0)
                .max()
                .map_or(next_device_rank, |m| m + 1);
        }
        files.extend(ranked);
    }
    files.extend(join_windows(group, &mut report).map(|f| prepare.file(f)));
    report.bytes = progress.bytes.load(Ordering::Relaxed);
    let signs = super::runs::Sign::of(files.iter().map(|((_, f), _)| &f.timeline));
    if let Some(run) = super::runs::choose(source, &signs, run, &mut report.warnings)? {
        files.retain(|((_, f), _)| run.contains(&f.timeline.source));
    }
    // A rank's table files travel beside its timeline, not in it.
    let files = files.into_iter().map(|((rank, mut f), stats)| {
        let tables = f.tables.take();
        ((rank, f), (stats, tables))
    });
    let (mut ranks, (stats, tables)): (Vec<RankTimeline>, (Vec<_>, Vec<_>)) =
        assign_ranks_with(files.collect(), &mut report)?
            .into_iter()
            .unzip();
    let stats = prepare.lean.then(|| {
        ranks
            .iter()
            .zip(stats)
            .map(|(t, s)| RankStats {
                rank: t.rank,
                ..s.expect("a lean load prepares every rank")
            })
            .collect()
    });
    let card = read_card(discovery, &mut report);
    let memory = read_per_rank(discovery, &ranks, &mut report, |role| match role {
        Role::Memory(how) => Some(*how),
        _ => None,
    })
    .into_iter()
    .map(|(rank, m)| crate::model::memory::MemoryTimeline { rank, ..m })
    .collect();
    let et: Vec<crate::model::exec_trace::EtRank> =
        read_per_rank(discovery, &ranks, &mut report, |role| match role {
            Role::ExecTrace(how) => Some(*how),
            _ => None,
        })
        .into_iter()
        .map(|(rank, e)| crate::model::exec_trace::EtRank { rank, ..e })
        .collect();
    link_execution_traces(&mut ranks, &et, &mut report);
    let flight = read_per_rank(discovery, &ranks, &mut report, |role| match role {
        Role::Flight(how) => Some(*how),
        _ => None,
    })
    .into_iter()
    .map(|(rank, d)| crate::model::flight::FrDump { rank, ..d })
    .collect();
    Ok(Loaded {
        trace: Trace {
            ranks,
            source: source.to_owned(),
            iteration: discovery.iteration,
            card,
            offsets: None,
            clock_doubt: None,
            rules: None,
            memory,
            et,
            flight,
        },
        report,
        stats,
        stored: Stored {
            tables,
            scratch: None,
        },
    })
}

/// Each rank's communication kernels without message sizes take them from
/// its execution trace's nodes, linked in order (see
/// `exec_trace::link_sizes`); a step that does not line up is said.
fn link_execution_traces(
    ranks: &mut [RankTimeline],
    et: &[crate::model::exec_trace::EtRank],
    report: &mut LoadReport,
) {
    for t in ranks.iter_mut() {
        let Some(e) = et.iter().find(|e| e.rank == t.rank) else {
            continue;
        };
        let linked = crate::model::exec_trace::link_sizes(t, e);
        if let Some((step, n)) = linked.unmatched.first() {
            report.warnings.push(Warning::ignored(format!(
                "rank {}: {} step(s) of its communication kernels do not line up with the {}                  communication nodes of its execution trace {} (step {step}: {n} kernels), so                  they take no sizes from it{}",
                t.rank,
                linked.unmatched.len(),
                e.colls.len(),
                e.source.display(),
                match linked.kernels {
                    0 => String::new(),
                    k => format!(" ({k} kernels of other steps did)"),
                }
            )));
        }
    }
}

/// One rank's profiling windows, in time order, as one file: the first
/// window's path and stated rank stand for the rest (all listed as read).
fn join_windows(group: Vec<Ranked>, report: &mut LoadReport) -> Option<Ranked> {
    let (rank, dist_rank) = group.first().map(|(r, f)| (*r, f.dist_rank))?;
    let mut events = 0;
    let mut warnings = Vec::new();
    let mut timelines = Vec::with_capacity(group.len());
    for (i, (_, f)) in group.into_iter().enumerate() {
        if i > 0 {
            report.files.push(f.timeline.source.clone());
        }
        events += f.events;
        warnings.extend(f.warnings);
        timelines.push(f.timeline);
    }
    let (timeline, joined) = crate::model::join::join(timelines)?;
    warnings.extend(joined);
    Some((
        rank,
        crate::read::RankFile {
            timeline,
            dist_rank,
            events,
            warnings,
            // A rank joined from several windows is held whole: no one
            // table holds its ops.
            tables: None,
        },
    ))
}

fn file_in<'a>(input: &'a Input, counter: &'a AtomicU64, cpu_ranges: bool) -> FileIn<'a> {
    FileIn {
        path: &input.path,
        rank: input.rank,
        counter,
        cpu_ranges,
    }
}

/// The timeline inputs left out because others of lower precedence are
/// read: one warning per format.
fn not_read_beside(discovery: &Discovery, read: &[&Input]) -> Vec<Warning> {
    let Some(chosen) = read.first() else {
        return Vec::new();
    };
    let read: std::collections::HashSet<&Path> = read.iter().map(|r| r.path.as_path()).collect();
    let mut left: Vec<(Format, usize)> = Vec::new();
    for i in discovery.inputs.iter().filter(|i| i.format.is_timeline()) {
        if read.contains(i.path.as_path()) {
            continue;
        }
        match left.iter_mut().find(|(f, _)| *f == i.format) {
            Some((_, n)) => *n += 1,
            None => left.push((i.format, 1)),
        }
    }
    left.into_iter()
        .map(|(f, n)| {
            Warning::not_read(format!(
                "{n} {}(s) beside the {}s were not read (exports of one run in two formats are the same ranks twice; point --trace at one to read it)",
                f.name, chosen.format.name
            ))
        })
        .collect()
}

/// Reads every input whose role `pick` accepts, in parallel, and places each
/// on a rank: the one its file name gives, else the only rank when there is
/// one file and at most one rank. These files only annotate the run, so none
/// can stop it: one that cannot be read, has no rank in its name or repeats
/// a rank is left out with a warning naming it.
fn read_per_rank<T: Send>(
    discovery: &Discovery,
    ranks: &[crate::model::RankTimeline],
    report: &mut LoadReport,
    pick: impl Fn(&Role) -> Option<PerRank<T>>,
) -> Vec<(u32, T)> {
    let inputs: Vec<(&Input, PerRank<T>)> = discovery
        .inputs
        .iter()
        .filter_map(|i| Some((i, pick(&i.format.role)?)))
        .collect();
    let counter = AtomicU64::new(0);
    let results: Vec<_> = inputs
        .par_iter()
        .map(|(i, how)| (how.read)(&file_in(i, &counter, false)))
        .collect();
    report.bytes += counter.load(Ordering::Relaxed);
    let only = (ranks.len() <= 1 && inputs.len() == 1).then(|| ranks.first().map_or(0, |r| r.rank));
    let mut out: Vec<(u32, &Path, T)> = Vec::new();
    for ((input, how), r) in inputs.iter().zip(results) {
        let name = input.format.name;
        let (item, warnings) = match r {
            Ok(read) => read,
            Err(e) => {
                report
                    .warnings
                    .push(Warning::not_read(format!("{e}; the {name} was left out")));
                continue;
            }
        };
        report.warnings.extend(warnings);
        let Some(rank) = (how.rank_of)(&input.path).or(only) else {
            report.warnings.push(Warning::not_read(format!(
                "{}: {name} without a rank in its name ({}); not read",
                input.path.display(),
                how.naming
            )));
            continue;
        };
        if let Some((_, first, _)) = out.iter().find(|o| o.0 == rank) {
            report.warnings.push(Warning::not_read(format!(
                "{}: a second {name} for rank {rank} (the first is {}); not read",
                input.path.display(),
                first.display()
            )));
            continue;
        }
        report.files.push(input.path.clone());
        out.push((rank, &input.path, item));
    }
    out.sort_by_key(|o| o.0);
    out.into_iter()
        .map(|(rank, _, item)| (rank, item))
        .collect()
}

/// The first workload card that parses. A broken card is a warning, not an
/// error: the traces are still worth reading, and card-based metrics say why they
/// do not apply.
fn read_card(discovery: &Discovery, report: &mut LoadReport) -> Option<crate::model::WorkloadCard> {
    let mut found = None;
    for input in &discovery.inputs {
        let Role::Card { read } = input.format.role else {
            continue;
        };
        match read(&input.path) {
            Ok(c) if found.is_none() => {
                report.files.push(input.path.clone());
                found = Some(c);
            }
            Ok(_) => report.warnings.push(Warning::not_read(format!(
                "{}: a second workload card; using the first",
                input.path.display()
            ))),
            Err(e) => report
                .warnings
                .push(Warning::not_read(format!("{e}; ignored"))),
        }
    }
    found
}

/// How many missing ranks a warning names before it counts the rest.
const SHOWN: usize = 16;

/// Each file's rank comes from `distributedInfo.rank`, else from its file name,
/// else (with a warning) the next free number. Two files claiming one rank, or
/// disagreeing world sizes, mean several runs were mixed: that is an error, never
/// a silent merge.
pub(crate) fn assign_ranks(
    files: Vec<Ranked>,
    report: &mut LoadReport,
) -> Result<Vec<crate::model::RankTimeline>> {
    let files = files.into_iter().map(|f| (f, ())).collect();
    let ranks = assign_ranks_with(files, report)?;
    Ok(ranks.into_iter().map(|(t, ())| t).collect())
}

/// [`assign_ranks`] of files that each carry `P` along.
fn assign_ranks_with<P>(
    files: Vec<(Ranked, P)>,
    report: &mut LoadReport,
) -> Result<Vec<(RankTimeline, P)>> {
    let mut by_rank = BTreeMap::new();
    let mut unranked = Vec::new();
    for ((name_rank, f), p) in files {
        report.events += f.events;
        report.warnings.extend(f.warnings);
        // A file of several devices (an XSpace, an nsys-jax archive) is one file.
        if report.files.last() != Some(&f.timeline.source) {
            report.files.push(f.timeline.source.clone());
        }
        match f.dist_rank.or(name_rank) {
            Some(rank) => {
                let mut t = f.timeline;
                t.rank = rank;
                if let Some((prev, _)) = by_rank.insert(rank, (t, p)) {
                    let second = by_rank[&rank].0.source.clone();
                    return Err(Error::MixedRuns {
                        rank,
                        first: prev.source,
                        second,
                    });
                }
            }
            None => unranked.push((f.timeline, p)),
        }
    }
    let several = by_rank.len() + unranked.len() > 1;
    // One line per file: a file of several devices takes several ranks.
    let mut given: Vec<(PathBuf, Vec<u32>)> = Vec::new();
    for (mut t, p) in unranked {
        let rank = (0..).find(|r| !by_rank.contains_key(r)).unwrap_or(0);
        match given.last_mut() {
            Some((source, ranks)) if *source == t.source => ranks.push(rank),
            _ => given.push((t.source.clone(), vec![rank])),
        }
        t.rank = rank;
        by_rank.insert(rank, (t, p));
    }
    if several {
        for (source, ranks) in given {
            let which = match ranks[..] {
                [one] => format!("rank {one}"),
                _ => format!("ranks {}", crate::human::ranks(&ranks)),
            };
            report.warn(
                Kind::Ranks,
                format!(
                    "{}: no rank in distributedInfo or file name; using {which}",
                    source.display()
                ),
            );
        }
    }
    let sizes: BTreeMap<u32, Vec<u32>> = by_rank.values().fold(BTreeMap::new(), |mut m, (t, _)| {
        if let Some(w) = t.world_size {
            m.entry(w).or_insert_with(Vec::new).push(t.rank);
        }
        m
    });
    if sizes.len() > 1 {
        let detail = sizes
            .iter()
            .map(|(w, ranks)| format!("world size {w} on ranks {ranks:?}"))
            .collect::<Vec<_>>()
            .join(", ");
        return Err(Error::MixedWorldSize { detail });
    }
    // A rank file lost to a crash or a bad copy skews every cross-rank metric.
    // A few ranks of many are a sample (say ranks 0-1 of 128), not a loss: then
    // only holes below the highest rank present are reported.
    if let Some(&world) = sizes.keys().next() {
        // Ranks at or past the world size are no rank of it (said below).
        let present = by_rank.range(..world).count() as u32;
        let top = if u64::from(present) * 2 >= u64::from(world) {
            world
        } else {
            by_rank.keys().max().map_or(0, |&r| r.saturating_add(1))
        };
        let limit = top.min(world);
        // Counted, not listed: a claimed world size of 4e9 is 4e9 missing ranks.
        let missing = limit - by_rank.range(..limit).count() as u32;
        if by_rank.len() > 1 && missing > 0 {
            let first: Vec<String> = (0..limit)
                .filter(|r| !by_rank.contains_key(r))
                .take(SHOWN)
                .map(|r| r.to_string())
                .collect();
            let rest = missing as usize - first.len();
            report.warn(Kind::Ranks, format!(
                "{present} of {world} ranks in the trace (world size {world}); missing: {}{}; cross-rank metrics use the ranks present",
                first.join(", "),
                if rest > 0 { format!(" and {rest} more") } else { String::new() }
            ));
        }
        let beyond: Vec<&RankTimeline> = by_rank.range(world..).map(|(_, (t, _))| t).collect();
        if let Some(t) = beyond.first() {
            report.warn(Kind::Ranks, format!(
                "{}: rank {} is not below the world size {world} its distributedInfo gives{}; the file is read as that rank",
                t.source.display(),
                t.rank,
                match beyond.len() - 1 {
                    0 => String::new(),
                    n => format!(" ({n} more files likewise)"),
                }
            ));
        }
    }
    Ok(by_rank.into_values().collect())
}

/// The NCCL Flight Recorder dumps at `path` (a folder, or one dump), read in
/// parallel; nothing else there is read, and no summary is used or written.
/// Dumps under two file-name prefixes are two jobs' (or two dumps of one):
/// the larger set is read and the other named in a warning. Also returns the
/// warnings.
pub fn flight_dumps(path: &Path) -> Result<(Vec<crate::model::flight::FrDump>, Vec<Warning>)> {
    let mut discovery = crate::discover::discover(path, crate::discover::Pick::default())?;
    discovery
        .inputs
        .retain(|i| matches!(i.format.role, Role::Flight(_)));
    let mut report = LoadReport {
        warnings: std::mem::take(&mut discovery.notes),
        ..Default::default()
    };
    if discovery.inputs.is_empty() {
        return Err(Error::NotATrace {
            path: path.to_owned(),
            why: "no NCCL Flight Recorder dumps here (run with TORCH_NCCL_TRACE_BUFFER_SIZE=2000 \
                  and TORCH_NCCL_DUMP_ON_TIMEOUT=1; each rank writes nccl_trace_rank_N)"
                .into(),
        });
    }
    let mut sets: BTreeMap<String, Vec<crate::discover::Input>> = BTreeMap::new();
    for i in discovery.inputs.drain(..) {
        let prefix = crate::read::flight_recorder::split_name(&i.path)
            .0
            .to_owned();
        sets.entry(prefix).or_default().push(i);
    }
    if sets.len() > 1 {
        let (keep, _) = sets
            .iter()
            .max_by_key(|(p, s)| (s.len(), std::cmp::Reverse(p.as_str())))
            .map(|(p, s)| (p.clone(), s.len()))
            .expect("two sets");
        let others: Vec<String> = sets
            .iter()
            .filter(|(p, _)| **p != keep)
            .map(|(p, s)| format!("{} ({})", p, crate::human::plural(s.len(), "file", "files")))
            .collect();
        report.warnings.push(Warning::not_read(format!(
            "dumps of more than one job here: read the {} named {keep}N; not read: {} (point at a folder holding one job's dumps)",
            sets[&keep].len(),
            others.join(", ")
        )));
        discovery.inputs = sets.remove(&keep).unwrap_or_default();
    } else {
        discovery.inputs = sets.into_values().next().unwrap_or_default();
    }
    let dumps = read_per_rank(&discovery, &[], &mut report, |role| match role {
        Role::Flight(how) => Some(*how),
        _ => None,
    })
    .into_iter()
    .map(|(rank, d)| crate::model::flight::FrDump { rank, ..d })
    .collect();
    Ok((dumps, report.warnings))
}
