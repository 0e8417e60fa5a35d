//! The summary's readers: an entry and its tables back into what the
//! input's own reader produced (or its error, word for word).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;

use arrow_array::RecordBatch;

use super::columns::Rows;
use super::listed::{checked, Listed};
use super::manifest::{self, damaged, Entry, Part};
use super::reduce::{At, Reduce};
use crate::derive::RankStats;
use crate::error::{Error, Result};
use crate::formats::Ranked;
use crate::model::exec_trace::EtRank;
use crate::model::memory::MemoryTimeline;
use crate::model::timeline::SourceFormat;
use crate::model::{DeviceInfo, Interval, ProcessGroup, RankTimeline};
use crate::read::{RankFile, TableFile, Tables};
use crate::source::FileIn;

/// The entry at `f.path` and the summary folder holding it.
fn entry(f: &FileIn) -> Result<(Entry, PathBuf)> {
    let e: Entry = manifest::read_json(f.path)?;
    recorded(&e)?;
    Ok((e, sum_of(f)))
}

/// The reader's error an entry recorded, replayed.
fn recorded(e: &Entry) -> Result<()> {
    match &e.error {
        Some(text) => Err(Error::Recorded { text: text.clone() }),
        None => Ok(()),
    }
}

/// The summary folder holding the entry at `f.path`.
fn sum_of(f: &FileIn) -> PathBuf {
    f.path
        .parent()
        .and_then(Path::parent)
        .map(Path::to_owned)
        .unwrap_or_default()
}

/// The trace a summary entry at `path` was made of (its first timeline's
/// source); `None` for any other file.
pub fn source_of(path: &Path) -> Option<PathBuf> {
    if path.parent()?.file_name()? != super::manifest::ENTRIES {
        return None;
    }
    let e: Entry = manifest::read_json(path).ok()?;
    e.parts.first().map(|p| PathBuf::from(&p.source))
}

/// One table file's batches, after checking its size and hash.
fn table(f: &FileIn, sum: &Path, file: &Listed, name: &str) -> Result<Vec<RecordBatch>> {
    let path = &place(f, sum, &file.0)?;
    let bytes = checked(f, path, file)?;
    let size = bytes.len() as u64;
    super::columns::decode(bytes, size, name).map_err(|e| damaged(path, e))
}

/// A part's rows `rows` of a table file it may share with others, after
/// checking the file's size and hash. A small file (a pack's) is decoded
/// whole and kept on this thread: the pack's other parts take their rows
/// from it.
fn part_rows(
    f: &FileIn,
    sum: &Path,
    file: &Listed,
    name: &str,
    rows: (u64, u64),
) -> Result<Vec<RecordBatch>> {
    use super::recent::{self, Kept};
    let path = &place(f, sum, &file.0)?;
    if let Some(Kept::Table(all)) = recent::get(path, file.1, &file.2) {
        f.counter.fetch_add(file.1, Ordering::Relaxed);
        return super::columns::slice_rows(&all, rows).map_err(|e| damaged(path, e));
    }
    let bytes = checked(f, path, file)?;
    let size = bytes.len() as u64;
    if !recent::keeps(size) {
        return super::columns::decode_rows(bytes, size, name, rows).map_err(|e| damaged(path, e));
    }
    let all = super::columns::decode(bytes, size, name).map_err(|e| damaged(path, e))?;
    let mine = super::columns::slice_rows(&all, rows).map_err(|e| damaged(path, e))?;
    // A file of this part's rows alone is not read again.
    let total: usize = all.iter().map(RecordBatch::num_rows).sum();
    if rows != (0, total as u64) {
        recent::put(path, file.1, &file.2, Kept::Table(all));
    }
    Ok(mine)
}

/// A part's rows in the pack's file of table `table`.
fn rows_of(f: &FileIn, p: &Part, table: &str) -> Result<(u64, u64)> {
    (p.rows.iter())
        .find(|r| r.0 == table)
        .map(|r| (r.1, r.2))
        .filter(|(a, b)| a <= b)
        .ok_or_else(|| damaged(f.path, format!("{}: no rows of {table}", p.stem)))
}

/// Where `rel`, a file an entry lists, lies in the summary `sum`: inside
/// it, through no link.
fn place(f: &FileIn, sum: &Path, rel: &str) -> Result<PathBuf> {
    crate::confined::inside(sum, rel).map_err(|why| damaged(f.path, why))
}

/// The file an entry lists as `rel`.
fn listed<'e>(f: &FileIn, e: &'e Entry, rel: &str) -> Result<&'e Listed> {
    e.files
        .iter()
        .find(|x| x.0 == rel)
        .ok_or_else(|| damaged(f.path, format!("{rel} not among its files")))
}

/// Reads a timeline input's entry: its timelines as the input's reader
/// returned them, each given to `each` as it is read. The CPU ranges are
/// read only when asked for.
pub fn timelines(f: &FileIn, each: &mut dyn FnMut(Ranked)) -> Result<()> {
    let (e, sum) = entry(f)?;
    for p in &e.parts {
        each(ranked(p, whole(f, &e, &sum, p)?));
    }
    Ok(())
}

/// [`timelines`] for a lean load with the default preparation (no class
/// rules, the measured steps): each timeline's collectives alone, with the
/// figures the map step made of its ops, where the summary holds them
/// (else the whole timeline, and no figures).
///
/// With the summary's `reduce` index, the entry is the index's and the
/// parts gathered there are read from its tables.
pub fn lean_timelines(
    f: &FileIn,
    reduce: Option<&Reduce>,
) -> Result<Vec<(Ranked, Option<RankStats>)>> {
    let read;
    let (e, at) = match reduce.and_then(|r| r.of_path(f.path)) {
        Some((e, at)) => {
            recorded(e)?;
            (e, at)
        }
        None => {
            read = entry(f)?.0;
            (&read, &[][..])
        }
    };
    let sum = sum_of(f);
    (e.parts.iter().enumerate())
        .map(|(j, p)| {
            let gathered = reduce.zip(at.get(j).and_then(Option::as_ref));
            Ok(match lean(f, e, &sum, p, gathered)? {
                Some((t, stats)) => (ranked(p, t), Some(stats)),
                None => (ranked(p, whole(f, e, &sum, p)?), None),
            })
        })
        .collect()
}

fn ranked(p: &Part, (timeline, tables): (RankTimeline, Option<Tables>)) -> Ranked {
    (
        p.name_rank,
        RankFile {
            timeline,
            dist_rank: p.dist_rank,
            events: p.events,
            warnings: p.warnings.clone(),
            tables,
        },
    )
}

/// The path of a part's file in folder `table`, checked to stay inside
/// the summary.
fn rel_of(f: &FileIn, p: &Part, table: &str, ext: &str) -> Result<String> {
    let rel = format!("{table}/{}.{ext}", p.pack);
    if manifest::safe_rel(&rel) {
        Ok(rel)
    } else {
        Err(damaged(f.path, format!("table path {rel}")))
    }
}

/// A part's timeline from the tables `names` lists (`ops` read from the
/// table `ops_from`).
fn read_part(
    f: &FileIn,
    e: &Entry,
    sum: &Path,
    p: &Part,
    names: &[&'static str],
    ops_from: &str,
) -> Result<RankTimeline> {
    let mut tables = HashMap::new();
    for &name in names {
        let from = if name == "ops" { ops_from } else { name };
        let rel = rel_of(f, p, from, "parquet")?;
        let rows = rows_of(f, p, from)?;
        tables.insert(name, part_rows(f, sum, listed(f, e, &rel)?, from, rows)?);
    }
    let rows = (tables.iter())
        .map(|(&name, all)| (name, all.iter().map(Rows::whole).collect()))
        .collect();
    filled(f, p, &rows)
}

/// A part's timeline: its scalars, then its `tables` read back.
fn filled(f: &FileIn, p: &Part, tables: &HashMap<&str, Vec<Rows>>) -> Result<RankTimeline> {
    let mut t = scalars(p).map_err(|why| damaged(f.path, why))?;
    super::columns::fill_rows(&mut t, tables, &p.threads)
        .map_err(|why| damaged(f.path, format!("{}: {why}", p.stem)))?;
    Ok(t)
}

/// A part's whole timeline: every op (and the CPU ranges when asked for),
/// with its table files, so that a load that makes its own figures (class
/// rules, every step) can still be kept lean and read in pages.
fn whole(f: &FileIn, e: &Entry, sum: &Path, p: &Part) -> Result<(RankTimeline, Option<Tables>)> {
    let names: Vec<&'static str> = super::columns::TABLES
        .into_iter()
        .filter(|&n| n != "cpu" || f.cpu_ranges)
        .collect();
    let t = read_part(f, e, sum, p, &names, "ops")?;
    Ok((t, stored_tables(f, e, sum, p)?))
}

/// A part's collectives and the figures the map step made of its ops, when
/// it wrote them (a summary by an older version did not): the reduce then
/// reads neither its ops nor its CPU ranges.
type Lean = ((RankTimeline, Option<Tables>), RankStats);

/// The tables a lean load reads (`ops` from the collectives' own table).
const LEAN: [&str; 5] = ["names", "ops", "colls", "steps", "annotations"];

fn lean(
    f: &FileIn,
    e: &Entry,
    sum: &Path,
    p: &Part,
    gathered: Option<(&Reduce, &At)>,
) -> Result<Option<Lean>> {
    use super::stats::COMM;
    let (path, stored, mut t) = match gathered {
        Some((r, at)) => {
            let g = r.gathered(f)?;
            let mut tables = HashMap::new();
            for name in LEAN {
                let from = if name == "ops" { COMM } else { name };
                tables.insert(name, r.rows(&g, from, at)?);
            }
            (r.stats_path(), r.stats(&g, at)?, filled(f, p, &tables)?)
        }
        None => {
            let find = |rel: &str| e.files.iter().find(|x| x.0 == rel);
            if find(&rel_of(f, p, COMM, "parquet")?).is_none() {
                return Ok(None);
            }
            // The pack's timelines' figures: this part's alone is read.
            let Some((stats_file, json)) = super::stats::figures_file(e, &p.pack) else {
                return Ok(None);
            };
            let path = place(f, sum, &stats_file.0)?;
            let bytes = checked(f, &path, stats_file)?;
            let (a, z) = p.stats;
            let one = super::listed::part_of(&bytes, p.stats)
                .ok_or_else(|| damaged(&path, format!("no figures at {a}..{z} for {}", p.stem)))?;
            let stored = super::stats::decode(&one, json).map_err(|why| damaged(&path, why))?;
            (path, stored, read_part(f, e, sum, p, &LEAN, COMM)?)
        }
    };
    let Some(stats) = super::stats::from_stored(stored, t.rank, t.strings.len())
        .map_err(|why| damaged(&path, why))?
    else {
        return Ok(None);
    };
    if stats
        .step_hulls
        .as_ref()
        .is_some_and(|h| h.len() != t.steps.len())
    {
        return Err(damaged(&path, "step hulls not one per step"));
    }
    t.comm_only = true;
    t.share_coll_meta();
    Ok(Some(((t, stored_tables(f, e, sum, p)?), stats)))
}

/// A part's ops and coverage tables, when its entry lists both.
fn stored_tables(f: &FileIn, e: &Entry, sum: &Path, p: &Part) -> Result<Option<Tables>> {
    let file = |table: &str| -> Result<Option<TableFile>> {
        let rel = rel_of(f, p, table, "parquet")?;
        e.files
            .iter()
            .find(|x| x.0 == rel)
            .map(|x| {
                Ok(TableFile {
                    path: place(f, sum, &rel)?,
                    size: x.1,
                    rows: rows_of(f, p, table)?,
                })
            })
            .transpose()
    };
    Ok(match (file("ops")?, file(super::columns::COVERAGE)?) {
        (Some(ops), Some(coverage)) => Some(Tables {
            ops,
            coverage: Some(coverage),
        }),
        _ => None,
    })
}

fn scalars(p: &Part) -> std::result::Result<RankTimeline, String> {
    let format = [SourceFormat::PyTorch, SourceFormat::Nsys, SourceFormat::Xla]
        .into_iter()
        .find(|s| s.name() == p.format)
        .ok_or_else(|| format!("unknown source format {}", p.format))?;
    let window = match p.window {
        Some((s, e))
            if crate::model::time::in_range(s) && crate::model::time::in_range(e) && s <= e =>
        {
            Some(Interval::new(s, e))
        }
        Some(_) => return Err("a window out of range".into()),
        None => None,
    };
    Ok(RankTimeline {
        rank: p.rank,
        world_size: p.world_size,
        groups: p
            .groups
            .iter()
            .map(|g| ProcessGroup {
                name: g.name.clone(),
                desc: g.desc.clone(),
                ranks: g.ranks.clone(),
            })
            .collect(),
        source: PathBuf::from(&p.source),
        devices: p
            .devices
            .iter()
            .map(|d| DeviceInfo {
                id: d.id,
                name: d.name.clone(),
                num_sms: d.num_sms,
            })
            .collect(),
        window,
        flops: p.flops,
        launch_calls: p.launch_calls,
        launch_time: p.launch_time,
        launch_by_step: p.launch_by_step.clone(),
        engine_steps: p.engine_steps,
        epoch: p.epoch,
        format,
        ..Default::default()
    })
}

/// The one table file an annotating input's entry lists.
fn only_table(f: &FileIn, e: &Entry, sum: &Path, name: &str) -> Result<Vec<RecordBatch>> {
    match e.files.as_slice() {
        [file] if manifest::safe_rel(&file.0) => table(f, sum, file, name),
        _ => Err(damaged(f.path, "not one table file")),
    }
}

pub(crate) fn memory(f: &FileIn) -> Result<(MemoryTimeline, Vec<crate::model::Warning>)> {
    let (e, sum) = entry(f)?;
    let meta = e
        .memory
        .as_ref()
        .ok_or_else(|| damaged(f.path, "no memory figures"))?;
    let m = super::annex::memory_from(meta, &only_table(f, &e, &sum, "memory")?)
        .map_err(|why| damaged(f.path, why))?;
    Ok((m, e.warnings))
}

pub(crate) fn exec_trace(f: &FileIn) -> Result<(EtRank, Vec<crate::model::Warning>)> {
    let (e, sum) = entry(f)?;
    let meta = e.et.as_ref().ok_or_else(|| damaged(f.path, "no schema"))?;
    let et = super::annex::et_from(meta, &only_table(f, &e, &sum, "et")?)
        .map_err(|why| damaged(f.path, why))?;
    Ok((et, e.warnings))
}
