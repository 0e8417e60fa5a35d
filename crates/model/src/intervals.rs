//! Interval arithmetic on half-open `[start, end)` nanosecond intervals: union,
//! intersection, subtraction and clipping. Every busy-time, overlap and exposed-time
//! number in the crate goes through this module and nowhere else.

use super::slab::Slab;
use super::time::Ns;

pub use super::interval::Interval;

/// A normalized set of intervals: sorted, non-empty, pairwise disjoint and not
/// touching. Constructing one is the only way to get the invariant, so every
/// operation below can rely on it. Held in memory, or spilled to a temporary
/// file (a lean rank's exposed communication, an interval per collective,
/// when the run's collectives are).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet(Slab<Interval>);

impl IntervalSet {
    /// Union of arbitrary (unsorted, overlapping, possibly empty) intervals.
    pub fn from_unsorted(mut v: Vec<Interval>) -> Self {
        v.retain(|i| !i.is_empty());
        v.sort_unstable_by_key(|i| (i.start, i.end));
        let mut out: Vec<Interval> = Vec::with_capacity(v.len());
        for i in v {
            match out.last_mut() {
                Some(last) if i.start <= last.end => last.end = last.end.max(i.end),
                _ => out.push(i),
            }
        }
        Self(out.into())
    }

    pub fn from_iter_unsorted(it: impl IntoIterator<Item = Interval>) -> Self {
        Self::from_unsorted(it.into_iter().collect())
    }

    pub fn single(i: Interval) -> Self {
        Self::from_unsorted(vec![i])
    }

    pub fn intervals(&self) -> &[Interval] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Moves the intervals to `to` (see `slab`); on an error they stay
    /// held.
    pub fn spill(&mut self, to: &dyn super::slab::Spill) -> std::io::Result<()> {
        self.0.spill(to)
    }

    pub fn is_spilled(&self) -> bool {
        self.0.is_spilled()
    }

    /// Moves the set by `d` (a clock offset), in place (a rank's exposed
    /// communication is an interval per collective): order and gaps are
    /// unchanged.
    pub fn shift(&mut self, d: Ns) {
        for i in &mut self.0 {
            *i = Interval::new(i.start + d, i.end + d);
        }
    }

    /// Covered length per bin `[origin + b·width, origin + (b+1)·width)`, in
    /// bin order, bins the set misses left out: what a view too wide to draw
    /// each interval shows of it. Work: intervals plus bins touched.
    pub fn per_bin(&self, origin: Ns, width: Ns) -> Vec<(i64, Ns)> {
        assert!(width > Ns::ZERO, "bins have a width");
        let mut out: Vec<(i64, Ns)> = Vec::new();
        for iv in &self.0 {
            let mut s = iv.start;
            while s < iv.end {
                let b = (s - origin).0.div_euclid(width.0);
                let e = iv.end.min(origin + width * (b + 1));
                match out.last_mut() {
                    Some((last, c)) if *last == b => *c += e - s,
                    _ => out.push((b, e - s)),
                }
                s = e;
            }
        }
        out
    }

    /// Total covered length.
    pub fn total(&self) -> Ns {
        self.0.iter().map(Interval::len).sum()
    }

    pub fn union(&self, other: &Self) -> Self {
        Self::from_unsorted(self.0.iter().chain(&other.0).copied().collect())
    }

    /// Time covered by both sets (a linear merge of two sorted lists).
    pub fn intersect(&self, other: &Self) -> Self {
        // Usually no more pieces than the smaller set: grown by doubling,
        // a rank's exposed communication was copied over and over.
        let mut out = Vec::with_capacity(self.0.len().min(other.0.len()));
        each_overlap(self.walk(), other.walk(), |i| out.push(i));
        Self(out.into())
    }

    /// Time covered by `self` and not by `other`.
    pub fn subtract(&self, other: &Self) -> Self {
        difference(self.walk(), other.walk())
    }

    /// The intervals in order, walked (the sets below take such walks).
    pub fn walk(&self) -> impl Iterator<Item = Interval> + '_ {
        self.0.iter().copied()
    }

    /// The set's own lengths, (whole, within `window`).
    pub fn lengths(&self, window: &Self) -> (Ns, Ns) {
        let mut m = Lengths::within(window);
        self.walk().for_each(|i| m.add(i));
        m.both()
    }

    /// Length of the intersection, without building it (a device's
    /// millions of ops within its steps' window were copied to be summed).
    pub fn overlap_len(&self, other: &Self) -> Ns {
        let mut sum = Ns::ZERO;
        each_overlap(self.walk(), other.walk(), |i| sum += i.len());
        sum
    }
}

// Below, a walk is the intervals of a set in order: sorted, disjoint and
// not touching.

/// `a` − `b`, built.
pub fn difference(
    a: impl Iterator<Item = Interval>,
    b: impl Iterator<Item = Interval>,
) -> IntervalSet {
    let mut out = Vec::new();
    each_difference(a, b, |i| out.push(i));
    IntervalSet(out.into())
}

/// Gives `f` each interval of the intersection of two walks, in order (a
/// linear merge).
fn each_overlap(
    a: impl Iterator<Item = Interval>,
    b: impl Iterator<Item = Interval>,
    mut f: impl FnMut(Interval),
) {
    let (mut a, mut b) = (a.peekable(), b.peekable());
    while let (Some(&x), Some(&y)) = (a.peek(), b.peek()) {
        let start = x.start.max(y.start);
        let end = x.end.min(y.end);
        if start < end {
            f(Interval::new(start, end));
        }
        if x.end < y.end {
            a.next();
        } else {
            b.next();
        }
    }
}

/// Gives `f` each interval of `a` − `b`, in order.
fn each_difference(
    a: impl Iterator<Item = Interval>,
    b: impl Iterator<Item = Interval>,
    mut f: impl FnMut(Interval),
) {
    let mut b = b.peekable();
    for iv in a {
        let mut start = iv.start;
        // Subtrahends that end before this interval starts.
        while b.next_if(|x| x.end <= start).is_some() {}
        while let Some(&x) = b.peek().filter(|x| x.start < iv.end) {
            if x.start > start {
                f(Interval::new(start, x.start));
            }
            start = start.max(x.end);
            // One that runs past this interval may cut the next one too.
            if x.end > iv.end {
                break;
            }
            b.next();
        }
        if start < iv.end {
            f(Interval::new(start, iv.end));
        }
    }
}

/// The lengths of a set given an interval at a time, in order and
/// disjoint: the whole, and the part within a window. What a rank's figures
/// need of the unions of its ops that they do not keep: a device's millions
/// of ops make sets of millions of intervals, built only to be summed.
pub struct Lengths<'w> {
    whole: Ns,
    within: Ns,
    window: Meeting<'w>,
}

impl<'w> Lengths<'w> {
    pub fn within(window: &'w IntervalSet) -> Self {
        Lengths {
            whole: Ns::ZERO,
            within: Ns::ZERO,
            window: Meeting::new(window),
        }
    }

    /// (whole, within the window).
    pub fn both(&self) -> (Ns, Ns) {
        (self.whole, self.within)
    }

    /// Adds an interval after (and apart from) those added before.
    pub fn add(&mut self, i: Interval) {
        self.whole += i.len();
        let within = &mut self.within;
        self.window.meet(i, |x| *within += x.len());
    }
}

/// A set met by intervals that come in order, disjoint: gives the overlaps
/// of each with the set, in a walk of both.
pub struct Meeting<'s> {
    set: &'s [Interval],
    /// The first of the set's intervals that can still meet what comes next.
    next: usize,
}

impl<'s> Meeting<'s> {
    pub fn new(set: &'s IntervalSet) -> Self {
        Self {
            set: &set.0,
            next: 0,
        }
    }

    /// Gives `f` each part of `i` the set covers, in order.
    pub fn meet(&mut self, i: Interval, mut f: impl FnMut(Interval)) {
        let s = self.set;
        while self.next < s.len() && s[self.next].end <= i.start {
            self.next += 1;
        }
        for x in s[self.next..].iter().take_while(|x| x.start < i.end) {
            f(Interval::new(x.start.max(i.start), x.end.min(i.end)));
        }
    }
}

/// Intervals given in order of their starts, merged as they come: each
/// merged one is given on once nothing later can extend it.
#[derive(Debug, Default)]
pub struct Merging {
    open: Option<Interval>,
}

impl Merging {
    /// Takes `i` (starting no earlier than those before); gives `out` the
    /// merged interval it closes, if any.
    pub fn push(&mut self, i: Interval, mut out: impl FnMut(Interval)) {
        if i.is_empty() {
            return;
        }
        match self.open {
            Some(o) if i.start <= o.end => {
                self.open = Some(Interval::new(o.start, o.end.max(i.end)))
            }
            Some(o) => {
                self.open = Some(i);
                out(o);
            }
            None => self.open = Some(i),
        }
    }

    /// Gives `out` the last merged interval.
    pub fn finish(&mut self, mut out: impl FnMut(Interval)) {
        if let Some(o) = self.open.take() {
            out(o);
        }
    }
}

/// An [`IntervalSet`] indexed to answer "how much of `[lo, hi)` is covered" with
/// a few memory reads, whatever the number of intervals inside: what a timeline
/// needs to draw each screen column of a million-event lane within a frame.
#[derive(Debug, Clone)]
pub enum Coverage {
    Exact(Exact),
    /// Known per time bin only (a summary's binned lanes).
    Binned(Binned),
}

impl Default for Coverage {
    fn default() -> Self {
        Self::Exact(Exact::default())
    }
}

/// Each interval, with prefix sums and a bucket index.
#[derive(Debug, Clone, Default)]
pub struct Exact {
    set: IntervalSet,
    /// `prefix[i]` = total length of the first `i` intervals.
    prefix: Vec<Ns>,
    /// Time buckets of `1 << shift` ns from `origin`, about one per interval:
    /// `first[j]` = how many intervals end at or before bucket `j` starts. A
    /// time is then searched for among the few intervals of its bucket rather
    /// than by bisecting the whole set (a cache miss a step on large lanes).
    origin: Ns,
    shift: u32,
    first: Vec<u32>,
}

/// Covered time per bin, taken as spread evenly over its bin: exact at bin
/// edges, a proportional share inside one.
#[derive(Debug, Clone)]
pub struct Binned {
    /// Each bin with any cover, in order, not overlapping.
    bins: Bins,
    /// `prefix[i]` = time covered in the first `i` bins.
    prefix: Vec<Ns>,
}

impl Default for Binned {
    fn default() -> Self {
        Self {
            bins: Bins::Free(Vec::new()),
            prefix: vec![Ns::ZERO],
        }
    }
}

/// Where the bins are: cells of one grid (a summary's bins of one level),
/// 4 bytes each where (start, end) took 16, or any intervals.
#[derive(Debug, Clone)]
enum Bins {
    Grid {
        origin: Ns,
        width: Ns,
        cells: Vec<u32>,
    },
    Free(Vec<Interval>),
}

impl Bins {
    /// The grid `bins` lie on (`origin` the first's start, every one
    /// `width` long and a whole number of widths from it, within u32
    /// cells), or `None`.
    fn grid(bins: &[Interval]) -> Option<Self> {
        let first = bins.first()?;
        let (origin, width) = (first.start, first.len());
        if width <= Ns::ZERO {
            return None;
        }
        let cells = bins
            .iter()
            .map(|b| {
                let off = b.start.get().checked_sub(origin.get())?;
                if b.len() != width || off % width.get() != 0 {
                    return None;
                }
                u32::try_from(off / width.get()).ok()
            })
            .collect::<Option<Vec<u32>>>()?;
        Some(Self::Grid {
            origin,
            width,
            cells,
        })
    }

    fn get(&self, i: usize) -> Option<Interval> {
        match self {
            Self::Grid {
                origin,
                width,
                cells,
            } => cells.get(i).map(|&c| {
                // No overflow: `grid` took the cells from real bins.
                let start = *origin + Ns(i64::from(c) * width.get());
                Interval::new(start, start + *width)
            }),
            Self::Free(bins) => bins.get(i).copied(),
        }
    }

    /// How many bins end at or before `t`.
    fn ended_by(&self, t: Ns) -> usize {
        match self {
            Self::Grid {
                origin,
                width,
                cells,
            } => {
                // Cell c ends at origin + (c + 1) × width <= t.
                let whole = t.get().saturating_sub(origin.get()).div_euclid(width.get());
                cells.partition_point(|&c| i64::from(c) < whole)
            }
            Self::Free(bins) => bins.partition_point(|b| b.end <= t),
        }
    }
}

impl Binned {
    fn upto(&self, t: Ns) -> Ns {
        let i = self.bins.ended_by(t);
        let before = self.prefix[i];
        match self.bins.get(i) {
            Some(b) if t > b.start => {
                let covered = self.prefix[i + 1] - before;
                let share = i128::from((t - b.start).get()) * i128::from(covered.get())
                    / i128::from(b.len().max(Ns(1)).get());
                before + Ns(share as i64)
            }
            _ => before,
        }
    }

    /// Whether its bins are held as cells of one grid.
    #[cfg(test)]
    fn on_grid(&self) -> bool {
        matches!(self.bins, Bins::Grid { .. })
    }
}

impl Coverage {
    pub fn new(set: IntervalSet) -> Self {
        Self::Exact(Exact::new(set))
    }

    /// Coverage from `(bin, time covered in it)` pairs: bins in order, not
    /// overlapping, each covered at most its length (more is capped).
    pub fn binned(bins: impl IntoIterator<Item = (Interval, Ns)>) -> Self {
        let mut kept: Vec<Interval> = Vec::new();
        let mut prefix = vec![Ns::ZERO];
        let mut acc = Ns::ZERO;
        for (bin, covered) in bins {
            let covered = covered.clamp(Ns::ZERO, bin.len());
            if covered == Ns::ZERO || kept.last().is_some_and(|l| l.end > bin.start) {
                continue;
            }
            acc += covered;
            kept.push(bin);
            prefix.push(acc);
        }
        prefix.shrink_to_fit();
        let bins = Bins::grid(&kept).unwrap_or(Bins::Free(kept));
        Self::Binned(Binned { bins, prefix })
    }

    /// Length covered before `t`, i.e. of `(-inf, t)`.
    pub(crate) fn upto(&self, t: Ns) -> Ns {
        match self {
            Self::Exact(e) => e.upto(t),
            Self::Binned(b) => b.upto(t),
        }
    }

    /// Length of `[lo, hi)` covered by the set.
    pub fn covered(&self, lo: Ns, hi: Ns) -> Ns {
        if hi <= lo {
            return Ns::ZERO;
        }
        self.upto(hi) - self.upto(lo)
    }

    /// Covered length of each `[lo, hi)` of `slices`. Where a slice starts at the
    /// previous one's end, as screen columns do, that edge is looked up once.
    pub fn covered_slices(&self, slices: &[(Ns, Ns)]) -> Vec<Ns> {
        let mut last: Option<(Ns, Ns)> = None;
        slices
            .iter()
            .map(|&(lo, hi)| {
                if hi <= lo {
                    return Ns::ZERO;
                }
                let from = match last {
                    Some((t, c)) if t == lo => c,
                    _ => self.upto(lo),
                };
                let to = self.upto(hi);
                last = Some((hi, to));
                to - from
            })
            .collect()
    }
}

impl Exact {
    fn new(set: IntervalSet) -> Self {
        let v = &set.0;
        let mut prefix = Vec::with_capacity(v.len() + 1);
        let mut acc = Ns::ZERO;
        prefix.push(acc);
        for i in v {
            acc += i.len();
            prefix.push(acc);
        }
        let (origin, shift, first) = match (v.first(), v.last()) {
            (Some(a), Some(z)) => {
                let span = i128::from(z.end.get()) - i128::from(a.start.get());
                let n = v.len() as i128;
                let mut shift = 0;
                while span >> shift > n {
                    shift += 1;
                }
                let buckets = ((span - 1) >> shift) as usize + 1;
                let mut first = Vec::with_capacity(buckets + 1);
                let mut i = 0;
                for j in 0..=buckets {
                    let t = i128::from(a.start.get()) + ((j as i128) << shift);
                    while i < v.len() && i128::from(v[i].end.get()) <= t {
                        i += 1;
                    }
                    first.push(i as u32);
                }
                (a.start, shift, first)
            }
            _ => (Ns::ZERO, 0, Vec::new()),
        };
        Self {
            set,
            prefix,
            origin,
            shift,
            first,
        }
    }

    fn upto(&self, t: Ns) -> Ns {
        let v = &self.set.0;
        let Some(last) = v.last() else {
            return Ns::ZERO;
        };
        if t <= self.origin {
            return Ns::ZERO;
        }
        if t >= last.end {
            return self.prefix[v.len()];
        }
        let j = ((t - self.origin).get() >> self.shift) as usize;
        let (a, b) = (self.first[j] as usize, self.first[j + 1] as usize);
        // Intervals before `a` end before bucket j starts; from `b` on they end
        // after it ends (so after t): the one holding or following t is in a..=b.
        let i = a + v[a..b].partition_point(|iv| iv.end <= t);
        self.prefix[i] + (t - v[i].start).max(Ns::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(v: &[(Ns, Ns)]) -> IntervalSet {
        IntervalSet::from_unsorted(v.iter().map(|&(s, e)| Interval::new(s, e)).collect())
    }

    /// A set spilled to a file is the held one: [0, 4) and [5, 8) against
    /// [3, 6): intersection [3, 4) + [5, 6), difference [0, 3) + [6, 8);
    /// shifted in place through the map; copied as a held set.
    #[test]
    fn a_spilled_set_is_the_held_one() {
        let held = set(&[(Ns::ZERO, Ns(4)), (Ns(5), Ns(8))]);
        let mut s = held.clone();
        s.spill(&crate::slab::ASIDE).unwrap();
        assert!(s.is_spilled() && !held.is_spilled());
        assert_eq!(s, held);
        let other = set(&[(Ns(3), Ns(6))]);
        assert_eq!(s.intersect(&other), set(&[(Ns(3), Ns(4)), (Ns(5), Ns(6))]));
        assert_eq!(other.intersect(&s), s.intersect(&other));
        assert_eq!(
            s.subtract(&other),
            set(&[(Ns::ZERO, Ns(3)), (Ns(6), Ns(8))])
        );
        assert_eq!(s.overlap_len(&other), Ns(2));
        s.shift(Ns(10));
        assert!(s.is_spilled());
        assert_eq!(s, set(&[(Ns(10), Ns(14)), (Ns(15), Ns(18))]));
        assert!(!s.clone().is_spilled());
        // An empty set has nothing to spill.
        let mut e = IntervalSet::default();
        e.spill(&crate::slab::ASIDE).unwrap();
        assert!(!e.is_spilled());
    }

    /// [0, 4) and [5, 8) moved back 3: [-3, 1) and [2, 5), same length.
    #[test]
    fn a_shift_moves_every_interval() {
        let mut s = set(&[(Ns::ZERO, Ns(4)), (Ns(5), Ns(8))]);
        s.shift(Ns(-3));
        assert_eq!(s, set(&[(Ns(-3), Ns(1)), (Ns(2), Ns(5))]));
        assert_eq!(s.total(), Ns(7));
    }

    #[test]
    fn union_merges_overlapping_and_touching() {
        let s = set(&[
            (Ns(5), Ns(8)),
            (Ns::ZERO, Ns(2)),
            (Ns(1), Ns(3)),
            (Ns(3), Ns(4)),
            (Ns(10), Ns(10)),
        ]);
        assert_eq!(s, set(&[(Ns::ZERO, Ns(4)), (Ns(5), Ns(8))]));
        assert_eq!(s.total(), Ns(7));
    }

    #[test]
    fn per_bin_splits_at_bin_edges() {
        // Bins of 10 from 5: [5,15) [15,25) [25,35) ...; [7,18) gives 8 and 3,
        // [20,22) 2 more in the second bin, [50,51) 1 in bin 4, and [-5,0)
        // falls in bin -1 ([-5,5)).
        let s = set(&[
            (Ns(7), Ns(18)),
            (Ns(20), Ns(22)),
            (Ns(50), Ns(51)),
            (Ns(-5), Ns::ZERO),
        ]);
        assert_eq!(
            s.per_bin(Ns(5), Ns(10)),
            vec![(-1, Ns(5)), (0, Ns(8)), (1, Ns(5)), (4, Ns(1))]
        );
        // One long interval over three bins.
        assert_eq!(
            set(&[(Ns::ZERO, Ns(25))]).per_bin(Ns::ZERO, Ns(10)),
            vec![(0, Ns(10)), (1, Ns(10)), (2, Ns(5))]
        );
        assert!(IntervalSet::default().per_bin(Ns::ZERO, Ns(1)).is_empty());
    }

    #[test]
    fn intersect_and_subtract_by_hand() {
        let comm = set(&[(Ns::ZERO, Ns(10)), (Ns(20), Ns(30))]);
        let compute = set(&[(Ns(5), Ns(25))]);
        assert_eq!(
            comm.intersect(&compute),
            set(&[(Ns(5), Ns(10)), (Ns(20), Ns(25))])
        );
        assert_eq!(
            comm.subtract(&compute),
            set(&[(Ns::ZERO, Ns(5)), (Ns(25), Ns(30))])
        );
        assert_eq!(compute.subtract(&comm), set(&[(Ns(10), Ns(20))]));
        assert_eq!(comm.overlap_len(&compute), Ns(10));
        assert!(set(&[]).subtract(&comm).is_empty());
        assert_eq!(comm.subtract(&set(&[])), comm);
    }

    /// Reference: a bitmap over a small integer domain.
    fn bitmap(v: &[(Ns, Ns)]) -> Vec<bool> {
        let mut m = vec![false; 64];
        for &(s, e) in v {
            for t in s.get().max(0)..e.get().min(64) {
                m[t as usize] = true;
            }
        }
        m
    }

    fn from_bitmap(m: &[bool]) -> IntervalSet {
        set(&m
            .iter()
            .enumerate()
            .filter(|(_, &b)| b)
            .map(|(t, _)| (Ns(t as i64), Ns(t as i64 + 1)))
            .collect::<Vec<_>>())
    }

    fn intervals() -> impl Strategy<Value = Vec<(Ns, Ns)>> {
        prop::collection::vec(
            (0i64..64, 0i64..20).prop_map(|(s, l)| (Ns(s), Ns((s + l).min(64)))),
            0..12,
        )
    }

    proptest! {
        /// Merged as they come in order of their starts, or met in a walk:
        /// the sets built.
        #[test]
        fn merging_and_meeting_are_the_sets_built(a in intervals(), b in intervals()) {
            let mut sorted: Vec<Interval> = a.iter().map(|&(s, e)| Interval::new(s, e)).collect();
            sorted.sort_by_key(|i| i.start);
            let (mut merging, mut merged) = (Merging::default(), Vec::new());
            for &i in &sorted {
                merging.push(i, |m| merged.push(m));
            }
            merging.finish(|m| merged.push(m));
            let (sa, sb) = (set(&a), set(&b));
            prop_assert_eq!(&merged[..], sa.intervals());
            let mut meeting = Meeting::new(&sb);
            let mut met = Vec::new();
            for &i in sa.intervals() {
                meeting.meet(i, |x| met.push(x));
            }
            let both = sa.intersect(&sb);
            prop_assert_eq!(&met[..], both.intervals());
            prop_assert_eq!(difference(sa.walk(), sb.walk()), sa.subtract(&sb));
        }

        #[test]
        fn operations_match_bitmap(a in intervals(), b in intervals()) {
            let (ma, mb) = (bitmap(&a), bitmap(&b));
            let (sa, sb) = (set(&a), set(&b));
            let and: Vec<bool> = ma.iter().zip(&mb).map(|(x, y)| *x && *y).collect();
            let or: Vec<bool> = ma.iter().zip(&mb).map(|(x, y)| *x || *y).collect();
            let minus: Vec<bool> = ma.iter().zip(&mb).map(|(x, y)| *x && !*y).collect();
            prop_assert_eq!(sa.intersect(&sb), from_bitmap(&and));
            prop_assert_eq!(sa.union(&sb), from_bitmap(&or));
            prop_assert_eq!(sa.subtract(&sb), from_bitmap(&minus));
            prop_assert_eq!(sa.total(), Ns(ma.iter().filter(|x| **x).count() as i64));
        }
    }

    #[test]
    fn binned_coverage_spreads_each_bin_evenly() {
        // Bins [0,10) covered 4, [10,20) empty, [20,30) covered 10, [30,40)
        // claiming 15 (capped at 10), and [35,45) overlapping it (dropped).
        let iv = |a, b| Interval::new(Ns(a), Ns(b));
        let c = Coverage::binned([
            (iv(0, 10), Ns(4)),
            (iv(10, 20), Ns::ZERO),
            (iv(20, 30), Ns(10)),
            (iv(30, 40), Ns(15)),
            (iv(35, 45), Ns(5)),
        ]);
        assert_eq!(c.covered(Ns(-5), Ns(100)), Ns(24));
        // Half of the first bin: half its 4; a quarter: 1.
        assert_eq!(c.covered(Ns::ZERO, Ns(5)), Ns(2));
        assert_eq!(c.covered(Ns(5), Ns(25)), Ns(2 + 5));
        assert_eq!(c.covered(Ns(10), Ns(20)), Ns::ZERO);
        assert_eq!(c.upto(Ns(35)), Ns(4 + 10 + 5));
        let slices = [(0, 10), (10, 30), (30, 45)].map(|(a, b)| (Ns(a), Ns(b)));
        assert_eq!(c.covered_slices(&slices), [4, 10, 10].map(Ns));
        assert_eq!(Coverage::binned([]).covered(Ns::ZERO, Ns(9)), Ns::ZERO);
        // Every kept bin is 10 long and on the grid from 0: held as cells.
        assert!(matches!(&c, Coverage::Binned(b) if b.on_grid()));
    }

    /// Bins off one grid (of two lengths here, then one shifted off the
    /// cells) are held as they are and answer alike: [0,10) covered 4,
    /// [20,40) covered 10, then [45,55) covered 5.
    #[test]
    fn binned_coverage_off_a_grid() {
        let iv = |a, b| Interval::new(Ns(a), Ns(b));
        let c = Coverage::binned([
            (iv(0, 10), Ns(4)),
            (iv(20, 40), Ns(10)),
            (iv(45, 55), Ns(5)),
        ]);
        assert!(matches!(&c, Coverage::Binned(b) if !b.on_grid()));
        assert_eq!(c.covered(Ns(-5), Ns(100)), Ns(19));
        assert_eq!(c.covered(Ns(5), Ns(30)), Ns(2 + 5));
        assert_eq!(c.upto(Ns(50)), Ns(4 + 10 + 2));
        let g = Coverage::binned([(iv(0, 10), Ns(4)), (iv(40, 50), Ns(6))]);
        assert!(matches!(&g, Coverage::Binned(b) if b.on_grid()));
        assert_eq!(g.covered(Ns(5), Ns(45)), Ns(2 + 3));
        assert_eq!(g.upto(Ns(-1)), Ns::ZERO);
        assert_eq!(g.upto(Ns(50)), Ns(10));
    }

    #[test]
    fn coverage_of_a_window() {
        let c = Coverage::new(set(&[(Ns(10), Ns(20)), (Ns(30), Ns(50)), (Ns(60), Ns(61))]));
        assert_eq!(c.covered(Ns::ZERO, Ns(100)), Ns(31));
        assert_eq!(c.covered(Ns(15), Ns(35)), Ns(10));
        assert_eq!(c.covered(Ns(20), Ns(30)), Ns::ZERO);
        assert_eq!(c.covered(Ns(12), Ns(14)), Ns(2));
        assert_eq!(c.covered(Ns(40), Ns(40)), Ns::ZERO);
        assert_eq!(c.covered(Ns(55), Ns(61)), Ns(1));
        assert_eq!(c.upto(Ns(35)), Ns(15));
        let slices =
            [(0, 15), (15, 35), (35, 100), (12, 14), (14, 14)].map(|(a, b)| (Ns(a), Ns(b)));
        assert_eq!(c.covered_slices(&slices), [5, 10, 16, 2, 0].map(Ns));
    }

    #[test]
    fn coverage_of_epoch_times_and_sparse_sets() {
        // Unix-epoch nanoseconds, intervals far apart: buckets of 2^k ns must
        // neither overflow nor lose an interval.
        let t0: Ns = Ns(1_700_000_000_000_000_000);
        let c = Coverage::new(set(&[
            (t0, t0 + Ns(10)),
            (t0 + Ns(1_000_000_000_000), t0 + Ns(1_000_000_000_007)),
        ]));
        assert_eq!(c.covered(t0 - Ns(5), t0 + Ns(5)), Ns(5));
        assert_eq!(c.covered(t0 + Ns(5), t0 + Ns(1_000_000_000_003)), Ns(8));
        assert_eq!(c.upto(Ns::MAX), Ns(17));
        assert_eq!(c.upto(Ns::MIN), Ns::ZERO);
        let one = Coverage::new(set(&[(Ns(3), Ns(4))]));
        assert_eq!(
            one.covered_slices(&[(Ns::ZERO, Ns(3)), (Ns(3), Ns(4)), (Ns(4), Ns(9))]),
            [0, 1, 0].map(Ns)
        );
        assert_eq!(
            Coverage::new(set(&[])).covered_slices(&[(Ns::ZERO, Ns(5))]),
            [Ns::ZERO]
        );
    }

    proptest! {
        #[test]
        fn overlap_len_is_the_intersections_length(
            a in proptest::collection::vec((-100i64..200, 0i64..60), 0..30),
            b in proptest::collection::vec((-100i64..200, 0i64..60), 0..30),
        ) {
            let set = |v: &[(i64, i64)]| IntervalSet::from_unsorted(
                v.iter().map(|&(a, l)| Interval::new(Ns(a), Ns(a + l))).collect(),
            );
            let (a, b) = (set(&a), set(&b));
            prop_assert_eq!(a.overlap_len(&b), a.intersect(&b).total());
            prop_assert_eq!(a.overlap_len(&b), b.overlap_len(&a));
            // A set's lengths, whole and within `b` as a window.
            prop_assert_eq!(a.lengths(&b), (a.total(), a.overlap_len(&b)));
        }

        #[test]
        fn per_bin_matches_intersection(
            v in proptest::collection::vec((-100i64..200, 0i64..60), 0..30),
            origin in -50i64..50, width in 1i64..40,
        ) {
            let s = IntervalSet::from_unsorted(v.iter().map(|&(a, l)| Interval::new(Ns(a), Ns(a + l))).collect());
            let bins = s.per_bin(Ns(origin), Ns(width));
            prop_assert!(bins.windows(2).all(|w| w[0].0 < w[1].0));
            for &(b, c) in &bins {
                let lo = origin + b * width;
                let bin = IntervalSet::single(Interval::new(Ns(lo), Ns(lo + width)));
                prop_assert!(c > Ns::ZERO);
                prop_assert_eq!(c, s.overlap_len(&bin));
            }
            prop_assert_eq!(bins.iter().map(|b| b.1).sum::<Ns>(), s.total());
        }
    }

    proptest! {
        #[test]
        fn coverage_matches_intersection(
            v in proptest::collection::vec((0i64..200, 0i64..40), 0..30),
            lo in 0i64..250, len in 0i64..100,
        ) {
            let s = IntervalSet::from_unsorted(v.iter().map(|&(a, l)| Interval::new(Ns(a), Ns(a + l))).collect());
            let want = s.overlap_len(&IntervalSet::single(Interval::new(Ns(lo), Ns(lo + len))));
            let c = Coverage::new(s.clone());
            prop_assert_eq!(c.covered(Ns(lo), Ns(lo + len)), want);
            prop_assert_eq!(c.upto(Ns(lo)), s.overlap_len(&IntervalSet::single(Interval::new(Ns(-1), Ns(lo)))));
        }

        #[test]
        fn coverage_slices_match_windows(
            v in proptest::collection::vec((0i64..2000, 0i64..40), 0..300),
            mut edges in proptest::collection::vec(-10i64..2100, 2..40),
        ) {
            edges.sort_unstable();
            let s = IntervalSet::from_unsorted(v.iter().map(|&(a, l)| Interval::new(Ns(a), Ns(a + l))).collect());
            let slices: Vec<(Ns, Ns)> = edges.windows(2).map(|w| (Ns(w[0]), Ns(w[1]))).collect();
            let want: Vec<Ns> = slices
                .iter()
                .map(|&(lo, hi)| s.overlap_len(&IntervalSet::single(Interval::new(lo, hi))))
                .collect();
            prop_assert_eq!(Coverage::new(s).covered_slices(&slices), want);
        }
    }
}
