//! Readers: turn the discovered input files into a [`Trace`]. Ranks are parsed in
//! parallel, each streamed from its (decompressing) reader.

pub mod card;
pub mod chrome;
pub mod exec_trace;
pub mod kineto;
pub mod nsys;
pub mod nsys_json;
pub mod snapshot;
pub mod split;
pub mod xla_json;
pub mod xplane;

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufReader, Chain, Cursor, Read};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use flate2::read::MultiGzDecoder;
use rayon::prelude::*;

use crate::discover::{Discovery, InputKind};
use crate::error::{Error, Result};
use crate::model::Trace;

const BUF: usize = 256 * 1024;

/// A trace file's bytes, decompressed when needed. Readers take large reads
/// into buffers of their own, so a plain file is read straight into them (a
/// `BufReader` in between would copy every byte once more).
pub enum Source {
    Plain(Sniffed),
    // Boxed: the inflate state is large, and the enum is moved around.
    Gzip(Box<BufReader<MultiGzDecoder<BufReader<Sniffed>>>>),
}

/// The bytes read to sniff the format, then the rest of the file.
type Sniffed = Chain<Cursor<Vec<u8>>, File>;

impl Read for Source {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Self::Plain(r) => r.read(buf),
            Self::Gzip(r) => r.read(buf),
        }
    }
}

/// Opens a file for reading, transparently decompressing gzip (recognised by its
/// magic bytes `1f 8b`, whatever the extension says).
pub fn open(path: &Path) -> Result<Source> {
    let io = |source| Error::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let mut magic = Vec::with_capacity(2);
    (&mut file).take(2).read_to_end(&mut magic).map_err(io)?;
    let gz = magic == [0x1f, 0x8b];
    let r = Cursor::new(magic).chain(file);
    Ok(if gz {
        Source::Gzip(Box::new(BufReader::with_capacity(
            BUF,
            MultiGzDecoder::new(BufReader::with_capacity(BUF, r)),
        )))
    } else {
        Source::Plain(r)
    })
}

/// Counts read bytes so progress can be shown while files load. The shared
/// counter is updated once per MiB, not per read (reads can be small).
struct Counting<'a, R> {
    inner: R,
    bytes: &'a AtomicU64,
    pending: u64,
}

impl<'a, R> Counting<'a, R> {
    fn new(inner: R, bytes: &'a AtomicU64) -> Self {
        Self {
            inner,
            bytes,
            pending: 0,
        }
    }
}

impl<R: Read> Read for Counting<'_, R> {
    #[inline]
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.pending += n as u64;
        if self.pending >= 1 << 20 || n == 0 {
            self.bytes
                .fetch_add(std::mem::take(&mut self.pending), Ordering::Relaxed);
        }
        Ok(n)
    }
}

impl<R> Drop for Counting<'_, R> {
    fn drop(&mut self) {
        self.bytes.fetch_add(self.pending, Ordering::Relaxed);
    }
}

/// How to load a trace beyond reading its files.
#[derive(Debug, Clone)]
pub struct LoadOptions {
    /// `profile_traces/iteration_K` to read (default: the newest).
    pub iteration: Option<u32>,
    /// Put the ranks on one clock (see `model::collectives`).
    pub align: bool,
    /// Kernel class rules to apply first; default: `ccl-bench-classes.toml`
    /// beside the trace, when there is one.
    pub classes: Option<PathBuf>,
    /// Per-step averages over every step, warm-up and profiler stop included.
    pub all_steps: bool,
}

impl LoadReport {
    /// One line per input found: what it is, its rank, whether it was read.
    pub fn input_lines(&self) -> Vec<String> {
        self.inputs
            .iter()
            .map(|i| {
                let rank = i.rank.map_or(String::new(), |r| format!(" rank {r}"));
                let used = if self.files.contains(&i.path) {
                    "read"
                } else {
                    "not read (see warnings)"
                };
                format!("{}{rank}: {} — {used}", i.kind.describe(), i.path.display())
            })
            .collect()
    }
}

impl Default for LoadOptions {
    fn default() -> Self {
        Self {
            iteration: None,
            align: true,
            classes: None,
            all_steps: false,
        }
    }
}

/// The rules file name looked for beside a trace.
pub const CLASSES_FILE: &str = "ccl-bench-classes.toml";

/// Discovers and reads a trace, then applies user class rules and clock
/// alignment as `opts` asks.
pub fn load_path(
    path: &Path,
    opts: &LoadOptions,
    progress: &Progress,
) -> Result<(Trace, LoadReport)> {
    let discovery = crate::discover::discover(path, opts.iteration)?;
    let (mut trace, mut report) = load(path, &discovery, progress)?;
    let beside = if path.is_dir() {
        Some(path.join(CLASSES_FILE))
    } else {
        path.parent().map(|d| d.join(CLASSES_FILE))
    };
    let rules_path = opts.classes.clone().or(beside.filter(|p| p.is_file()));
    if let Some(rp) = rules_path {
        let text = std::fs::read_to_string(&rp).map_err(|source| Error::Io {
            path: rp.clone(),
            source,
        })?;
        let rules = crate::model::classify::UserRules::parse(&text, &rp).map_err(|why| {
            Error::BadConfig {
                path: rp.clone(),
                why,
            }
        })?;
        let n = rules.apply(&mut trace);
        report.warnings.push(format!(
            "{}: {} kernel class rule(s) applied first; {n} op(s) reclassified",
            rp.display(),
            rules.rules.len()
        ));
        trace.rules = Some(rules);
    }
    for t in &mut trace.ranks {
        t.all_steps = opts.all_steps;
    }
    report
        .warnings
        .extend(check_and_align_clocks(&mut trace, opts.align));
    Ok((trace, report))
}

/// Checks the ranks' clocks (on the raw times) and, when `align`, puts them on
/// the first rank's clock by shared collectives; returns what the check found.
pub fn check_and_align_clocks(trace: &mut Trace, align: bool) -> Vec<String> {
    use crate::model::{clock, collectives};
    let inst = collectives::instances(trace);
    let samples = clock::samples(trace, &inst);
    let offsets = align.then(|| collectives::offsets_from(trace, &samples));
    let applied = offsets
        .as_ref()
        .filter(|o| o.iter().skip(1).any(|o| o.samples > 0));
    let findings = clock::check(trace, &samples, applied.map(|o| &o[..]));
    if let Some(offsets) = offsets {
        collectives::apply(trace, offsets);
    }
    findings
}

/// What a reader found in one file, before ranks are resolved across files.
#[derive(Debug)]
pub struct RankFile {
    pub timeline: crate::model::RankTimeline,
    /// The rank the file's content states (`distributedInfo.rank`), if any.
    pub dist_rank: Option<u32>,
    pub events: u64,
    pub warnings: Vec<String>,
}

/// A file's timeline with the rank its file name gives.
type Ranked = (Option<u32>, RankFile);

/// Index of the step whose range contains `t` (steps are sorted and do not overlap).
pub(crate) fn step_at(steps: &[crate::model::Step], t: crate::model::Ns) -> Option<u32> {
    let i = steps.partition_point(|s| s.start <= t);
    let s = steps.get(i.checked_sub(1)?)?;
    (t < s.end).then_some((i - 1) as u32)
}

/// Kernel-launch calls (start, CPU duration) counted and summed per step,
/// by the step during which each call started.
pub(crate) fn launches_by_step(
    steps: &[crate::model::Step],
    calls: &[(crate::model::Ns, crate::model::Ns)],
) -> Vec<(u64, crate::model::Ns)> {
    let mut out = vec![(0, 0); steps.len()];
    for &(start, dur) in calls {
        if let Some(i) = step_at(steps, start) {
            out[i as usize].0 += 1;
            out[i as usize].1 += dur;
        }
    }
    out
}

/// Load progress, readable from another thread while `load` runs.
#[derive(Debug, Default)]
pub struct Progress {
    pub files_total: AtomicUsize,
    pub files_done: AtomicUsize,
    /// Uncompressed bytes parsed so far.
    pub bytes: AtomicU64,
}

/// What loading noticed that the user should know.
#[derive(Debug, Default)]
pub struct LoadReport {
    pub warnings: Vec<String>,
    /// Everything discovery found, read or not (`--inputs`).
    pub inputs: Vec<crate::discover::Input>,
    pub files: Vec<PathBuf>,
    pub events: u64,
    pub bytes: u64,
}

/// Reads every PyTorch profiler trace in `discovery` into one [`Trace`].
pub fn load(
    source: &Path,
    discovery: &Discovery,
    progress: &Progress,
) -> Result<(Trace, LoadReport)> {
    let kineto: Vec<_> = discovery.of_kind(InputKind::Kineto).collect();
    let mut nsys: Vec<_> = discovery.of_kind(InputKind::NsysSqlite).collect();
    let nsys_json: Vec<_> = discovery.of_kind(InputKind::NsysJson).collect();
    let mut report = LoadReport {
        warnings: discovery.notes.clone(),
        inputs: discovery.inputs.clone(),
        ..Default::default()
    };
    // SQLite and JSON exports of one report side by side are the same GPUs
    // twice: read the SQLite ones.
    if nsys.is_empty() {
        nsys = nsys_json;
    } else if !nsys_json.is_empty() {
        report.warnings.push(format!(
            "{} Nsight Systems JSON export(s) beside the SQLite export(s) were not read (the same report in two formats; point --trace at one to read it)",
            nsys_json.len()
        ));
    }
    // Exports of one run in several formats would be the same ranks twice:
    // read the PyTorch profiler traces when there are any.
    let use_nsys = kineto.is_empty();
    if !use_nsys && !nsys.is_empty() {
        report.warnings.push(format!(
            "{} Nsight Systems export(s) beside the PyTorch profiler traces were not read (point --trace at one of them to read it)",
            nsys.len()
        ));
    }
    let xplanes: Vec<_> = discovery
        .inputs
        .iter()
        .filter(|i| matches!(i.kind, InputKind::XPlane | InputKind::XlaJson))
        .collect();
    let other_timelines = !kineto.is_empty() || !nsys.is_empty();
    if other_timelines && !xplanes.is_empty() {
        report.warnings.push(format!(
            "{} XLA profiler file(s) (.xplane.pb, XLA trace JSON) beside the other traces were not read (point --trace at one to read it)",
            xplanes.len()
        ));
    }
    let inputs: Vec<_> = if !kineto.is_empty() {
        kineto
    } else if !nsys.is_empty() {
        nsys
    } else {
        xplanes
    };
    // Added, not stored: two runs opened together share one progress count.
    progress
        .files_total
        .fetch_add(inputs.len(), Ordering::Relaxed);
    let results: Vec<Result<Vec<Ranked>>> = inputs
        .par_iter()
        .map(|input| {
            let files = match input.kind {
                InputKind::NsysSqlite => nsys::read(&input.path, input.rank)?,
                InputKind::XPlane | InputKind::XlaJson => {
                    let mut bytes = Vec::new();
                    Counting::new(open(&input.path)?, &progress.bytes)
                        .read_to_end(&mut bytes)
                        .map_err(|source| Error::Io {
                            path: input.path.clone(),
                            source,
                        })?;
                    if input.kind == InputKind::XPlane {
                        xplane::read(&bytes, &input.path)?
                    } else {
                        xla_json::read(&bytes, &input.path)?
                    }
                }
                InputKind::NsysJson => {
                    let reader = Counting::new(open(&input.path)?, &progress.bytes);
                    nsys_json::read(reader, &input.path, input.rank)?
                }
                _ => {
                    let reader = Counting::new(open(&input.path)?, &progress.bytes);
                    vec![(input.rank, kineto::read(reader, &input.path)?)]
                }
            };
            progress.files_done.fetch_add(1, Ordering::Relaxed);
            Ok(files)
        })
        .collect();
    let mut files = Vec::with_capacity(results.len());
    // Each host's XSpace numbers its devices from 0: hosts after the first
    // (in file-name order) continue the numbering.
    let mut next_device_rank = 0;
    for (input, r) in inputs.iter().zip(results) {
        let mut ranked = r?;
        if matches!(input.kind, InputKind::XPlane | InputKind::XlaJson) {
            for (rank, _) in &mut ranked {
                *rank = rank.map(|r| r + next_device_rank);
            }
            next_device_rank = ranked
                .iter()
                .filter_map(|r| r.0)
                .max()
                .map_or(next_device_rank, |m| m + 1);
        }
        files.extend(ranked);
    }
    report.bytes = progress.bytes.load(Ordering::Relaxed);
    let ranks = assign_ranks(files, &mut report)?;
    let card = read_card(discovery, &mut report);
    let memory = read_memory(discovery, &ranks, &mut report)?;
    let et = read_et(discovery, &ranks, &mut report)?;
    Ok((
        Trace {
            ranks,
            source: source.to_owned(),
            iteration: discovery.iteration,
            card,
            offsets: None,
            rules: None,
            memory,
            et,
        },
        report,
    ))
}

/// Reads every input of `kind` in parallel and places each on a rank: the one
/// `rank_of` finds in its file name, else the only rank when there is one file
/// and at most one rank. Two files on one rank are two runs mixed: an error.
/// Files without a rank are skipped with a warning that shows `naming`.
fn read_per_rank<T: Send>(
    discovery: &Discovery,
    kind: InputKind,
    ranks: &[crate::model::RankTimeline],
    report: &mut LoadReport,
    read: impl Fn(&Path) -> Result<(T, Vec<String>)> + Sync,
    rank_of: fn(&Path) -> Option<u32>,
    naming: &str,
) -> Result<Vec<(u32, T)>> {
    let inputs: Vec<_> = discovery.of_kind(kind).collect();
    let results: Vec<_> = inputs.par_iter().map(|i| read(&i.path)).collect();
    let only = (ranks.len() <= 1 && inputs.len() == 1).then(|| ranks.first().map_or(0, |r| r.rank));
    let mut out: Vec<(u32, &Path, T)> = Vec::new();
    for (input, r) in inputs.iter().zip(results) {
        let (item, warnings) = r?;
        report.warnings.extend(warnings);
        report.files.push(input.path.clone());
        let Some(rank) = rank_of(&input.path).or(only) else {
            report.warnings.push(format!(
                "{}: {} without a rank in its name ({naming}); not read",
                input.path.display(),
                kind.describe()
            ));
            continue;
        };
        if let Some((_, first, _)) = out.iter().find(|o| o.0 == rank) {
            return Err(Error::MixedRuns {
                rank,
                first: first.to_path_buf(),
                second: input.path.clone(),
            });
        }
        out.push((rank, &input.path, item));
    }
    out.sort_by_key(|o| o.0);
    Ok(out
        .into_iter()
        .map(|(rank, _, item)| (rank, item))
        .collect())
}

/// Every CUDA memory snapshot, each on its rank (`rank3_memory_snapshot.pickle`).
fn read_memory(
    discovery: &Discovery,
    ranks: &[crate::model::RankTimeline],
    report: &mut LoadReport,
) -> Result<Vec<crate::model::memory::MemoryTimeline>> {
    let found = read_per_rank(
        discovery,
        InputKind::MemorySnapshot,
        ranks,
        report,
        |path| snapshot::read(open(path)?, path),
        crate::discover::rank_from_name,
        "rank{N}_memory_snapshot.pickle",
    )?;
    Ok(found
        .into_iter()
        .map(|(rank, m)| crate::model::memory::MemoryTimeline { rank, ..m })
        .collect())
}

/// The rank in an execution trace's file name: `torch_et_3.json`,
/// `dlrm_eg_3.json`, `rank3_et.json`.
fn et_rank(path: &Path) -> Option<u32> {
    static TRAILING: std::sync::LazyLock<regex::Regex> = std::sync::LazyLock::new(|| {
        regex::Regex::new(r"[-_]([0-9]+)\.json(?:\.gz)?$").expect("valid regex")
    });
    crate::discover::rank_from_name(path).or_else(|| {
        let name = path.file_name()?.to_str()?;
        TRAILING.captures(name)?[1].parse().ok()
    })
}

/// Every execution trace, each on its rank.
fn read_et(
    discovery: &Discovery,
    ranks: &[crate::model::RankTimeline],
    report: &mut LoadReport,
) -> Result<Vec<crate::model::exec_trace::EtRank>> {
    let found = read_per_rank(
        discovery,
        InputKind::ExecutionTrace,
        ranks,
        report,
        |path| {
            let mut bytes = Vec::new();
            open(path)?
                .read_to_end(&mut bytes)
                .map_err(|source| Error::Io {
                    path: path.to_owned(),
                    source,
                })?;
            Ok((exec_trace::read(&bytes, path)?, Vec::new()))
        },
        et_rank,
        "torch_et_{N}.json",
    )?;
    Ok(found
        .into_iter()
        .map(|(rank, e)| crate::model::exec_trace::EtRank { rank, ..e })
        .collect())
}

/// The first workload card that parses. A broken card is a warning, not an
/// error: the traces are still worth reading, and card-based metrics say why they
/// do not apply.
fn read_card(discovery: &Discovery, report: &mut LoadReport) -> Option<crate::model::WorkloadCard> {
    let mut found = None;
    for input in discovery.of_kind(InputKind::WorkloadCard) {
        match card::read(&input.path) {
            Ok(c) if found.is_none() => {
                report.files.push(input.path.clone());
                found = Some(c);
            }
            Ok(_) => report.warnings.push(format!(
                "{}: a second workload card; using the first",
                input.path.display()
            )),
            Err(e) => report.warnings.push(format!("{e}; ignored")),
        }
    }
    found
}

/// Each file's rank comes from `distributedInfo.rank`, else from its file name,
/// else (with a warning) the next free number. Two files claiming one rank, or
/// disagreeing world sizes, mean several runs were mixed: that is an error, never
/// a silent merge.
pub(crate) fn assign_ranks(
    files: Vec<Ranked>,
    report: &mut LoadReport,
) -> Result<Vec<crate::model::RankTimeline>> {
    let mut by_rank = BTreeMap::new();
    let mut unranked = Vec::new();
    for (name_rank, f) in files {
        report.events += f.events;
        report.warnings.extend(f.warnings);
        report.files.push(f.timeline.source.clone());
        match f.dist_rank.or(name_rank) {
            Some(rank) => {
                let mut t = f.timeline;
                t.rank = rank;
                if let Some(prev) = by_rank.insert(rank, t) {
                    let second = by_rank[&rank].source.clone();
                    return Err(Error::MixedRuns {
                        rank,
                        first: prev.source,
                        second,
                    });
                }
            }
            None => unranked.push(f.timeline),
        }
    }
    let several = by_rank.len() + unranked.len() > 1;
    for mut t in unranked {
        let rank = (0..).find(|r| !by_rank.contains_key(r)).unwrap_or(0);
        if several {
            report.warnings.push(format!(
                "{}: no rank in distributedInfo or file name; using rank {rank}",
                t.source.display()
            ));
        }
        t.rank = rank;
        by_rank.insert(rank, t);
    }
    let sizes: BTreeMap<u32, Vec<u32>> = by_rank.values().fold(BTreeMap::new(), |mut m, t| {
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
        let present = by_rank.len() as u32;
        let top = if present * 2 >= world {
            world
        } else {
            by_rank.keys().max().map_or(0, |&r| r + 1)
        };
        let missing: Vec<String> = (0..top.min(world))
            .filter(|r| !by_rank.contains_key(r))
            .map(|r| r.to_string())
            .collect();
        if present > 1 && !missing.is_empty() {
            report.warnings.push(format!(
                "{} of {world} ranks in the trace (world size {world}); missing: {}; cross-rank metrics use the ranks present",
                by_rank.len(),
                abbreviate(&missing, 16)
            ));
        }
    }
    Ok(by_rank.into_values().collect())
}

/// The first `max` items joined, with a count of the rest.
fn abbreviate(items: &[String], max: usize) -> String {
    let mut s = items[..items.len().min(max)].join(", ");
    if items.len() > max {
        s.push_str(&format!(" and {} more", items.len() - max));
    }
    s
}
