//! A summarized rank's ops and binned lanes read a window at a time, for
//! views of runs too large to hold every op (the Timeline of a summary
//! opened lean): row groups are picked by their footer statistics, so a
//! window costs the row groups it touches, not the file.
//!
//! What is read is checked as a whole load checks it (times in range,
//! names among the rank's, indexes inside their tables), and each file's
//! size against its entry; a file's hash is not checked, which would read
//! it whole: that is what paging avoids.

use std::fs::File;
use std::path::Path;
use std::sync::{Arc, OnceLock};

use super::columns::{self, GroupRange};
use crate::derive::lanes::Bin;
use crate::derive::RankStats;
use crate::model::classify::UserRules;
use crate::model::{DeviceOp, Interval, Ns, RankTimeline, Slot, Trace};
use crate::read::{TableFile, Tables};

/// Every rank's pages, indexed like the trace's ranks.
pub struct Pages {
    ranks: Vec<RankPages>,
    /// Where lanes binned afresh lie, kept while the pages read them.
    _scratch: Option<Scratch>,
}

/// A temporary folder of tables made while loading (lanes binned afresh
/// under class rules), removed when the last holder goes.
pub type Scratch = Arc<tempfile::TempDir>;

/// The class rules the lean load applied, applied again to every op read
/// (the tables hold the ops as the map step classified them).
type Rules = Option<Arc<UserRules>>;

impl Pages {
    /// The pages of a trace read lean from a summary (see
    /// `load::load_lean`), with its ranks' stats and table files (both
    /// indexed like its ranks); `None` unless every rank was read from a
    /// summary listing its ops and coverage tables. Under class rules a
    /// rank's stored lanes may be left out (see `Tables::coverage`): its ops
    /// are still read, its bins not.
    pub fn of(
        trace: &Trace,
        stats: &[RankStats],
        tables: Vec<Option<Tables>>,
        scratch: Option<Scratch>,
    ) -> Option<Self> {
        let rules: Rules = trace.rules.clone().map(Arc::new);
        if tables.len() != trace.ranks.len() || stats.len() != trace.ranks.len() {
            return None;
        }
        let ranks = tables
            .into_iter()
            .zip(stats)
            .enumerate()
            .map(|(i, (tables, s))| {
                let shift = trace
                    .offsets
                    .as_ref()
                    .and_then(|o| o.get(i))
                    .map_or(Ns::ZERO, |o| o.offset);
                let longest = s
                    .kernel_table
                    .names
                    .iter()
                    .map(|n| n.3.max)
                    .max()
                    .unwrap_or(Ns::ZERO);
                Some(RankPages {
                    tables: tables?,
                    rules: rules.clone(),
                    shift,
                    longest,
                    footer: OnceLock::new(),
                })
            })
            .collect::<Option<Vec<_>>>()?;
        (!ranks.is_empty()).then_some(Self {
            ranks,
            _scratch: scratch,
        })
    }

    pub fn rank(&self, rank_index: usize) -> Option<&RankPages> {
        self.ranks.get(rank_index)
    }

    /// The whole timeline of `lean`, a rank of `trace` (the lean trace
    /// these pages are of): its every op read from its table, the rest as
    /// the lean rank holds it. One rank's ops, without the rest of the
    /// run's, for views that list every op (exports).
    pub fn whole(&self, trace: &Trace, lean: &RankTimeline) -> Result<RankTimeline, String> {
        let pages = trace
            .ranks
            .iter()
            .position(|t| std::ptr::eq(t, lean))
            .and_then(|i| self.rank(i))
            .ok_or_else(|| format!("rank {} is not of the paged trace", lean.rank))?;
        let ops = pages.all_ops(lean)?;
        let mut t = lean.clone();
        t.ops = ops.into();
        t.comm_only = false;
        Ok(t)
    }
}

/// Bins the lanes of `t` (a whole rank, its ops of the load's classes) as
/// the map step bins them, into table `name` in `dir`: the lanes a summary
/// opened under class rules draws. Returns the file.
pub fn rebin(t: &RankTimeline, dir: &Path, name: &str) -> Result<TableFile, String> {
    let path = dir.join(format!("{name}.parquet"));
    let why = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let table = columns::coverage_table(t).map_err(|e| why(&e))?;
    let rows = (0, table.num_rows() as u64);
    let table = columns::packed(&table, Some(t.rank), name).map_err(|e| why(&e))?;
    super::placed::write_parquet(&path, &[table], name, super::placed::Codec::Snappy)
        .map_err(|e| why(&e))?;
    let size = std::fs::metadata(&path).map_err(|e| why(&e))?.len();
    Ok(TableFile { path, size, rows })
}

/// Gives collectives read from a rank's ops table the metadata their lean
/// copies in `lean` hold (the run's records shared, as the matching across
/// ranks saw them); returns how many had no lean copy.
pub fn share_meta(lean: &RankTimeline, ops: &mut [DeviceOp]) -> usize {
    let mut lost = 0;
    for o in ops.iter_mut().filter(|o| o.crosses_ranks()) {
        match lean.find_op(o) {
            Some(i) => o.meta = lean.ops[i].meta,
            None => lost += 1,
        }
    }
    lost
}

/// One rank's stored tables and where their row groups lie.
pub struct RankPages {
    tables: Tables,
    rules: Rules,
    /// Added to stored times: the rank's clock alignment.
    shift: Ns,
    /// The rank's longest op: a window's ops start at most this much
    /// before it.
    longest: Ns,
    footer: OnceLock<Result<Footer, String>>,
}

/// The row groups' ranges: of the ops' starts; of the bins' levels and
/// starts; each with how many of its rows are the rank's (a file may hold
/// other ranks' rows too, and a group none of the rank's).
struct Footer {
    ops: Vec<(GroupRange, usize)>,
    levels: Vec<(GroupRange, usize)>,
    starts: Vec<GroupRange>,
}

/// Each group of `ranges` with how many of rows `rows` it holds.
fn mine(ranges: Vec<GroupRange>, (a, b): (u64, u64)) -> Vec<(GroupRange, usize)> {
    let mut at = 0u64;
    ranges
        .into_iter()
        .map(|g| {
            let (s, e) = (at, at + g.rows as u64);
            at = e;
            (g, e.min(b).saturating_sub(s.max(a)) as usize)
        })
        .collect()
}

/// A table file opened after checking its size against the entry's.
fn open(t: &TableFile) -> Result<File, String> {
    let why = |e: &dyn std::fmt::Display| format!("{}: {e}", t.path.display());
    let f = crate::confined::open_file(&t.path).map_err(|e| why(&e))?;
    let len = f.metadata().map_err(|e| why(&e))?.len();
    if len != t.size {
        return Err(why(&"its size changed since the summary was written"));
    }
    Ok(f)
}

fn damaged(path: &Path, why: impl std::fmt::Display) -> String {
    format!("{}: a damaged summary table: {why}", path.display())
}

impl RankPages {
    /// The coverage table, when its bins are of the load's classes.
    fn coverage(&self) -> Result<&TableFile, String> {
        self.tables.coverage.as_ref().ok_or_else(|| {
            format!(
                "{}: the stored lanes are of other classes than the rules applied",
                self.tables.ops.path.display()
            )
        })
    }

    fn footer(&self) -> Result<&Footer, String> {
        self.footer
            .get_or_init(|| {
                let ops = &self.tables.ops;
                let [ops_ranges] = columns::group_ranges(open(ops)?, ["start_ns"])
                    .map_err(|e| damaged(&ops.path, e))?;
                let (levels, starts) = match &self.tables.coverage {
                    Some(cov) => {
                        let [levels, starts] =
                            columns::group_ranges(open(cov)?, ["level", "start"])
                                .map_err(|e| damaged(&cov.path, e))?;
                        (mine(levels, cov.rows), starts)
                    }
                    None => Default::default(),
                };
                Ok(Footer {
                    ops: mine(ops_ranges, ops.rows),
                    levels,
                    starts,
                })
            })
            .as_ref()
            .map_err(Clone::clone)
    }

    /// The row groups of the ops table holding ops that may overlap
    /// `view` (on the stored clock).
    fn op_groups(&self, view: Interval) -> Result<Vec<usize>, String> {
        let lo = view.start.saturating_sub(self.longest).get();
        Ok(self
            .footer()?
            .ops
            .iter()
            .enumerate()
            .filter(|(_, (g, n))| *n > 0 && g.max >= lo && g.min < view.end.get())
            .map(|(i, _)| i)
            .collect())
    }

    fn stored(&self, view: Interval) -> Interval {
        Interval::new(view.start - self.shift, view.end - self.shift)
    }

    /// Rows the ops table holds in the groups `groups`.
    fn rows(&self, groups: &[usize]) -> Result<usize, String> {
        let f = self.footer()?;
        Ok(groups.iter().map(|&g| f.ops[g].1).sum())
    }

    /// Decodes row groups `groups` of the ops table into ops on the
    /// trace's clock, checked against the rank `t` they belong to. Their
    /// collective metadata is not kept (the lean rank holds it, shared).
    fn decode(&self, t: &RankTimeline, groups: Vec<usize>) -> Result<Vec<DeviceOp>, String> {
        let file = &self.tables.ops;
        let path = &file.path;
        let batches = columns::decode_groups(open(file)?, file.size, "ops", groups, file.rows)
            .map_err(|e| damaged(path, e))?;
        let mut ops = Vec::new();
        for b in &batches {
            columns::ops_of(&columns::Rows::whole(b), &|s| t.strings.id(s), &mut ops)
                .map_err(|e| damaged(path, e))?;
        }
        for o in &mut ops {
            o.meta = Slot::NONE;
        }
        if let Some(rules) = &self.rules {
            rules.apply_ops(&t.strings, &mut ops);
        }
        columns::check_ops(&ops, 0, t.steps.len()).map_err(|e| damaged(path, e))?;
        for o in &mut ops {
            o.start += self.shift;
            o.launch += self.shift;
        }
        Ok(ops)
    }

    /// The ops overlapping `view` in start order, or `None` when the row
    /// groups holding them have more than `max` rows.
    pub fn ops(
        &self,
        t: &RankTimeline,
        view: Interval,
        max: usize,
    ) -> Result<Option<Vec<DeviceOp>>, String> {
        let groups = self.op_groups(self.stored(view))?;
        if self.rows(&groups)? > max {
            return Ok(None);
        }
        let mut ops = self.decode(t, groups)?;
        ops.retain(|o| o.start < view.end && o.end() > view.start);
        // Whole row groups were decoded; the view keeps its window's ops.
        ops.shrink_to_fit();
        Ok(Some(ops))
    }

    /// Every op of the rank, in stored order, on the trace's clock, its
    /// collectives with their metadata from the lean rank `t`: what the
    /// rank's whole timeline holds.
    pub(crate) fn all_ops(&self, t: &RankTimeline) -> Result<Vec<DeviceOp>, String> {
        let f = self.footer()?;
        let groups = (0..f.ops.len()).filter(|&g| f.ops[g].1 > 0).collect();
        let mut ops = self.decode(t, groups)?;
        match share_meta(t, &mut ops) {
            0 => Ok(ops),
            lost => Err(damaged(
                &self.tables.ops.path,
                format!("{lost} collective(s) not in the rank's comm table"),
            )),
        }
    }

    /// The ops of the row groups that may hold ops overlapping `view`, a
    /// row group at a time, to `f`: memory stays at one group whatever
    /// the view.
    pub fn visit(
        &self,
        t: &RankTimeline,
        view: Interval,
        f: &mut dyn FnMut(&[DeviceOp]),
    ) -> Result<(), String> {
        for g in self.op_groups(self.stored(view))? {
            f(&self.decode(t, vec![g])?);
        }
        Ok(())
    }

    /// The bins of level `level` (every lane's) overlapping `view`, on
    /// the trace's clock, in stored order (lane, then time).
    pub fn bins(&self, level: u32, view: Interval) -> Result<Vec<Bin>, String> {
        let cov = self.coverage()?;
        let f = self.footer()?;
        let v = self.stored(view);
        let level_i = i64::from(level);
        let groups: Vec<usize> = f
            .levels
            .iter()
            .zip(&f.starts)
            .enumerate()
            // Bins are in time order within a lane only: a group's least
            // start is all that bounds it.
            .filter(|(_, ((l, n), s))| {
                *n > 0 && (l.min..=l.max).contains(&level_i) && s.min < v.end.get()
            })
            .map(|(i, _)| i)
            .collect();
        let path = &cov.path;
        let batches = columns::decode_groups(open(cov)?, cov.size, "coverage", groups, cov.rows)
            .map_err(|e| damaged(path, e))?;
        let mut out = Vec::new();
        for b in &batches {
            for bin in columns::bins_of(b).map_err(|e| damaged(path, e))? {
                if bin.level == level && bin.start < v.end && bin.start + bin.len > v.start {
                    out.push(Bin {
                        start: bin.start + self.shift,
                        ..bin
                    });
                }
            }
        }
        Ok(out)
    }

    /// The coarsest level's bins over the whole rank.
    pub fn top_bins(&self) -> Result<Vec<Bin>, String> {
        let cov = self.coverage()?;
        let f = self.footer()?;
        // A group the rank's rows fill gives its levels by its statistics;
        // one it shares with other ranks, by its rows (a small rank's few).
        let shared: Vec<usize> = (f.levels.iter().enumerate())
            .filter(|(_, (g, n))| *n > 0 && *n < g.rows)
            .map(|(i, _)| i)
            .collect();
        let mut top = (f.levels.iter().filter(|(g, n)| *n > 0 && *n == g.rows))
            .map(|(g, _)| g.max)
            .max()
            .unwrap_or(0);
        if !shared.is_empty() {
            let batches =
                columns::decode_groups(open(cov)?, cov.size, "coverage", shared, cov.rows)
                    .map_err(|e| damaged(&cov.path, e))?;
            for b in &batches {
                let bins = columns::bins_of(b).map_err(|e| damaged(&cov.path, e))?;
                top = top.max(bins.iter().map(|b| i64::from(b.level)).max().unwrap_or(0));
            }
        }
        let top = u32::try_from(top).map_err(|_| damaged(&cov.path, "a level"))?;
        use crate::model::time::TIME_LIMIT;
        self.bins(top, Interval::new(Ns::ZERO - TIME_LIMIT, TIME_LIMIT))
    }
}
