//! `ccl-bench summarize`: the map step. Reads this shard's inputs with
//! their formats' readers and writes what each produced as Parquet tables
//! and an entry; inputs whose fingerprint is unchanged are skipped.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use rayon::prelude::*;

use super::manifest::{
    self, Device, Entry, Fingerprint, Group, InputRec, Manifest, Part, ENTRIES, MANIFEST, VERSION,
};
use super::placed::{make_parent, place, write_parquet, written, Codec};
use super::shard::Shard;
use crate::discover::{Discovery, Input, Pick};
use crate::error::{Error, Result};
use crate::formats::{Format, Role};
use crate::model::RankTimeline;
use crate::source::FileIn;

/// What to summarize and where.
#[derive(Debug, Clone)]
pub struct Options {
    pub out: PathBuf,
    pub shard: Shard,
    /// Only these input files (of the run at the trace path), instead of a
    /// shard: for engines that map over files.
    pub only: Vec<PathBuf>,
    pub pick: Pick,
    pub formats: &'static [Format],
}

/// What one `summarize` did.
#[derive(Debug, Default)]
pub struct Report {
    /// Inputs of the run that a load reads, and this shard's share of them.
    pub inputs: usize,
    pub mine: usize,
    /// Inputs read and written, and those whose summary was still current.
    pub written: usize,
    pub skipped: usize,
    /// Inputs whose reader failed (their error is recorded and replayed).
    pub failed: Vec<String>,
    /// Bytes of the inputs read, and of the files written for them.
    pub bytes_in: u64,
    pub bytes_out: u64,
}

/// Summarizes the run at `trace` into `opts.out`: this shard's inputs, plus
/// the manifest every shard writes alike.
pub fn summarize(trace: &Path, opts: &Options) -> Result<Report> {
    summarize_with(trace, opts, &crate::progress::Progress::default())
}

/// [`summarize`], counting this task's inputs in `progress` as they are done.
pub fn summarize_with(
    trace: &Path,
    opts: &Options,
    progress: &crate::progress::Progress,
) -> Result<Report> {
    let discovery = crate::discover::discover_in(trace, opts.pick, opts.formats)?;
    let out = &opts.out;
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    super::open::refuse_links(out)?;
    // Before any entry changes: an index is only ever beside its entries.
    super::reduce::forget(out);
    std::fs::create_dir_all(out.join(ENTRIES)).map_err(io(out))?;
    let root = if trace.is_dir() {
        trace.to_owned()
    } else {
        trace.parent().map(Path::to_owned).unwrap_or_default()
    };
    let abs_root = std::fs::canonicalize(if root.as_os_str().is_empty() {
        Path::new(".")
    } else {
        &root
    })
    .map_err(io(&root))?;
    let read = selected(&discovery);
    let mut inputs = Vec::new();
    for (i, input) in discovery.inputs.iter().enumerate() {
        let rel = relative(&root, &input.path)?;
        let entry = read.contains(&i).then(|| entry_name(input, &rel));
        inputs.push(InputRec {
            path: rel,
            format: input.format.name.to_owned(),
            rank: input.rank,
            window: input.window.map(|w| (w.index, w.of)),
            entry,
        });
    }
    let m = Manifest {
        ccl_bench_summary: VERSION,
        tool: format!("ccl-bench {}", env!("CARGO_PKG_VERSION")),
        root: abs_root,
        trace: relative(&root, trace).unwrap_or_default(),
        iteration: discovery.iteration,
        windows: crate::discover::rank_dirs::windows_text(opts.pick.windows),
        notes: discovery.notes.clone(),
        inputs,
    };
    // A summary of another layout or run is rebuilt from scratch.
    let old: Option<Manifest> = manifest::read_json(&out.join(MANIFEST)).ok();
    // Another run's summary is not overwritten: tasks given different
    // paths (a file each, say) would otherwise undo each other's work.
    if let Some(o) = old
        .as_ref()
        .filter(|o| (&o.root, &o.trace) != (&m.root, &m.trace))
    {
        return Err(Error::Output {
            path: out.to_owned(),
            why: format!(
                "holds the summary of {}, not of {}; choose another --out, or give every task the same trace path (and --shard or --only to split it)",
                super::open::traces(o).display(),
                super::open::traces(&m).display()
            ),
        });
    }
    let fresh_start = old.as_ref().is_some_and(|o| o.ccl_bench_summary != VERSION);
    manifest::write_json(&out.join(MANIFEST), &m)?;

    let sizes: Vec<u64> = read
        .iter()
        .map(|&i| std::fs::metadata(&discovery.inputs[i].path).map_or(0, |m| m.len()))
        .collect();
    let mine: Vec<usize> = if opts.only.is_empty() {
        opts.shard
            .pick(&sizes)
            .into_iter()
            .map(|k| read[k])
            .collect()
    } else {
        only(&discovery, &read, &opts.only)?
    };
    let mut report = Report {
        inputs: read.len(),
        mine: mine.len(),
        ..Default::default()
    };
    progress.files_total.store(mine.len(), Ordering::Relaxed);
    // Each input's size, as measured for sharding, for the progress line.
    let mut size_of = vec![0; discovery.inputs.len()];
    for (&i, &size) in read.iter().zip(&sizes) {
        size_of[i] = size;
    }
    let done: Vec<Result<Vec<Done>>> = packs(&discovery, &mine, &size_of)
        .par_iter()
        .map(|group| {
            let members: Vec<(&Input, &InputRec)> = (group.iter())
                .map(|&i| (&discovery.inputs[i], &m.inputs[i]))
                .collect();
            let done = match members[..] {
                [(input, rec)] if !matches!(input.format.role, Role::Timeline { .. }) => {
                    one(out, &m.root, input, rec, fresh_start).map(|d| vec![d])
                }
                _ => pack(out, &m.root, &members, fresh_start),
            };
            for &i in group {
                progress.bytes.fetch_add(size_of[i], Ordering::Relaxed);
                progress.files_done.fetch_add(1, Ordering::Relaxed);
            }
            done
        })
        .collect();
    for d in done.into_iter().map(|d| d.map(Vec::into_iter)) {
        for d in d? {
            match d {
                Done::Skipped => report.skipped += 1,
                Done::Written {
                    bytes_out,
                    error,
                    bytes_in,
                } => {
                    report.written += 1;
                    report.bytes_in += bytes_in;
                    report.bytes_out += bytes_out;
                    report.failed.extend(error);
                }
            }
        }
    }
    if opts.shard.index == 0 {
        prune(out, &m)?;
    }
    if opts.shard.count == 1 && opts.only.is_empty() {
        collect_packs(out, &m);
        super::reduce::write(out)?;
    }
    Ok(report)
}

/// The inputs a load reads (indices into `d.inputs`): the timelines of the
/// lowest precedence present, memory snapshots, execution traces, cards.
fn selected(d: &Discovery) -> Vec<usize> {
    let precedence = |i: &Input| match i.format.role {
        Role::Timeline { precedence, .. } => Some(precedence),
        _ => None,
    };
    let first = d.inputs.iter().filter_map(precedence).min();
    d.inputs
        .iter()
        .enumerate()
        .filter(|(_, i)| match i.format.role {
            Role::Timeline { .. } => precedence(i) == first,
            Role::Memory(_) | Role::ExecTrace(_) | Role::Card { .. } => true,
            // Read straight from the dumps by `hang` and the Hang tab: a
            // few MB per rank, nothing a summary would shrink.
            Role::Unreadable { .. } | Role::Flight(_) => false,
        })
        .map(|(k, _)| k)
        .collect()
}

/// The most timelines, and input bytes, that share table files: small
/// ranks' tables in files of their own would be mostly footers (10,000
/// one-event ranks made 90,000 files), and a rank read from a shared file
/// decodes its rows only.
const PACK_INPUTS: usize = 64;
const PACK_BYTES: u64 = 4 << 20;

/// This task's inputs `mine` (ascending) in the groups written together:
/// timelines in runs of consecutive inputs up to [`PACK_INPUTS`] and
/// [`PACK_BYTES`] (a larger one alone), every other input alone. The
/// groups depend on the task's share only, so a re-run finds them again.
fn packs(d: &Discovery, mine: &[usize], size_of: &[u64]) -> Vec<Vec<usize>> {
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut open: Option<(Vec<usize>, u64)> = None;
    for &i in mine {
        if !matches!(d.inputs[i].format.role, Role::Timeline { .. }) {
            groups.push(vec![i]);
            continue;
        }
        let size = size_of[i];
        match &mut open {
            Some((g, bytes)) if g.len() < PACK_INPUTS && *bytes + size <= PACK_BYTES => {
                g.push(i);
                *bytes += size;
            }
            _ => {
                groups.extend(open.take().map(|(g, _)| g));
                open = Some((vec![i], size));
            }
        }
    }
    groups.extend(open.map(|(g, _)| g));
    groups
}

/// The inputs (indices into `d.inputs`, among `read`) that `files` name.
fn only(d: &Discovery, read: &[usize], files: &[PathBuf]) -> Result<Vec<usize>> {
    let same = |a: &Path, b: &Path| match (std::fs::canonicalize(a), std::fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    };
    let mut mine = Vec::new();
    for f in files {
        let found = read.iter().find(|&&i| same(&d.inputs[i].path, f));
        match found {
            Some(&i) => mine.push(i),
            None => {
                return Err(Error::Unsupported {
                    path: f.clone(),
                    why: "not an input of the run summarized (see --inputs)".into(),
                })
            }
        }
    }
    mine.sort_unstable();
    mine.dedup();
    Ok(mine)
}

/// `path` relative to `root`, `/`-separated.
fn relative(root: &Path, path: &Path) -> Result<String> {
    let rel = path.strip_prefix(root).map_err(|_| Error::Unsupported {
        path: path.to_owned(),
        why: format!("outside {}, the folder summarized", root.display()),
    })?;
    let parts: Option<Vec<&str>> = rel.components().map(|c| c.as_os_str().to_str()).collect();
    parts
        .map(|p| p.join("/"))
        .ok_or_else(|| Error::Unsupported {
            path: path.to_owned(),
            why: "its name is not UTF-8 text; rename it to summarize it".into(),
        })
}

/// The entry's file name. A memory snapshot's or execution trace's carries
/// the rank its input's name gives, in a form the format's rank parser
/// reads back (`rank3_<key>.json`).
fn entry_name(input: &Input, rel: &str) -> String {
    let key = manifest::key(rel);
    let rank = match input.format.role {
        Role::Memory(how) => (how.rank_of)(&input.path),
        Role::ExecTrace(how) => (how.rank_of)(&input.path),
        _ => None,
    };
    match rank {
        Some(r) => format!("rank{r}_{key}.json"),
        None => format!("{key}.json"),
    }
}

enum Done {
    Skipped,
    Written {
        /// Bytes written, and the reader's error when it failed.
        bytes_out: u64,
        error: Option<String>,
        bytes_in: u64,
    },
}

/// Summarizes one input unless its entry is current.
fn one(out: &Path, root: &Path, input: &Input, rec: &InputRec, fresh_start: bool) -> Result<Done> {
    let mut m = Member::of(out, input, rec, fresh_start)?;
    if m.unchanged()? {
        return Ok(Done::Skipped);
    }
    if let Some(o) = &m.old {
        remove_files(out, o);
    }
    let (entry_path, fp) = (m.entry_path, m.fp);
    let entry_name = rec.entry.as_deref().expect("selected inputs have entries");
    let counter = AtomicU64::new(0);
    let file = file_in(input, &counter);
    let key = entry_name.trim_end_matches(".json");
    let mut entry = Entry::of(rec, fp.clone());
    match input.format.role {
        Role::Timeline { .. } => unreachable!("timelines are written in packs"),
        Role::Memory(how) => match (how.read)(&file) {
            Ok((m, warnings)) => {
                entry.warnings = warnings;
                let b =
                    super::annex::memory_table(&m).map_err(|e| output_error(out, &rec.path, e))?;
                entry
                    .files
                    .push(write_annex(out, "memory", key, b, &rec.path)?);
                entry.memory = Some(super::annex::memory_meta(&m, &absolute(root, &m.source)));
            }
            Err(e) => entry.error = Some(e.to_string()),
        },
        Role::ExecTrace(how) => match (how.read)(&file) {
            Ok((et, warnings)) => {
                entry.warnings = warnings;
                let b = super::annex::et_table(&et).map_err(|e| output_error(out, &rec.path, e))?;
                entry.files.push(write_annex(out, "et", key, b, &rec.path)?);
                entry.et = Some(super::annex::et_meta(&et, &absolute(root, &et.source)));
            }
            Err(e) => entry.error = Some(e.to_string()),
        },
        Role::Flight(_) => unreachable!("Flight Recorder dumps are not selected"),
        Role::Card { .. } => {
            // Copied as it is: small, and read by its own reader on opening.
            let name = input
                .path
                .file_name()
                .map_or_else(|| "card.yaml".into(), |n| n.to_string_lossy());
            let rel = format!("card/{key}/{name}");
            let dest = place(out, &rel)?;
            let bytes = std::fs::read(&input.path).map_err(|source| Error::Io {
                path: input.path.clone(),
                source,
            })?;
            make_parent(&dest)?;
            crate::atomic::write(&dest, &bytes)?;
            entry.files.push(written(out, rel)?);
        }
        Role::Unreadable { .. } => unreachable!("unreadable inputs are not selected"),
    }
    manifest::write_json(&entry_path, &entry)?;
    Ok(Done::Written {
        bytes_out: entry.files.iter().map(|f| f.1).sum(),
        error: entry.error,
        bytes_in: fp.size,
    })
}

/// An input read in full, CPU ranges and all.
fn file_in<'a>(input: &'a Input, counter: &'a AtomicU64) -> FileIn<'a> {
    FileIn {
        path: &input.path,
        rank: input.rank,
        counter,
        cpu_ranges: true,
    }
}

/// An input to summarize: its entry's path, its fingerprint now, and its
/// entry if one is there for it, whole.
struct Member<'a> {
    input: &'a Input,
    rec: &'a InputRec,
    entry_path: PathBuf,
    fp: Fingerprint,
    old: Option<Entry>,
}

impl<'a> Member<'a> {
    fn of(out: &Path, input: &'a Input, rec: &'a InputRec, fresh_start: bool) -> Result<Self> {
        let name = rec.entry.as_deref().expect("selected inputs have entries");
        let entry_path = out.join(ENTRIES).join(name);
        let old: Option<Entry> = match fresh_start {
            true => None,
            false => manifest::read_json(&entry_path).ok(),
        };
        let old = old.filter(|o| o.path == rec.path && o.format == rec.format && intact(out, o));
        Ok(Self {
            input,
            rec,
            entry_path,
            fp: manifest::stat(&input.path)?,
            old,
        })
    }

    /// Whether its entry stands: the input of the size and time it records,
    /// or touched with its content unchanged (the entry then takes the new
    /// time). Its content's hash is made here when it is needed.
    fn unchanged(&mut self) -> Result<bool> {
        let Some(o) = &self.old else {
            return Ok(false);
        };
        let was = &o.fingerprint;
        if was.size == self.fp.size && was.mtime_ns == self.fp.mtime_ns {
            return Ok(true);
        }
        self.fp.xxh3 = manifest::hash(&self.input.path)?;
        if was.size != self.fp.size || was.xxh3 != self.fp.xxh3 {
            return Ok(false);
        }
        let mut o = o.clone();
        o.fingerprint = self.fp.clone();
        manifest::write_json(&self.entry_path, &o)?;
        Ok(true)
    }

    fn hashed(&mut self) -> Result<()> {
        if self.fp.xxh3.is_empty() {
            self.fp.xxh3 = manifest::hash(&self.input.path)?;
        }
        Ok(())
    }
}

/// The stem of a pack's files: the hash of its inputs' entries and
/// contents, so that a pack of other inputs, or of changed ones, is written
/// beside the files other entries still name, never over them.
fn pack_stem<'a>(members: impl Iterator<Item = (&'a str, &'a str)>) -> String {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    for (entry, xxh3) in members {
        h.update(entry.as_bytes());
        h.update(b"\0");
        h.update(xxh3.as_bytes());
        h.update(b"\0");
    }
    format!("pack-{:016x}", h.digest())
}

/// Summarizes the timeline inputs of `group` whose entries do not stand
/// into table files they share (a pack). Files the rewritten inputs' old
/// entries named are left: other entries may name them too (a whole
/// `summarize` removes those no entry names, see [`collect_packs`]).
fn pack(
    out: &Path,
    root: &Path,
    group: &[(&Input, &InputRec)],
    fresh_start: bool,
) -> Result<Vec<Done>> {
    let mut done = Vec::with_capacity(group.len());
    let mut members = Vec::new();
    for &(input, rec) in group {
        let mut m = Member::of(out, input, rec, fresh_start)?;
        if m.unchanged()? {
            done.push(Done::Skipped);
        } else {
            m.hashed()?;
            members.push(m);
        }
    }
    if members.is_empty() {
        return Ok(done);
    }
    let names: Vec<String> = (members.iter())
        .map(|m| m.rec.entry.clone().unwrap_or_default())
        .collect();
    let stem = pack_stem(
        (names.iter().map(String::as_str)).zip(members.iter().map(|m| m.fp.xxh3.as_str())),
    );
    let mut tables = Tables::default();
    let mut entries = Vec::with_capacity(members.len());
    for (m, name) in members.iter().zip(&names) {
        let key = name.trim_end_matches(".json");
        let mut entry = Entry::of(m.rec, m.fp.clone());
        let Role::Timeline { read, .. } = m.input.format.role else {
            unreachable!("packs hold timelines only")
        };
        let counter = AtomicU64::new(0);
        let mut ranked = Vec::new();
        match read(&file_in(m.input, &counter), &mut |f| ranked.push(f)) {
            Ok(()) => {
                for (j, (name_rank, mut f)) in ranked.into_iter().enumerate() {
                    // One collectives row per distinct record: a run repeats
                    // a handful thousands of times, and each open would
                    // decode and share them again.
                    f.timeline.share_coll_meta();
                    let part_stem = format!("{key}-{j}");
                    let rank = f.dist_rank.or(name_rank);
                    let (rows, stats) = tables
                        .add(&f.timeline, rank, &part_stem)
                        .map_err(|e| output_error(out, &m.rec.path, e))?;
                    let mut p = part(
                        &f.timeline,
                        root,
                        part_stem,
                        name_rank,
                        f.dist_rank,
                        f.events,
                        f.warnings,
                    );
                    p.pack = stem.clone();
                    p.rows = rows;
                    p.stats = stats;
                    entry.parts.push(p);
                }
            }
            Err(e) => entry.error = Some(e.to_string()),
        }
        entries.push(entry);
    }
    let files = tables.write(out, &stem, &members[0].rec.path)?;
    let mut bytes_out: u64 = files.iter().map(|f| f.1).sum();
    for (m, mut entry) in members.iter().zip(entries) {
        if !entry.parts.is_empty() {
            entry.files = files.clone();
        }
        manifest::write_json(&m.entry_path, &entry)?;
        done.push(Done::Written {
            bytes_out: std::mem::take(&mut bytes_out),
            error: entry.error,
            bytes_in: m.fp.size,
        });
    }
    Ok(done)
}

/// Whether `name` is a pack file's name as [`pack_stem`] makes them.
fn pack_file_name(name: &str) -> bool {
    let stem = (name.strip_suffix(".parquet"))
        .or_else(|| name.strip_suffix(".bin"))
        .or_else(|| name.strip_suffix(".json"));
    stem.and_then(|s| s.strip_prefix("pack-"))
        .is_some_and(|h| h.len() == 16 && h.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// Removes the pack files no entry of the run names (left when inputs
/// changed, or by a fan-out into other shares): regular files inside the
/// summary's table folders, named as packs are, and of a pack's content (a
/// Parquet file with this layout's mark, or a JSON list). Run by a whole
/// `summarize` only, which no other task writes beside.
fn collect_packs(out: &Path, m: &Manifest) {
    let mut named = std::collections::HashSet::new();
    for rec in &m.inputs {
        let Some(entry) = &rec.entry else { continue };
        match manifest::read_json::<Entry>(&out.join(ENTRIES).join(entry)) {
            Ok(e) => named.extend(e.files.into_iter().map(|f| f.0)),
            // An entry not read names files we cannot know: keep them all.
            Err(_) => return,
        }
    }
    for table in TABLE_FILES.iter().chain([&super::stats::STATS]) {
        let Ok(list) = std::fs::read_dir(out.join(table)) else {
            continue;
        };
        for f in list.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            let rel = format!("{table}/{name}");
            if named.contains(&rel) || !pack_file_name(&name) {
                continue;
            }
            let size = std::fs::symlink_metadata(f.path()).map_or(0, |m| m.len());
            crate::confined::remove_own(out, &rel, size, |bytes| super::placed::ours(&rel, bytes));
        }
    }
}

/// A pack's tables as they are made, a timeline at a time, and its
/// timelines' figures.
#[derive(Default)]
struct Tables {
    /// Batches by table, in [`TABLE_FILES`] order.
    batches: [Vec<arrow_array::RecordBatch>; 8],
    rows: [u64; 8],
    /// The stats file as written so far: after the mark, each timeline's
    /// figures in postcard, whose byte ranges the entries record (a rank's
    /// is decoded alone, not the pack's). As JSON, a rank's exposed
    /// communication (69,000 intervals) took 1.9 MB, and parsing 64 of
    /// them a seventh of a first open's instructions.
    stats: Vec<u8>,
}

/// The table files of a pack: a timeline's tables, what the reduce reads
/// in place of every op, and what a view too wide to draw each op shows.
const TABLE_FILES: [&str; 8] = [
    "names",
    "ops",
    "colls",
    "steps",
    "annotations",
    "cpu",
    super::stats::COMM,
    super::columns::COVERAGE,
];

impl Tables {
    /// Adds a timeline's rows; returns where they lie in each table, and
    /// its figures in the stats file.
    #[allow(clippy::type_complexity)]
    fn add(
        &mut self,
        t: &RankTimeline,
        rank: Option<u32>,
        part: &str,
    ) -> std::result::Result<(Vec<(String, u64, u64)>, (u64, u64)), String> {
        let e = |e: arrow_schema::ArrowError| e.to_string();
        let mut made = super::columns::to_tables(t).map_err(e)?;
        made.push(super::columns::comm_table(t).map_err(e)?);
        made.push(super::columns::coverage_table(t).map_err(e)?);
        let mut rows = Vec::with_capacity(made.len());
        for (k, b) in made.iter().enumerate() {
            let n = b.num_rows() as u64;
            let at = self.rows[k];
            rows.push((TABLE_FILES[k].to_owned(), at, at + n));
            self.rows[k] += n;
            self.batches[k].push(super::columns::packed(b, rank, part).map_err(e)?);
        }
        let stored = super::stats::to_stored(&crate::derive::RankStats::of(t));
        if self.stats.is_empty() {
            self.stats.extend_from_slice(super::placed::MARK);
        }
        let at = self.stats.len() as u64;
        self.stats = postcard::to_extend(&stored, std::mem::take(&mut self.stats))
            .map_err(|e| e.to_string())?;
        Ok((rows, (at, self.stats.len() as u64)))
    }

    /// Writes the pack's files (none for a pack of no timeline), named
    /// `stem`; returns them as entries list them.
    fn write(&self, out: &Path, stem: &str, input: &str) -> Result<Vec<(String, u64, String)>> {
        let mut files = Vec::new();
        if self.stats.is_empty() {
            return Ok(files);
        }
        for (table, batches) in TABLE_FILES.iter().zip(&self.batches) {
            let rel = format!("{table}/{stem}.parquet");
            write_parquet(&place(out, &rel)?, batches, input, codec_of(table))?;
            files.push(written(out, rel)?);
        }
        let rel = format!("{}/{stem}.bin", super::stats::STATS);
        let path = place(out, &rel)?;
        make_parent(&path)?;
        crate::atomic::write(&path, &self.stats)?;
        files.push(written(out, rel)?);
        Ok(files)
    }
}

fn part(
    t: &RankTimeline,
    root: &Path,
    stem: String,
    name_rank: Option<u32>,
    dist_rank: Option<u32>,
    events: u64,
    warnings: Vec<crate::model::Warning>,
) -> Part {
    Part {
        stem,
        pack: String::new(),
        rows: Vec::new(),
        stats: (0, 0),
        name_rank,
        dist_rank,
        rank: t.rank,
        events,
        warnings,
        source: absolute(root, &t.source),
        world_size: t.world_size,
        groups: t
            .groups
            .iter()
            .map(|g| Group {
                name: g.name.clone(),
                desc: g.desc.clone(),
                ranks: g.ranks.clone(),
            })
            .collect(),
        devices: t
            .devices
            .iter()
            .map(|d| Device {
                id: d.id,
                name: d.name.clone(),
                num_sms: d.num_sms,
            })
            .collect(),
        window: t.window.map(|w| (w.start, w.end)),
        flops: t.flops,
        launch_calls: t.launch_calls,
        launch_time: t.launch_time,
        launch_by_step: t.launch_by_step.clone(),
        engine_steps: t.engine_steps,
        epoch: t.epoch,
        format: t.format.name().to_owned(),
        threads: t.cpu.iter().map(|c| (c.tid, c.launches)).collect(),
    }
}

/// A reader's source path, absolute: the summary may be opened elsewhere.
fn absolute(root: &Path, source: &Path) -> String {
    let name = source.file_name().map(Path::new).unwrap_or(source);
    let rel = std::path::absolute(source).unwrap_or_else(|_| root.join(name));
    rel.to_string_lossy().into_owned()
}

fn output_error(out: &Path, input: &str, e: impl std::fmt::Display) -> Error {
    Error::Output {
        path: out.to_owned(),
        why: format!("cannot build the tables of {input}: {e}"),
    }
}

/// Writes an input's one table `b` (a memory snapshot's, an execution
/// trace's) as `<folder>/<key>.parquet`; returns it as its entry lists it.
fn write_annex(
    out: &Path,
    folder: &str,
    key: &str,
    b: arrow_array::RecordBatch,
    input: &str,
) -> Result<(String, u64, String)> {
    let rel = format!("{folder}/{key}.parquet");
    write_parquet(&place(out, &rel)?, &[b], input, Codec::Snappy)?;
    written(out, rel)
}

/// The tables a summary's first open reads (see [`Codec`]).
const READ_ON_OPEN: [&str; 5] = ["names", "colls", "steps", "annotations", super::stats::COMM];

fn codec_of(table: &str) -> Codec {
    if READ_ON_OPEN.contains(&table) {
        Codec::Plain
    } else {
        Codec::Snappy
    }
}

/// Whether every file an entry lists is there, at the size written.
pub(super) fn intact(out: &Path, e: &Entry) -> bool {
    e.files.iter().all(|(rel, size, _)| {
        crate::confined::inside(out, rel).is_ok_and(|p| {
            std::fs::symlink_metadata(p).is_ok_and(|m| m.is_file() && m.len() == *size)
        })
    })
}

/// Removes the files an entry lists that are still the tool's: inside the
/// summary, regular, and of the content written (or, damaged, still a
/// Parquet file); anything else there is left alone.
fn remove_files(out: &Path, e: &Entry) {
    for (rel, size, xxh3) in &e.files {
        crate::confined::remove_own(out, rel, *size, |bytes| {
            format!("{:016x}", xxhash_rust::xxh3::xxh3_64(bytes)) == *xxh3
                || (rel.ends_with(".parquet")
                    && bytes.starts_with(b"PAR1")
                    && bytes.ends_with(b"PAR1"))
        });
    }
}

/// Whether `name` is an entry's file name as [`entry_name`] makes them
/// (`<16 hex>.json` or `rank<N>_<16 hex>.json`).
fn entry_file_name(name: &str) -> bool {
    let Some(stem) = name.strip_suffix(".json") else {
        return false;
    };
    let key = match stem.split_once('_') {
        Some((rank, key)) => {
            let digits = rank.strip_prefix("rank").unwrap_or("");
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return false;
            }
            key
        }
        None => stem,
    };
    key.len() == 16 && key.bytes().all(|b| b.is_ascii_hexdigit())
}

/// Removes entries (and their tables) of inputs no longer in the run: a
/// query over `ops/` must see the run's inputs only. Only files named and
/// shaped as the tool writes them are removed. (Temporaries a killed writer
/// left are hidden `.partial` files no `*.parquet` glob reads; those an
/// hour old are removed too.)
fn prune(out: &Path, m: &Manifest) -> Result<()> {
    remove_stale_partials(out, 0);
    let keep: std::collections::HashSet<&str> =
        m.inputs.iter().filter_map(|i| i.entry.as_deref()).collect();
    let dir = out.join(ENTRIES);
    let Ok(list) = std::fs::read_dir(&dir) else {
        return Ok(());
    };
    for e in list.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if keep.contains(name.as_str()) || !entry_file_name(&name) {
            continue;
        }
        // Read as a regular file, never through a link, and an entry by its
        // content: then it and its files are the tool's own.
        let Ok(mut old) = manifest::read_json::<Entry>(&e.path()) else {
            continue;
        };
        // A pack's files may be other entries' too: see `collect_packs`.
        old.files.retain(|f| {
            let name = f.0.rsplit('/').next().unwrap_or_default();
            !pack_file_name(name)
        });
        remove_files(out, &old);
        let _ = std::fs::remove_file(e.path());
    }
    Ok(())
}

/// Removes the temporaries a killed writer left (see [`crate::atomic`]),
/// an hour old or more: regular files only, never through a link.
fn remove_stale_partials(dir: &Path, depth: u32) {
    let Ok(list) = std::fs::read_dir(dir) else {
        return;
    };
    let hour = std::time::Duration::from_secs(3600);
    for e in list.flatten() {
        let path = e.path();
        // Of the entry itself: a link is neither a folder nor a file here.
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if meta.is_dir() && depth < 3 {
            remove_stale_partials(&path, depth + 1);
        } else if meta.is_file()
            && crate::atomic::is_partial(&e.file_name().to_string_lossy())
            && meta
                .modified()
                .is_ok_and(|t| t.elapsed().is_ok_and(|a| a > hour))
        {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// Refuses an output folder that would hide or clobber something else: a
/// non-empty folder that is not a summary. A summary another task is
/// starting (its folders made, its manifest not yet renamed into place:
/// `srun` starts them all at once) holds only names of the layout.
pub fn check_out(out: &Path) -> Result<()> {
    let Ok(list) = std::fs::read_dir(out) else {
        return Ok(());
    };
    let ours = |name: &str| {
        name == MANIFEST
            || crate::atomic::is_partial(name)
            || [
                ENTRIES,
                "memory",
                "et",
                "card",
                super::manifest::RESULTS,
                super::stats::COMM,
                super::stats::STATS,
                super::reduce::REDUCE,
            ]
            .contains(&name)
            || super::columns::TABLES.contains(&name)
    };
    if out.join(MANIFEST).is_file() {
        return Ok(());
    }
    let other = list
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|name| !ours(name));
    match other {
        None => Ok(()),
        Some(name) => Err(Error::Output {
            path: out.to_owned(),
            why: format!(
                "a folder with other files ({}), not a summary: choose another --out",
                crate::safe::text(&name)
            ),
        }),
    }
}
