//! The Timeline of a summary opened lean: each visible rank's lanes are
//! read for the view, from bins at most 1/16 of a column wide or, once
//! a window holds few enough ops, from the ops themselves (then exact),
//! and kept while the view stays inside what was read.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use rayon::prelude::*;

use crate::derive::lanes::{Bin, FACTOR};
use crate::model::{DeviceOp, Interval, Ns};
use crate::summary::pages::Pages;
use crate::tui::data::{bin_lanes, Data, Lane, Shown};

/// Most rows a window read decodes (4 row groups): past it, bins are drawn.
const MAX_ROWS: usize = 1 << 18;
/// Bins drawn are at most this fraction of a column wide: a column's share
/// is exact but for the bins at its two edges, each taken as covered
/// evenly, so it is off by at most 2/16 of the column.
const BINS_PER_COLUMN: i64 = 16;
/// Ranks whose finer lanes are kept (the screen shows fewer).
const KEPT: usize = 256;

pub struct Paged {
    pages: Pages,
    /// Per rank, the coarsest level stored and its bins' width (`None`: a
    /// rank with no op).
    top: Vec<Option<(u32, Ns)>>,
    cache: Mutex<HashMap<usize, Arc<Detail>>>,
    error: Mutex<Option<String>>,
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
}

impl Paged {
    pub fn new(pages: Pages, top: &[Vec<Bin>]) -> Self {
        let top = top
            .iter()
            .map(|bins| bins.first().map(|b| (b.level, b.len)))
            .collect();
        Self {
            pages,
            top,
            cache: Mutex::default(),
            error: Mutex::default(),
        }
    }

    fn want(&self, rank_index: usize, view: Interval, width: u16) -> Want {
        want(self.top.get(rank_index).copied().flatten(), view, width)
    }

    /// Keeps `e` for the Timeline to show.
    pub fn fail(&self, e: String) {
        if let Ok(mut slot) = self.error.lock() {
            *slot = Some(e);
        }
    }

    pub fn error(&self) -> Option<String> {
        self.error.lock().ok()?.clone()
    }

    fn cached(&self, rank_index: usize, view: Interval, want: Want) -> Option<Arc<Detail>> {
        let cache = self.cache.lock().ok()?;
        let d = cache.get(&rank_index)?;
        let inside = d.span.start <= view.start && view.end <= d.span.end;
        // Ops read for a wider view draw any narrower one exactly.
        let fits = d.want == want || (d.want == Want::Ops && want != Want::Top);
        (inside && fits).then(|| d.clone())
    }

    /// The rank's lanes for `view`, read (a view's width either side too,
    /// so a pan stays inside) unless kept.
    fn detail(
        &self,
        data: &Data,
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
        match self.read(data, rank_index, span, want) {
            Ok(d) => {
                let d = Arc::new(d);
                if let Ok(mut cache) = self.cache.lock() {
                    if cache.len() >= KEPT {
                        cache.clear();
                    }
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

    fn read(&self, data: &Data, ri: usize, span: Interval, want: Want) -> Result<Detail, String> {
        let t = &data.trace.ranks[ri];
        let pages = self.pages.rank(ri).ok_or("no pages for the rank")?;
        let waits = |stream: Option<u32>| {
            let lanes = std::iter::once(&data.lanes[ri]).chain(&data.stream_lanes);
            lanes
                .filter(|l| l.rank_index == ri && l.stream == stream)
                .map(|l| l.wait.clone())
                .next()
                .unwrap_or_default()
        };
        if want == Want::Ops {
            if let Some(mut ops) = pages.ops(t, span, MAX_ROWS)? {
                share_meta(data, ri, &mut ops);
                let mut lanes = vec![Arc::new(Lane::of(
                    ri,
                    t.rank,
                    None,
                    ops.iter(),
                    waits(None),
                ))];
                for (s, o) in crate::derive::lanes::by_stream(&ops) {
                    let lane = Lane::of(ri, t.rank, Some(s), o.iter().copied(), waits(Some(s)));
                    lanes.push(Arc::new(lane));
                }
                return Ok(Detail {
                    span,
                    want,
                    lanes,
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
        let (lane, streams) = bin_lanes(ri, t.rank, &bins, &[]);
        let mut lanes = vec![lane];
        lanes.extend(streams);
        let lanes = lanes
            .into_iter()
            .map(|mut l| {
                l.wait = waits(l.stream);
                Arc::new(l)
            })
            .collect();
        Ok(Detail {
            span,
            want: Want::Level(level),
            lanes,
            ops: None,
        })
    }

    pub fn shown<'a>(&self, data: &Data, lane: &'a Lane, view: Interval, width: u16) -> Shown<'a> {
        let want = self.want(lane.rank_index, view, width);
        let Some(d) = self.detail(data, lane.rank_index, view, want) else {
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
                wait: lane.wait.clone(),
                ..*lane
            })),
        }
    }

    pub fn prefetch(&self, data: &Data, views: &[(usize, Interval)], width: u16) {
        let mut todo: Vec<(usize, Interval, Want)> = views
            .iter()
            .map(|&(ri, v)| (ri, v, self.want(ri, v, width)))
            .filter(|&(ri, v, w)| w != Want::Top && self.cached(ri, v, w).is_none())
            .collect();
        todo.sort_by_key(|x| x.0);
        todo.dedup_by_key(|x| x.0);
        todo.par_iter().for_each(|&(ri, v, w)| {
            self.detail(data, ri, v, w);
        });
    }

    pub fn ops_in(
        &self,
        data: &Data,
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
                match pages.ops(&data.trace.ranks[ri], view, MAX_ROWS) {
                    Ok(Some(mut ops)) => {
                        share_meta(data, ri, &mut ops);
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

    pub fn visit(
        &self,
        data: &Data,
        ri: usize,
        view: Interval,
        f: &mut dyn FnMut(&DeviceOp),
    ) -> Result<(), String> {
        let Some(pages) = self.pages.rank(ri) else {
            return Ok(());
        };
        pages.visit(&data.trace.ranks[ri], view, &mut |ops| {
            let mut ops = ops.to_vec();
            share_meta(data, ri, &mut ops);
            ops.iter()
                .filter(|o| o.start < view.end && o.end() > view.start)
                .for_each(&mut *f);
        })
    }
}

/// Gives a window's collectives the metadata their lean copies hold (the
/// run's records shared, as the matching across ranks saw them).
fn share_meta(data: &Data, ri: usize, ops: &mut [DeviceOp]) {
    let lean = &data.trace.ranks[ri].ops;
    for o in ops.iter_mut().filter(|o| o.crosses_ranks()) {
        if let Some(i) = data.op_index(ri, o) {
            o.meta = lean[i].meta;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
