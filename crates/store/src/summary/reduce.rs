//! What the reduce reads, in one place (`reduce/`): every entry of the run
//! in one index, and the tables a first open reads of the small ranks
//! (names, collectives, communication ops, steps, annotations and figures)
//! gathered into one file each. A first open of 1,024 small ranks otherwise
//! reads 1,024 entries and decodes a hundred packs' files, table by table,
//! which costs more than the reduce itself.
//!
//! A whole `summarize` writes it last, from the entries and packs it just
//! left; every `summarize` removes the index first, so an index is only
//! ever beside the entries it was made of, and it names the manifest's hash
//! too. An open finding no index, or one of another manifest or layout,
//! reads the entries, as it does for a summary written before there was
//! one. The per-rank files stay what a query reads: this is a copy of the
//! small ranks' few tables (a pack's files over [`SMALL`] are not copied:
//! their looks cost little beside their bytes).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use arrow_array::RecordBatch;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use super::listed::Listed;
use super::manifest::{self, damaged, Entry, Manifest, ENTRIES, MANIFEST};
use super::placed::MARK;
use super::stats::{COMM, STATS};
use crate::error::{Error, Result};
use crate::source::FileIn;

/// The folder, inside the summary.
pub(crate) const REDUCE: &str = "reduce";
/// The index's path in the summary.
const INDEX: &str = "reduce/index.bin";
/// The index as the previous layout wrote it (JSON lines): removed by a
/// `summarize`, never read.
const OLD_INDEX: &str = "reduce/index.jsonl";
/// The index's layout; another is not read.
const LAYOUT: u32 = 2;
/// The gathered figures' file: each part's, one after another.
const GATHERED_STATS: &str = "reduce/stats.bin";
/// The gathered figures as the previous layout wrote them (a JSON list).
const OLD_STATS: &str = "reduce/stats.json";
/// The tables gathered, as a lean load names them (`comm` stands for the
/// ops), and the figures' file after them.
pub(crate) const GATHERED: [&str; 5] = ["names", "colls", "steps", "annotations", COMM];
/// A pack whose first-open files are all at most this small is gathered;
/// the others are read from their own files. Opening, checking and
/// decoding a table file costs about what decoding 64 KiB of it does, so
/// larger files gain little, and one gathered table of larger ranks
/// (8.5 MB of 64 ranks' collectives) was read and checked on one thread
/// where the ranks' own files were read on every core: that open took 7 %
/// longer.
const SMALL: u64 = 64 << 10;
/// The largest index read: entries list inputs and warnings, not events.
const MAX_INDEX: u64 = 1 << 30;

/// The index: its head, then its entries, in postcard (a compact serde
/// encoding: 1,024 entries' JSON took a tenth of a first open to parse)
/// after [`MARK`], each entry in a frame of its own so that they are
/// decoded in parallel.
struct Index {
    head: Head,
    /// The manifest's inputs that have an entry, in its order.
    entries: Vec<Indexed>,
}

/// The index's head.
#[derive(Serialize, Deserialize)]
struct Head {
    /// [`LAYOUT`].
    ccl_bench_reduce: u32,
    /// The XXH3-64 of the manifest's bytes it was made beside, hex.
    manifest: String,
    /// The gathered tables and figures, when any rank was gathered.
    files: Vec<Listed>,
}

#[derive(Serialize, Deserialize)]
struct Indexed {
    /// Its file name in `inputs/`.
    name: String,
    /// The XXH3-64 of the entry file's bytes, hex: what a summary's digest
    /// (and so its kept results) is made of.
    xxh3: String,
    /// The entry file's size and modification time: an entry changed,
    /// removed or rewritten since sets the index aside.
    stamp: (u64, u64),
    entry: Entry,
    /// For each of its parts, where its rows lie in the gathered tables,
    /// when they were gathered.
    at: Vec<Option<At>>,
}

/// A part's rows in each gathered table, `[start, end)`, and its figures'
/// bytes in the gathered figures.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct At {
    pub rows: Vec<(String, u64, u64)>,
    pub stats: (u64, u64),
}

/// An opened index, with the gathered tables decoded when first asked for.
pub struct Reduce {
    sum: PathBuf,
    index: Index,
    by_name: HashMap<String, usize>,
    /// Held from the lean load's [`Reduce::gather`] to its
    /// [`Reduce::let_go`] (and made again by a later load).
    gathered: Mutex<Option<Gotten>>,
}

/// The gathered files as read: or the first one's error, its path and why.
type Gotten = std::result::Result<Arc<Gathered>, (PathBuf, String)>;

impl std::fmt::Debug for Reduce {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reduce")
            .field("sum", &self.sum)
            .field("entries", &self.index.entries.len())
            .finish()
    }
}

/// The gathered tables, by [`GATHERED`], and the figures' bytes.
pub(crate) struct Gathered {
    tables: Vec<Vec<RecordBatch>>,
    stats: bytes::Bytes,
}

impl Reduce {
    /// The index of the summary `sum` whose manifest `m` has the hash
    /// `manifest_hash`, when one was made beside it: `None` (read the
    /// entries) for none, another layout, another manifest, or one that
    /// does not list the manifest's entries.
    pub(crate) fn open(sum: &Path, m: &Manifest, manifest_hash: u64) -> Option<Reduce> {
        let path = crate::confined::inside(sum, INDEX).ok()?;
        let bytes = crate::confined::read_file(&path, MAX_INDEX).ok()?;
        let (head, rest) = postcard::take_from_bytes::<Head>(bytes.strip_prefix(MARK)?).ok()?;
        if head.ccl_bench_reduce != LAYOUT || head.manifest != format!("{manifest_hash:016x}") {
            return None;
        }
        // Each entry its own frame, decoded in parallel.
        let frames: Vec<&[u8]> = postcard::from_bytes(rest).ok()?;
        let entries: Vec<Indexed> = (frames.par_iter())
            .map(|b| postcard::from_bytes(b))
            .collect::<std::result::Result<_, _>>()
            .ok()?;
        let index = Index { head, entries };
        let names = m.inputs.iter().filter_map(|i| i.entry.as_ref());
        let fits = names.clone().count() == index.entries.len()
            && names.zip(&index.entries).all(|(n, e)| *n == e.name)
            && (index.entries.iter()).all(|e| e.at.len() == e.entry.parts.len());
        // Each entry file as it was when indexed, looked at in parallel (a
        // look is a round trip on a cluster file system): one edited or
        // removed since is read, or found missing, as without an index.
        let entries = sum.join(ENTRIES);
        if !fits
            || !(index.entries.par_iter()).all(|e| {
                manifest::safe_name(&e.name) && stamp(&entries.join(&e.name)).ok() == Some(e.stamp)
            })
        {
            return None;
        }
        let by_name = (index.entries.iter().enumerate())
            .map(|(i, e)| (e.name.clone(), i))
            .collect();
        Some(Reduce {
            sum: sum.to_owned(),
            index,
            by_name,
            gathered: Mutex::new(None),
        })
    }

    fn indexed(&self, name: &str) -> Option<&Indexed> {
        Some(&self.index.entries[*self.by_name.get(name)?])
    }

    /// The entry named `name` and the XXH3-64 of its file's bytes.
    pub(crate) fn entry(&self, name: &str) -> Option<(&Entry, Option<u64>)> {
        let e = self.indexed(name)?;
        Some((&e.entry, u64::from_str_radix(&e.xxh3, 16).ok()))
    }

    /// The entry a lean load of `path` (an entry's path in this summary)
    /// reads, and where its parts' rows were gathered.
    pub(crate) fn of_path(&self, path: &Path) -> Option<(&Entry, &[Option<At>])> {
        let name = path.file_name()?.to_str()?;
        if path.parent()? != self.sum.join(ENTRIES) {
            return None;
        }
        let e = self.indexed(name)?;
        Some((&e.entry, &e.at))
    }

    /// A part's rows `at` of gathered table `table` (one of [`GATHERED`])
    /// in the gathered files `g` (see [`Reduce::gathered`]).
    pub(crate) fn rows<'g>(
        &self,
        g: &'g Gathered,
        table: &str,
        at: &At,
    ) -> Result<Vec<super::columns::Rows<'g>>> {
        let k = GATHERED.iter().position(|&t| t == table);
        let rows = at.rows.iter().find(|r| r.0 == table);
        let (Some(k), Some((_, a, b))) = (k, rows) else {
            return Err(damaged(&self.index_path(), format!("no rows of {table}")));
        };
        super::columns::Rows::of(&g.tables[k], (*a, *b))
            .map_err(|why| damaged(&self.index_path(), format!("{table}: {why}")))
    }

    /// A part's figures in the gathered figures `g`.
    pub(crate) fn stats(&self, g: &Gathered, at: &At) -> Result<super::stats::Stored> {
        let (a, z) = at.stats;
        let one = super::listed::part_of(&g.stats, at.stats)
            .ok_or_else(|| damaged(&self.index_path(), format!("no figures at {a}..{z}")))?;
        postcard::from_bytes(&one).map_err(|e| damaged(&self.stats_path(), e))
    }

    /// The gathered figures' file, which a part's figures are parsed from.
    pub(crate) fn stats_path(&self) -> PathBuf {
        self.sum.join(GATHERED_STATS)
    }

    pub(crate) fn index_path(&self) -> PathBuf {
        self.sum.join(INDEX)
    }

    /// Reads, checks and decodes the gathered files, in parallel, for the
    /// lean load about to read its ranks (counting their bytes in
    /// `counter`): else the first rank read decodes them alone while the
    /// others wait. They are held until [`Reduce::let_go`].
    pub fn gather(&self, counter: &std::sync::atomic::AtomicU64) -> Result<()> {
        // No rank small enough to be gathered: nothing to read.
        if self.index.head.files.is_empty() {
            return Ok(());
        }
        let path = self.index_path();
        let f = FileIn {
            path: &path,
            rank: None,
            counter,
            cpu_ranges: false,
        };
        if self.held().is_none() {
            let files = self.read_apart(&f);
            let mut held = self.gathered.lock().unwrap_or_else(|e| e.into_inner());
            held.get_or_insert_with(|| gathered_of(&path, files).map(Arc::new));
        }
        self.gathered(&f).map(|_| ())
    }

    /// The gathered files read and checked in parallel, then each table's
    /// row groups (64 Ki rows each) decoded in parallel: one table holds
    /// every small rank's collectives, and one thread decoding it would
    /// leave the other cores idle.
    fn read_apart(&self, f: &FileIn) -> Vec<Result<Got>> {
        let read: Vec<Result<(PathBuf, bytes::Bytes)>> = (0..=GATHERED.len())
            .into_par_iter()
            .map(|k| self.read_bytes(f, k))
            .collect();
        // Each table's row groups: (table, group, the table's rows).
        let footers: Vec<Option<std::result::Result<Vec<u64>, String>>> = (read.iter())
            .take(GATHERED.len())
            .map(|r| r.as_ref().ok().map(|(_, b)| super::columns::group_rows(b)))
            .collect();
        let mut groups = Vec::new();
        for (k, footer) in footers.iter().enumerate() {
            if let Some(Ok(rows)) = footer {
                let total: u64 = rows.iter().sum();
                groups.extend((0..rows.len()).map(|g| (k, g, total)));
            }
        }
        let mut decoded = (groups.par_iter())
            .map(|&(k, g, total)| {
                let Ok((path, bytes)) = &read[k] else {
                    unreachable!("only the groups of tables read")
                };
                let size = bytes.len() as u64;
                super::columns::decode_groups(bytes.clone(), size, GATHERED[k], vec![g], (0, total))
                    .map_err(|why| damaged(path, why))
            })
            .collect::<Vec<_>>()
            .into_iter();
        let mut out = Vec::with_capacity(read.len());
        for (k, r) in read.into_iter().enumerate() {
            let got = match (r, footers.get(k)) {
                (Err(e), _) => Err(e),
                (Ok((_, bytes)), None) => Ok(Got::Stats(bytes)),
                (Ok((path, _)), Some(Some(Err(why)))) => Err(damaged(&path, why)),
                (Ok(_), Some(Some(Ok(rows)))) => (decoded.by_ref().take(rows.len()))
                    .collect::<Result<Vec<_>>>()
                    .map(|g| Got::Table(g.concat())),
                (Ok(_), Some(None)) => unreachable!("a footer for every table read"),
            };
            out.push(got);
        }
        out
    }

    /// Lets the gathered files go, once every rank is read: the timelines
    /// hold what they took of them.
    pub fn let_go(&self) {
        *self.gathered.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    fn held(&self) -> Option<Gotten> {
        self.gathered
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The gathered files, read, checked (size and hash) and decoded: by
    /// [`Reduce::gather`], or else here by the first caller while the
    /// others wait. (Not in parallel here: a rayon worker waiting on the
    /// lock could be handed the load of another rank, which waits on it.)
    pub(crate) fn gathered(&self, f: &FileIn) -> Result<Arc<Gathered>> {
        let got = match self.held() {
            Some(got) => got,
            None => {
                let mut held = self.gathered.lock().unwrap_or_else(|e| e.into_inner());
                (held.get_or_insert_with(|| {
                    gathered_of(
                        &self.index_path(),
                        (0..=GATHERED.len()).map(|k| self.read_one(f, k)).collect(),
                    )
                    .map(Arc::new)
                }))
                .clone()
            }
        };
        got.map_err(|(path, why)| Error::NotATrace { path, why })
    }

    /// Gathered file `k`: table `GATHERED[k]`, decoded, or past them the
    /// figures' bytes.
    fn read_one(&self, f: &FileIn, k: usize) -> Result<Got> {
        let (path, bytes) = self.read_bytes(f, k)?;
        Ok(match GATHERED.get(k) {
            Some(table) => {
                let size = bytes.len() as u64;
                Got::Table(
                    super::columns::decode(bytes, size, table)
                        .map_err(|why| damaged(&path, why))?,
                )
            }
            None => Got::Stats(bytes),
        })
    }

    /// Gathered file `k`'s bytes (see [`Reduce::read_one`]), checked.
    fn read_bytes(&self, f: &FileIn, k: usize) -> Result<(PathBuf, bytes::Bytes)> {
        let rel = match GATHERED.get(k) {
            Some(table) => format!("{REDUCE}/{table}.parquet"),
            None => GATHERED_STATS.to_owned(),
        };
        let listed = (self.index.head.files.iter())
            .find(|x| x.0 == rel)
            .ok_or_else(|| damaged(&self.index_path(), format!("{rel} not among its files")))?;
        let path = crate::confined::inside(&self.sum, &rel)
            .map_err(|why| damaged(&self.index_path(), why))?;
        let bytes = super::listed::checked(f, &path, listed)?;
        Ok((path, bytes))
    }
}

/// One gathered file, read.
enum Got {
    Table(Vec<RecordBatch>),
    Stats(bytes::Bytes),
}

/// The gathered files from each one's reading (in [`Reduce::read_one`]'s
/// order), or the first one's error, as its path (else the `index`'s) and
/// why.
fn gathered_of(
    index: &Path,
    files: Vec<Result<Got>>,
) -> std::result::Result<Gathered, (PathBuf, String)> {
    let mut tables = Vec::with_capacity(GATHERED.len());
    let mut stats = None;
    for got in files {
        match got {
            Ok(Got::Table(t)) => tables.push(t),
            Ok(Got::Stats(b)) => stats = Some(b),
            Err(Error::NotATrace { path, why }) => return Err((path, why)),
            Err(e) => return Err((index.to_owned(), e.to_string())),
        }
    }
    match stats {
        Some(stats) if tables.len() == GATHERED.len() => Ok(Gathered { tables, stats }),
        _ => Err((
            index.to_owned(),
            "damaged summary (a gathered file is missing)".into(),
        )),
    }
}

/// An entry file's size and modification time, of the file itself (a
/// link has its own: never the entry's).
fn stamp(path: &Path) -> std::io::Result<(u64, u64)> {
    let crate::discover::Stamp { size, mtime_ns } =
        crate::discover::Stamp::of(&std::fs::symlink_metadata(path)?);
    Ok((size, mtime_ns))
}

/// Removes the index (see the module's doc), when it is one: every
/// `summarize` does before writing an entry.
pub(crate) fn forget(out: &Path) {
    crate::confined::remove_own(out, INDEX, MAX_INDEX, |bytes| bytes.starts_with(MARK));
    crate::confined::remove_own(out, OLD_INDEX, MAX_INDEX, |bytes| {
        let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
        serde_json::from_slice::<Head>(first).is_ok()
    });
}

/// Writes the index of the whole summary `out`, and the small ranks'
/// tables gathered: after every entry is written, by the task that writes
/// the whole summary.
pub(crate) fn write(out: &Path) -> Result<()> {
    let (m, m_hash): (Manifest, u64) = manifest::read_json_hashed(&out.join(MANIFEST))?;
    let mut entries = Vec::new();
    for name in m.inputs.iter().filter_map(|i| i.entry.as_ref()) {
        if !manifest::safe_name(name) {
            return Err(damaged(&out.join(MANIFEST), format!("entry name {name}")));
        }
        let path = out.join(ENTRIES).join(name);
        let (entry, hash): (Entry, u64) = manifest::read_json_hashed(&path)?;
        entries.push(Indexed {
            name: name.clone(),
            xxh3: format!("{hash:016x}"),
            stamp: stamp(&path).map_err(|source| Error::Io {
                path: path.clone(),
                source,
            })?,
            at: vec![None; entry.parts.len()],
            entry,
        });
    }
    // The packs whose files are all small, each read once, with an entry
    // that lists its files. One that cannot be read as it was written is
    // not gathered: its ranks are read from it, and its damage said, when
    // the summary is opened.
    let mut packs: HashMap<&str, &Entry> = HashMap::new();
    for e in &entries {
        for p in e.entry.parts.iter().filter(|p| small(&e.entry, &p.pack)) {
            packs.entry(&p.pack).or_insert(&e.entry);
        }
    }
    let decoded: HashMap<String, Pack> = (packs.into_par_iter())
        .filter_map(|(pack, e)| Some((pack.to_owned(), Pack::read(out, e, pack).ok()?)))
        .collect();
    let mut tables: Vec<Vec<RecordBatch>> = vec![Vec::new(); GATHERED.len()];
    let mut rows = [0u64; GATHERED.len()];
    let mut stats = Vec::new();
    for e in &mut entries {
        for (p, at) in e.entry.parts.iter().zip(&mut e.at) {
            let Some(pack) = decoded.get(&p.pack) else {
                continue;
            };
            let mut mine = Vec::with_capacity(GATHERED.len());
            for (k, table) in GATHERED.into_iter().enumerate() {
                let (_, a, b) = (p.rows.iter()).find(|r| r.0 == table).ok_or_else(|| {
                    damaged(
                        &out.join(ENTRIES).join(&e.name),
                        format!("no rows of {table}"),
                    )
                })?;
                let got = super::columns::slice_rows(&pack.tables[k], (*a, *b))
                    .map_err(|why| damaged(&out.join(ENTRIES).join(&e.name), why))?;
                let n: u64 = got.iter().map(|b| b.num_rows() as u64).sum();
                mine.push((table.to_owned(), rows[k], rows[k] + n));
                rows[k] += n;
                tables[k].extend(got);
            }
            let one = super::listed::part_of(&pack.stats, p.stats)
                .ok_or_else(|| damaged(&out.join(ENTRIES).join(&e.name), "no figures"))?;
            if stats.is_empty() {
                stats.extend_from_slice(MARK);
            }
            let a = stats.len() as u64;
            // Figures in postcard are copied; a pack from before them has
            // its JSON's encoded.
            if pack.json {
                let one = super::stats::decode(&one, true)
                    .map_err(|why| damaged(&out.join(ENTRIES).join(&e.name), why))?;
                stats = postcard::to_extend(&one, stats)
                    .map_err(|why| damaged(&out.join(ENTRIES).join(&e.name), why))?;
            } else {
                stats.extend_from_slice(&one);
            }
            *at = Some(At {
                rows: mine,
                stats: (a, stats.len() as u64),
            });
        }
    }
    let mut files = Vec::new();
    // Left by the previous layout: its index is removed already.
    crate::confined::remove_own(out, OLD_STATS, MAX_INDEX, |bytes| {
        super::placed::ours(OLD_STATS, bytes)
    });
    if stats.is_empty() {
        remove_gathered(out);
    } else {
        for (table, batches) in GATHERED.iter().zip(&mut tables) {
            // A table no rank has a row of (annotations, often) is written
            // with its columns alone.
            if batches.is_empty() {
                let schema = super::columns::schema_of(table).expect("a gathered table's schema");
                batches.push(RecordBatch::new_empty(schema));
            }
            let rel = format!("{REDUCE}/{table}.parquet");
            let path = super::placed::place(out, &rel)?;
            super::placed::write_parquet(&path, batches, REDUCE, super::placed::Codec::Plain)?;
            files.push(super::placed::written(out, rel)?);
        }
        crate::atomic::write(&super::placed::place(out, GATHERED_STATS)?, &stats)?;
        files.push(super::placed::written(out, GATHERED_STATS.to_owned())?);
    }
    let head = Head {
        ccl_bench_reduce: LAYOUT,
        manifest: format!("{m_hash:016x}"),
        files,
    };
    let path = super::placed::place(out, INDEX)?;
    let output = |e: postcard::Error| Error::Output {
        path: path.clone(),
        why: e.to_string(),
    };
    let text = postcard::to_extend(&head, MARK.to_vec()).map_err(output)?;
    let text = postcard::to_extend(&framed(&entries).map_err(output)?, text).map_err(output)?;
    super::placed::make_parent(&path)?;
    crate::atomic::write(&path, &text)
}

/// Each entry encoded on its own (read back as a list of byte strings).
fn framed(entries: &[Indexed]) -> postcard::Result<Vec<Vec<u8>>> {
    entries.iter().map(postcard::to_stdvec).collect()
}

/// Removes gathered files a summary of small ranks left, once none is
/// gathered: regular files of the names written, and of a gathered file's
/// content (a Parquet file with this layout's mark, or figures after
/// [`MARK`]).
fn remove_gathered(out: &Path) {
    for rel in lean_files_in(REDUCE) {
        crate::confined::remove_own(out, &rel, MAX_INDEX, |bytes| {
            super::placed::ours(&rel, bytes)
        });
    }
}

/// The gathered files' paths in the folder `dir`.
fn lean_files_in(dir: &str) -> Vec<String> {
    (GATHERED.iter())
        .map(|t| format!("{dir}/{t}.parquet"))
        .chain([format!("{dir}/{STATS}.bin")])
        .collect()
}

/// Whether every file of `pack` that a first open reads is small.
fn small(e: &Entry, pack: &str) -> bool {
    (lean_files(e, pack).iter())
        .all(|rel| (e.files.iter()).any(|(r, size, _)| r == rel && *size <= SMALL))
}

/// The files of `pack` a first open reads, [`GATHERED`] then the figures
/// the entry `e` lists.
fn lean_files(e: &Entry, pack: &str) -> Vec<String> {
    let figures = super::stats::figures_file(e, pack)
        .map_or_else(|| format!("{STATS}/{pack}.bin"), |f| f.0 .0.clone());
    (GATHERED.iter())
        .map(|t| format!("{t}/{pack}.parquet"))
        .chain([figures])
        .collect()
}

/// A pack's gathered tables, decoded whole, and its figures' bytes (JSON
/// or not).
struct Pack {
    tables: Vec<Vec<RecordBatch>>,
    stats: bytes::Bytes,
    json: bool,
}

impl Pack {
    fn read(out: &Path, e: &Entry, pack: &str) -> Result<Pack> {
        let lean = lean_files(e, pack);
        let json = super::stats::figures_file(e, pack).is_some_and(|f| f.1);
        let mut files = lean.into_iter().map(|rel| {
            let listed = (e.files.iter())
                .find(|x| x.0 == rel)
                .ok_or_else(|| damaged(&out.join(MANIFEST), format!("{rel} not listed")))?;
            let path = crate::confined::inside(out, &rel).map_err(|why| damaged(out, why))?;
            let bytes = super::listed::as_written(&path, listed)?;
            Ok((path, bytes))
        });
        let mut tables = Vec::with_capacity(GATHERED.len());
        for table in GATHERED {
            let (path, bytes) = files.next().expect("a file per table")?;
            let size = bytes.len() as u64;
            tables.push(
                super::columns::decode(bytes, size, table).map_err(|why| damaged(&path, why))?,
            );
        }
        let (_, stats) = files.next().expect("the figures' file")?;
        Ok(Pack {
            tables,
            stats,
            json,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::discover::Pick;
    use crate::summary::write::{summarize, Options};
    use crate::summary::Shard;

    /// Six ranks of the synthetic run, summarized whole (or as `shard`).
    fn summarized(traces: &Path, sum: &Path, shard: Shard) {
        let opts = Options {
            out: sum.to_owned(),
            shard,
            only: Vec::new(),
            pick: Pick::default(),
            formats: crate::formats::FORMATS,
        };
        summarize(traces, &opts).expect("the synthetic run summarizes");
    }

    fn traces() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let run = crate::synth::training_run(&crate::synth::RunShape {
            ranks: 6,
            steps: 3,
            ..Default::default()
        });
        for (i, r) in run.iter().enumerate() {
            std::fs::write(dir.path().join(format!("rank{i}_trace.json")), r.to_json()).unwrap();
        }
        dir
    }

    fn file_in<'a>(path: &'a Path, counter: &'a std::sync::atomic::AtomicU64) -> FileIn<'a> {
        FileIn {
            path,
            rank: None,
            counter,
            cpu_ranges: false,
        }
    }

    /// The traces, the folder holding their summary, and the summary,
    /// written whole.
    fn whole() -> (tempfile::TempDir, tempfile::TempDir, std::path::PathBuf) {
        let dir = traces();
        let out = tempfile::tempdir().unwrap();
        let sum = out.path().join("s");
        summarized(dir.path(), &sum, Shard::default());
        (dir, out, sum)
    }

    fn opened(sum: &Path) -> super::super::open::Opened {
        super::super::open::discover(sum, Pick::default(), crate::formats::FORMATS, None)
            .expect("the summary opens")
    }

    /// Every rank's lean timeline and figures, as `Debug` text.
    fn lean(o: &super::super::open::Opened) -> Vec<String> {
        let counter = std::sync::atomic::AtomicU64::new(0);
        (o.discovery.inputs.iter())
            .flat_map(|i| {
                let f = file_in(&i.path, &counter);
                super::super::read::lean_timelines(&f, o.reduce.as_deref()).expect("a rank reads")
            })
            .map(|((rank, file), stats)| {
                // Less the interner's map, whose order is the hasher's.
                let t = format!("{:?}", file.timeline);
                let (a, b) = (t.find("ids: {").unwrap(), t.find("}, strings: [").unwrap());
                format!("{rank:?} {}{} {stats:?}", &t[..a], &t[b..])
            })
            .collect()
    }

    #[test]
    fn the_index_stands_for_the_entries_and_a_share_removes_it() {
        let (dir, out, sum) = whole();
        let with = opened(&sum);
        let r = with.reduce.as_ref().expect("a whole summary has an index");
        // Small ranks: each was gathered, and each part is read from there.
        assert_eq!(r.index.entries.len(), 6);
        assert!((r.index.entries.iter()).all(|e| e.at.iter().all(Option::is_some)));
        assert_eq!(r.index.head.files.len(), GATHERED.len() + 1);
        let from_index = lean(&with);
        assert_eq!(from_index.len(), 6);
        // Let go, gathered at once (as a load does), and read again.
        r.let_go();
        assert!(r.held().is_none());
        let counter = std::sync::atomic::AtomicU64::new(0);
        r.gather(&counter).unwrap();
        assert!(
            counter.into_inner() > 0,
            "the gathered files' bytes are counted"
        );
        assert_eq!(lean(&with), from_index);

        // Without it, the entries give the same ranks and the same digest
        // (the results kept for one are the other's).
        std::fs::rename(sum.join(INDEX), out.path().join("index.json")).unwrap();
        let without = opened(&sum);
        assert!(without.reduce.is_none());
        assert_eq!(without.digest, with.digest);
        assert_eq!(lean(&without), from_index);

        // An index of another manifest is not read.
        let mut m: serde_json::Value =
            serde_json::from_slice(&std::fs::read(sum.join(MANIFEST)).unwrap()).unwrap();
        std::fs::rename(out.path().join("index.json"), sum.join(INDEX)).unwrap();
        m["tool"] = "another".into();
        std::fs::write(sum.join(MANIFEST), m.to_string()).unwrap();
        assert!(opened(&sum).reduce.is_none());

        // A share rewrites entries: it removes the index first, and the
        // whole summarize after it makes it again.
        summarized(dir.path(), &sum, Shard { index: 0, count: 2 });
        assert!(!sum.join(INDEX).exists());
        assert!(opened(&sum).reduce.is_none());
        summarized(dir.path(), &sum, Shard::default());
        assert_eq!(lean(&opened(&sum)), from_index);
    }

    #[test]
    fn a_damaged_gathered_table_is_refused_with_its_name() {
        let (_traces, _out, sum) = whole();
        let comm = sum.join(REDUCE).join("comm.parquet");
        let size = std::fs::metadata(&comm).unwrap().len() as usize;
        std::fs::write(&comm, vec![0x5a; size]).unwrap();
        let o = opened(&sum);
        let counter = std::sync::atomic::AtomicU64::new(0);
        let e = o
            .reduce
            .as_ref()
            .unwrap()
            .gather(&counter)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("reduce/comm.parquet") && e.contains("damaged summary"),
            "{e}"
        );
        // And so is each rank read after it.
        let i = &o.discovery.inputs[0];
        let f = file_in(&i.path, &counter);
        let e = super::super::read::lean_timelines(&f, o.reduce.as_deref())
            .unwrap_err()
            .to_string();
        assert!(e.contains("reduce/comm.parquet"), "{e}");
    }

    #[test]
    fn a_damaged_pack_is_not_gathered_and_is_refused_where_read() {
        let (traces, _out, sum) = whole();
        let comm = std::fs::read_dir(sum.join(COMM))
            .unwrap()
            .next()
            .unwrap()
            .unwrap()
            .path();
        let size = std::fs::metadata(&comm).unwrap().len() as usize;
        std::fs::write(&comm, vec![0x5a; size]).unwrap();
        // Its inputs unchanged, the pack is kept (of its size), and the
        // index made again without its ranks.
        summarized(traces.path(), &sum, Shard::default());
        let o = opened(&sum);
        let r = o.reduce.as_ref().expect("an index");
        let name = comm.file_stem().unwrap().to_str().unwrap();
        let (gathered, not): (Vec<&Indexed>, Vec<&Indexed>) =
            (r.index.entries.iter()).partition(|e| e.entry.parts.iter().all(|p| p.pack != name));
        // These six small ranks share one pack: none is gathered.
        assert_eq!((not.len(), gathered.len()), (6, 0));
        assert!(not.iter().all(|e| e.at.iter().all(Option::is_none)));
        assert!(r.index.head.files.is_empty());
        assert!(
            !sum.join(REDUCE).join("comm.parquet").exists(),
            "the old copy goes"
        );
        let counter = std::sync::atomic::AtomicU64::new(0);
        let path = sum.join(ENTRIES).join(&not[0].name);
        let e = super::super::read::lean_timelines(&file_in(&path, &counter), Some(r))
            .unwrap_err()
            .to_string();
        assert!(e.contains("damaged summary") && e.contains(name), "{e}");
    }

    /// A summary the previous layout wrote (an index of JSON lines, the
    /// figures as a JSON list), summarized again: both are removed; a file
    /// of that name that is not of that layout is left as it is.
    #[test]
    fn summarize_removes_the_previous_layouts_files_only() {
        let (traces, _out, sum) = whole();
        let old_head = r#"{"ccl_bench_reduce":1,"manifest":"0123456789abcdef","files":[]}"#;
        std::fs::write(sum.join(OLD_INDEX), format!("{old_head}\n{{}}\n")).unwrap();
        std::fs::write(sum.join(OLD_STATS), "[{},{}]").unwrap();
        summarized(traces.path(), &sum, Shard::default());
        assert!(!sum.join(OLD_INDEX).exists() && !sum.join(OLD_STATS).exists());
        assert!(opened(&sum).reduce.is_some(), "the new index is read");
        // Not ours: kept.
        std::fs::write(sum.join(OLD_INDEX), "notes\n").unwrap();
        std::fs::write(sum.join(OLD_STATS), "{\"mine\": 1}").unwrap();
        summarized(traces.path(), &sum, Shard::default());
        assert!(sum.join(OLD_INDEX).exists() && sum.join(OLD_STATS).exists());
    }

    /// A summary whose figures are JSON lists, as summaries wrote them
    /// before postcard: its ranks read the same, with its index and
    /// without, and the index's gathered figures are encoded from them.
    #[test]
    fn figures_in_json_are_read_as_before() {
        let (_traces, out, sum) = whole();
        let from_bin = lean(&opened(&sum));
        // Each pack's figures rewritten as a JSON list, its entries'
        // ranges and file lists to match.
        let names: Vec<PathBuf> = (std::fs::read_dir(sum.join(ENTRIES)).unwrap())
            .map(|e| e.unwrap().path())
            .collect();
        let mut entries: Vec<Entry> = (names.iter())
            .map(|p| manifest::read_json(p).unwrap())
            .collect();
        let mut lists: HashMap<String, Vec<u8>> = HashMap::new();
        for e in &mut entries {
            for p in &mut e.parts {
                let bin = std::fs::read(sum.join(format!("{STATS}/{}.bin", p.pack))).unwrap();
                let (a, z) = (p.stats.0 as usize, p.stats.1 as usize);
                let one: super::super::stats::Stored = postcard::from_bytes(&bin[a..z]).unwrap();
                let list = lists.entry(p.pack.clone()).or_default();
                list.push(if list.is_empty() { b'[' } else { b',' });
                let a = list.len() as u64;
                serde_json::to_writer(&mut *list, &one).unwrap();
                p.stats = (a, list.len() as u64);
            }
        }
        for (pack, mut list) in lists {
            list.push(b']');
            std::fs::write(sum.join(format!("{STATS}/{pack}.json")), list).unwrap();
            std::fs::remove_file(sum.join(format!("{STATS}/{pack}.bin"))).unwrap();
        }
        for (path, e) in names.iter().zip(&mut entries) {
            for f in &mut e.files {
                if let Some(pack) =
                    (f.0.strip_prefix(&format!("{STATS}/"))).and_then(|n| n.strip_suffix(".bin"))
                {
                    let rel = format!("{STATS}/{pack}.json");
                    let bytes = std::fs::read(sum.join(&rel)).unwrap();
                    let hash = format!("{:016x}", xxhash_rust::xxh3::xxh3_64(&bytes));
                    *f = (rel, bytes.len() as u64, hash);
                }
            }
            manifest::write_json(path, e).unwrap();
        }
        // Entries rewritten: the index is set aside, the packs are read.
        assert!(opened(&sum).reduce.is_none());
        assert_eq!(lean(&opened(&sum)), from_bin);
        // The reduce made again of them, its figures from the JSON.
        write(&sum).unwrap();
        let with = opened(&sum);
        assert!(with.reduce.is_some());
        assert_eq!(lean(&with), from_bin);
        drop(out);
    }

    /// The index `sum` holds, decoded.
    fn index_of(sum: &Path) -> (Head, Vec<Indexed>) {
        let bytes = std::fs::read(sum.join(INDEX)).unwrap();
        let (head, rest) = postcard::take_from_bytes(bytes.strip_prefix(MARK).unwrap()).unwrap();
        let frames: Vec<&[u8]> = postcard::from_bytes(rest).unwrap();
        let entries = frames.iter().map(|b| postcard::from_bytes(b).unwrap());
        (head, entries.collect())
    }

    #[test]
    fn rows_past_the_gathered_tables_are_refused() {
        let (_traces, _out, sum) = whole();
        let written = std::fs::read(sum.join(INDEX)).unwrap();
        let edit = |f: &dyn Fn(&mut At)| {
            // The third entry's first part, in the index as written.
            std::fs::write(sum.join(INDEX), &written).unwrap();
            let (head, mut entries) = index_of(&sum);
            f(entries[2].at[0].as_mut().unwrap());
            let bytes = postcard::to_extend(&head, MARK.to_vec()).unwrap();
            let bytes = postcard::to_extend(&framed(&entries).unwrap(), bytes).unwrap();
            std::fs::write(sum.join(INDEX), bytes).unwrap();
            let o = opened(&sum);
            assert!(o.reduce.is_some());
            let counter = std::sync::atomic::AtomicU64::new(0);
            let i = &o.discovery.inputs[2];
            let f = file_in(&i.path, &counter);
            super::super::read::lean_timelines(&f, o.reduce.as_deref())
                .unwrap_err()
                .to_string()
        };
        let e = edit(&|at| at.rows[4].2 = 1 << 40);
        assert!(
            e.contains("damaged summary") && e.contains("of a table of"),
            "{e}"
        );
        let e = edit(&|at| at.stats = (1 << 40, (1 << 40) + 5));
        assert!(e.contains("no figures at"), "{e}");
        let e = edit(&|at| at.rows.clear());
        assert!(e.contains("no rows of"), "{e}");
        // Figures that do not decode: the gathered file is named.
        let e = edit(&|at| at.stats.1 = at.stats.0 + 1);
        assert!(
            e.contains("damaged summary") && e.contains("stats.bin"),
            "{e}"
        );
    }
}
