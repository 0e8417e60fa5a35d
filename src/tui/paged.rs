//! The Timeline of a summary opened lean: each visible rank's lanes are
//! read for the view, from bins at most 1/16 of a column wide or, once
//! a window holds few enough ops, from the ops themselves (then exact),
//! and kept while the view stays inside what was read.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use crate::derive::lanes::FACTOR;
use crate::model::collectives::LastStarts;
use crate::model::Trace;
use crate::model::{DeviceOp, Interval, Ns};
use crate::summary::pages::Pages;
use crate::tui::lane::{bin_lanes, wait_of, Lane, Shown};

/// Most rows a window read decodes (4 row groups): past it, bins are drawn.
const MAX_ROWS: usize = 1 << 18;
/// Most ops and bins kept over all ranks read for views (2 Mi: with their
/// lanes' coverage about 180 bytes an op, 380 MB). Ranks on screen share
/// it: with many, each reads fewer ops and draws bins sooner, so browsing
/// holds this much whatever the run's size.
const KEPT_ROWS: usize = 1 << 21;
/// Bins drawn are at most this fraction of a column wide: a column's share
/// is exact but for the bins at its two edges, each taken as covered
/// evenly, so it is off by at most 2/16 of the column.
const BINS_PER_COLUMN: i64 = 16;
/// Ranks whose finer lanes are kept (the screen shows fewer).
const KEPT: usize = 256;

/// Most rows one rank's window may read with `on_screen` ranks shown.
fn max_rows(on_screen: usize) -> usize {
    MAX_ROWS.min(KEPT_ROWS / on_screen.max(1))
}

/// What reading pages needs of the run: its ranks as held (lean) and
/// where each collective's last member started (a lane's waits).
#[derive(Clone, Copy)]
pub(crate) struct Run<'a> {
    pub trace: &'a Trace,
    pub last_starts: &'a LastStarts,
}

pub struct Paged {
    pages: Pages,
    /// Per rank, the coarsest level stored and its bins' width (`None`: a
    /// rank with no op).
    top: Vec<Option<(u32, Ns)>>,
    cache: Mutex<Kept>,
    /// Ranks the last frame showed.
    on_screen: AtomicUsize,
    error: Mutex<Option<String>>,
}

/// The ranks' details read for views, each with when it was last used.
#[derive(Default)]
struct Kept {
    by_rank: HashMap<usize, (u64, Arc<Detail>)>,
    clock: u64,
    rows: usize,
}

impl Kept {
    fn get(&mut self, rank_index: usize) -> Option<&Arc<Detail>> {
        self.clock += 1;
        let e = self.by_rank.get_mut(&rank_index)?;
        e.0 = self.clock;
        Some(&e.1)
    }

    /// Keeps `d`, giving up the least recently used details past
    /// `KEPT` ranks or `KEPT_ROWS` rows.
    fn insert(&mut self, rank_index: usize, d: Arc<Detail>) {
        self.clock += 1;
        self.rows += d.rows;
        if let Some((_, old)) = self.by_rank.insert(rank_index, (self.clock, d)) {
            self.rows -= old.rows;
        }
        while self.by_rank.len() > KEPT || (self.rows > KEPT_ROWS && self.by_rank.len() > 1) {
            let oldest = self.by_rank.iter().min_by_key(|(_, (used, _))| *used);
            let Some(&oldest) = oldest.map(|(r, _)| r) else {
                break;
            };
            if let Some((_, d)) = self.by_rank.remove(&oldest) {
                self.rows -= d.rows;
            }
        }
    }
}

/// What the view needs of a rank.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Want {
    /// The resident (coarsest) lanes.
    Top,
    Level(u32),
    Ops,
}

/// What a view of `width` columns needs of a rank whose coarsest bins are
/// `top` = (level, width): the coarsest level with bins at most
/// 1/`BINS_PER_COLUMN` of a column wide, or the ops when even the finest
/// are wider.
fn want(top: Option<(u32, Ns)>, view: Interval, width: u16) -> Want {
    let Some((top, top_len)) = top else {
        return Want::Top;
    };
    let most = view.len() / i64::from(width.max(1)) / BINS_PER_COLUMN;
    if top_len <= most {
        return Want::Top;
    }
    // Level l's bins are FACTOR^(top - l) times narrower than the top's.
    let mut len = top_len;
    for level in (0..top).rev() {
        len = len / FACTOR;
        if len <= most {
            return Want::Level(level);
        }
    }
    Want::Ops
}

/// A rank's lanes over `span`, and the ops when read.
struct Detail {
    span: Interval,
    want: Want,
    /// The rank's lane first, then its streams'.
    lanes: Vec<Arc<Lane>>,
    ops: Option<Vec<DeviceOp>>,
    /// Ops or bins read: what it costs to keep.
    rows: usize,
}

impl Paged {
    /// `top`: per rank, its coarsest bins' level and width.
    pub(crate) fn new(pages: Pages, top: Vec<Option<(u32, Ns)>>) -> Self {
        Self {
            pages,
            top,
            cache: Mutex::default(),
            on_screen: AtomicUsize::new(1),
            error: Mutex::default(),
        }
    }

    fn want(&self, rank_index: usize, view: Interval, width: u16) -> Want {
        want(self.top.get(rank_index).copied().flatten(), view, width)
    }

    /// Keeps `e` for the Timeline to show.
    pub(crate) fn fail(&self, e: String) {
        if let Ok(mut slot) = self.error.lock() {
            *slot = Some(e);
        }
    }

    pub(crate) fn error(&self) -> Option<String> {
        self.error.lock().ok()?.clone()
    }

    fn cached(&self, rank_index: usize, view: Interval, want: Want) -> Option<Arc<Detail>> {
        let mut cache = self.cache.lock().ok()?;
        let d = cache.get(rank_index)?;
        let inside = d.span.start <= view.start && view.end <= d.span.end;
        // Ops read for a wider view draw any narrower one exactly.
        let fits = d.want == want || (d.want == Want::Ops && want != Want::Top);
        (inside && fits).then(|| d.clone())
    }

    /// The rank's lanes for `view`, read (a view's width either side too,
    /// so a pan stays inside) unless kept.
    fn detail(
        &self,
        run: Run<'_>,
        rank_index: usize,
        view: Interval,
        want: Want,
    ) -> Option<Arc<Detail>> {
        if want == Want::Top {
            return None;
        }
        if let Some(d) = self.cached(rank_index, view, want) {
            return Some(d);
        }
        let span = Interval::new(
            view.start.saturating_sub(view.len()),
            view.end.saturating_add(view.len()),
        );
        match self.read(run, rank_index, span, want) {
            Ok(d) => {
                let d = Arc::new(d);
                if let Ok(mut cache) = self.cache.lock() {
                    cache.insert(rank_index, d.clone());
                }
                Some(d)
            }
            Err(e) => {
                self.fail(e);
                None
            }
        }
    }

    fn read(&self, run: Run<'_>, ri: usize, span: Interval, want: Want) -> Result<Detail, String> {
        let t = &run.trace.ranks[ri];
        let pages = self.pages.rank(ri).ok_or("no pages for the rank")?;
        // The rank's waits in the window, drawn as exactly as its lanes.
        let mut waits = run.last_starts.waits_of(t);
        waits.retain(|(_, w)| w.start < span.end && w.end > span.start);
        let waits = &waits;
        if want == Want::Ops {
            let max = max_rows(self.on_screen.load(Ordering::Relaxed));
            if let Some(mut ops) = pages.ops(t, span, max)? {
                share_meta(run, ri, &mut ops);
                let mut lanes = vec![Arc::new(Lane::of(
                    ri,
                    t.rank,
                    None,
                    ops.iter(),
                    wait_of(waits, None),
                ))];
                for (s, o) in crate::derive::lanes::by_stream(&ops) {
                    let wait = wait_of(waits, Some(s));
                    let lane = Lane::of(ri, t.rank, Some(s), o.iter().copied(), wait);
                    lanes.push(Arc::new(lane));
                }
                return Ok(Detail {
                    span,
                    want,
                    lanes,
                    rows: ops.len(),
                    ops: Some(ops),
                });
            }
        }
        // Too many ops in the window for them to be read: the finest bins.
        let level = match want {
            Want::Level(l) => l,
            _ => 0,
        };
        let bins = pages.bins(level, span)?;
        let (lane, streams) = bin_lanes(ri, t.rank, &bins, waits);
        let lanes = std::iter::once(lane).chain(streams).map(Arc::new).collect();
        Ok(Detail {
            span,
            want: Want::Level(level),
            lanes,
            rows: bins.len(),
            ops: None,
        })
    }

    pub(crate) fn shown<'a>(
        &self,
        run: Run<'_>,
        lane: &'a Lane,
        view: Interval,
        width: u16,
    ) -> Shown<'a> {
        let want = self.want(lane.rank_index, view, width);
        let Some(d) = self.detail(run, lane.rank_index, view, want) else {
            return Shown::Resident(lane);
        };
        match d.lanes.iter().find(|l| l.stream == lane.stream) {
            Some(l) => Shown::Detail(l.clone()),
            // A stream with nothing in the window.
            None => Shown::Detail(Arc::new(Lane {
                compute: Default::default(),
                comm: Default::default(),
                overlap: Default::default(),
                memory: Default::default(),
                busy: Default::default(),
                wait: Default::default(),
                ..*lane
            })),
        }
    }

    pub(crate) fn prefetch(&self, run: Run<'_>, views: &[(usize, Interval)], width: u16) {
        let mut todo: Vec<(usize, Interval, Want)> = views
            .iter()
            .map(|&(ri, v)| (ri, v, self.want(ri, v, width)))
            .filter(|&(ri, v, w)| w != Want::Top && self.cached(ri, v, w).is_none())
            .collect();
        let mut ranks: Vec<usize> = views.iter().map(|v| v.0).collect();
        ranks.sort_unstable();
        ranks.dedup();
        self.on_screen.store(ranks.len(), Ordering::Relaxed);
        todo.sort_by_key(|x| x.0);
        todo.dedup_by_key(|x| x.0);
        todo.par_iter().for_each(|&(ri, v, w)| {
            self.detail(run, ri, v, w);
        });
    }

    pub(crate) fn ops_in(
        &self,
        run: Run<'_>,
        ri: usize,
        stream: Option<u32>,
        view: Interval,
        max: usize,
    ) -> Option<Vec<DeviceOp>> {
        let keep = |o: &&DeviceOp| {
            o.start < view.end && o.end() > view.start && stream.is_none_or(|s| o.stream == s)
        };
        let kept = self.cached(ri, view, Want::Ops).filter(|d| d.ops.is_some());
        let ops: Vec<DeviceOp> = match kept {
            Some(d) => d.ops.iter().flatten().filter(keep).cloned().collect(),
            // A bounded ask (names for a lane) is served from what the view
            // read: had it read no ops, the view holds too many to name.
            None if max != usize::MAX => return None,
            None => {
                let pages = self.pages.rank(ri)?;
                match pages.ops(&run.trace.ranks[ri], view, MAX_ROWS) {
                    Ok(Some(mut ops)) => {
                        share_meta(run, ri, &mut ops);
                        ops.into_iter().filter(|o| keep(&o)).collect()
                    }
                    Ok(None) => return None,
                    Err(e) => {
                        self.fail(e);
                        return None;
                    }
                }
            }
        };
        (ops.len() <= max).then_some(ops)
    }

    pub(crate) fn visit(
        &self,
        run: Run<'_>,
        ri: usize,
        view: Interval,
        f: &mut dyn FnMut(&DeviceOp),
    ) -> Result<(), String> {
        let Some(pages) = self.pages.rank(ri) else {
            return Ok(());
        };
        pages.visit(&run.trace.ranks[ri], view, &mut |ops| {
            let mut ops = ops.to_vec();
            share_meta(run, ri, &mut ops);
            ops.iter()
                .filter(|o| o.start < view.end && o.end() > view.start)
                .for_each(&mut *f);
        })
    }
}

/// Gives a window's collectives the metadata their lean copies hold.
fn share_meta(run: Run<'_>, ri: usize, ops: &mut [DeviceOp]) {
    crate::summary::pages::share_meta(&run.trace.ranks[ri], ops);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn detail(rows: usize) -> Arc<Detail> {
        Arc::new(Detail {
            span: Interval::new(Ns(0), Ns(1)),
            want: Want::Ops,
            lanes: Vec::new(),
            ops: None,
            rows,
        })
    }

    /// Past the row budget the least recently used ranks go first; a rank
    /// read again replaces its old detail.
    #[test]
    fn kept_details_stay_within_the_row_budget_least_recently_used_first() {
        let mut k = Kept::default();
        let quarter = KEPT_ROWS / 4;
        for r in 0..4 {
            k.insert(r, detail(quarter));
        }
        assert_eq!(k.rows, KEPT_ROWS);
        assert!(k.get(0).is_some()); // 1 is now the least recently used
        k.insert(4, detail(quarter));
        assert!(k.by_rank.contains_key(&0) && !k.by_rank.contains_key(&1));
        assert_eq!(k.rows, KEPT_ROWS);
        k.insert(4, detail(1));
        assert_eq!(k.rows, 3 * quarter + 1);
        // One detail over the budget alone is kept (the screen needs it).
        k.insert(7, detail(2 * KEPT_ROWS));
        assert_eq!(k.by_rank.len(), 1);
        assert_eq!(k.rows, 2 * KEPT_ROWS);
        // Ranks on screen share the budget.
        assert_eq!(max_rows(1), MAX_ROWS);
        assert_eq!(max_rows(64), KEPT_ROWS / 64);
        assert_eq!(max_rows(0), MAX_ROWS);
    }

    #[test]
    fn a_view_wants_bins_a_sixteenth_of_a_column_wide_or_the_ops() {
        // Top level 2 with bins 1,600 ns wide: level 1 is 100, level 0 is 6.
        let top = Some((2, Ns(1_600)));
        let view = |len| Interval::new(Ns::ZERO, Ns(len));
        // 100 columns of 25,600 ns: bins up to 1,600 wide: the top ones.
        assert_eq!(want(top, view(2_560_000), 100), Want::Top);
        // Columns of 16,000: bins up to 1,000: level 1 (100).
        assert_eq!(want(top, view(1_600_000), 100), Want::Level(1));
        // Columns of 96: up to 6: level 0.
        assert_eq!(want(top, view(9_600), 100), Want::Level(0));
        // Columns of 80: bins of 6 are too wide: the ops.
        assert_eq!(want(top, view(8_000), 100), Want::Ops);
        // A rank with no op keeps its (empty) lanes.
        assert_eq!(want(None, view(2_000), 100), Want::Top);
    }
}
