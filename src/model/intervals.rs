//! Interval arithmetic on half-open `[start, end)` nanosecond intervals: union,
//! intersection, subtraction and clipping. Every busy-time, overlap and exposed-time
//! number in the crate goes through this module and nowhere else.

use super::time::Ns;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Interval {
    pub start: Ns,
    pub end: Ns,
}

impl Interval {
    pub fn new(start: Ns, end: Ns) -> Self {
        Self { start, end }
    }

    pub fn len(&self) -> Ns {
        self.end - self.start
    }

    pub fn is_empty(&self) -> bool {
        self.end <= self.start
    }
}

/// A normalized set of intervals: sorted, non-empty, pairwise disjoint and not
/// touching. Constructing one is the only way to get the invariant, so every
/// operation below can rely on it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IntervalSet(Vec<Interval>);

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
        Self(out)
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

    /// Total covered length.
    pub fn total(&self) -> Ns {
        self.0.iter().map(Interval::len).sum()
    }

    /// Smallest interval containing the whole set.
    pub fn hull(&self) -> Option<Interval> {
        Some(Interval::new(self.0.first()?.start, self.0.last()?.end))
    }

    pub fn union(&self, other: &Self) -> Self {
        Self::from_unsorted(self.0.iter().chain(&other.0).copied().collect())
    }

    /// Time covered by both sets (a linear merge of two sorted lists).
    pub fn intersect(&self, other: &Self) -> Self {
        let (a, b) = (&self.0, &other.0);
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while i < a.len() && j < b.len() {
            let start = a[i].start.max(b[j].start);
            let end = a[i].end.min(b[j].end);
            if start < end {
                out.push(Interval::new(start, end));
            }
            if a[i].end < b[j].end {
                i += 1;
            } else {
                j += 1;
            }
        }
        Self(out)
    }

    /// Time covered by `self` and not by `other`.
    pub fn subtract(&self, other: &Self) -> Self {
        let b = &other.0;
        let mut out = Vec::new();
        let mut j = 0;
        for &iv in &self.0 {
            let mut start = iv.start;
            // Skip subtrahends that end before this interval starts.
            while j < b.len() && b[j].end <= start {
                j += 1;
            }
            let mut k = j;
            while k < b.len() && b[k].start < iv.end {
                if b[k].start > start {
                    out.push(Interval::new(start, b[k].start));
                }
                start = start.max(b[k].end);
                k += 1;
            }
            if start < iv.end {
                out.push(Interval::new(start, iv.end));
            }
        }
        Self(out)
    }

    /// Length of the intersection, without building it.
    pub fn overlap_len(&self, other: &Self) -> Ns {
        self.intersect(other).total()
    }
}

/// An [`IntervalSet`] with prefix sums, answering "how much of `[lo, hi)` is
/// covered" in O(log n), whatever the number of intervals inside: what a timeline
/// needs to draw each screen column of a million-event lane.
#[derive(Debug, Clone, Default)]
pub struct Coverage {
    set: IntervalSet,
    /// `prefix[i]` = total length of the first `i` intervals.
    prefix: Vec<Ns>,
}

impl Coverage {
    pub fn new(set: IntervalSet) -> Self {
        let mut prefix = Vec::with_capacity(set.0.len() + 1);
        let mut acc = 0;
        prefix.push(0);
        for i in &set.0 {
            acc += i.len();
            prefix.push(acc);
        }
        Self { set, prefix }
    }

    pub fn set(&self) -> &IntervalSet {
        &self.set
    }

    /// Length of `[lo, hi)` covered by the set.
    pub fn covered(&self, lo: Ns, hi: Ns) -> Ns {
        if hi <= lo {
            return 0;
        }
        let v = &self.set.0;
        // First interval ending after lo, first interval starting at or after hi.
        let a = v.partition_point(|i| i.end <= lo);
        let b = v.partition_point(|i| i.start < hi);
        if a >= b {
            return 0;
        }
        let mut total = self.prefix[b] - self.prefix[a];
        total -= (lo - v[a].start).max(0);
        total -= (v[b - 1].end - hi).max(0);
        total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn set(v: &[(Ns, Ns)]) -> IntervalSet {
        IntervalSet::from_unsorted(v.iter().map(|&(s, e)| Interval::new(s, e)).collect())
    }

    #[test]
    fn union_merges_overlapping_and_touching() {
        let s = set(&[(5, 8), (0, 2), (1, 3), (3, 4), (10, 10)]);
        assert_eq!(s, set(&[(0, 4), (5, 8)]));
        assert_eq!(s.total(), 7);
        assert_eq!(s.hull(), Some(Interval::new(0, 8)));
    }

    #[test]
    fn intersect_and_subtract_by_hand() {
        let comm = set(&[(0, 10), (20, 30)]);
        let compute = set(&[(5, 25)]);
        assert_eq!(comm.intersect(&compute), set(&[(5, 10), (20, 25)]));
        assert_eq!(comm.subtract(&compute), set(&[(0, 5), (25, 30)]));
        assert_eq!(compute.subtract(&comm), set(&[(10, 20)]));
        assert_eq!(comm.overlap_len(&compute), 10);
        assert!(set(&[]).subtract(&comm).is_empty());
        assert_eq!(comm.subtract(&set(&[])), comm);
    }

    /// Reference: a bitmap over a small integer domain.
    fn bitmap(v: &[(Ns, Ns)]) -> Vec<bool> {
        let mut m = vec![false; 64];
        for &(s, e) in v {
            for t in s.max(0)..e.min(64) {
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
            .map(|(t, _)| (t as Ns, t as Ns + 1))
            .collect::<Vec<_>>())
    }

    fn intervals() -> impl Strategy<Value = Vec<(Ns, Ns)>> {
        prop::collection::vec(
            (0i64..64, 0i64..20).prop_map(|(s, l)| (s, (s + l).min(64))),
            0..12,
        )
    }

    proptest! {
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
            prop_assert_eq!(sa.total(), ma.iter().filter(|x| **x).count() as Ns);
        }
    }

    #[test]
    fn coverage_of_a_window() {
        let c = Coverage::new(set(&[(10, 20), (30, 50), (60, 61)]));
        assert_eq!(c.covered(0, 100), 31);
        assert_eq!(c.covered(15, 35), 10);
        assert_eq!(c.covered(20, 30), 0);
        assert_eq!(c.covered(12, 14), 2);
        assert_eq!(c.covered(40, 40), 0);
        assert_eq!(c.covered(55, 61), 1);
    }

    proptest! {
        #[test]
        fn coverage_matches_intersection(
            v in proptest::collection::vec((0i64..200, 0i64..40), 0..30),
            lo in 0i64..250, len in 0i64..100,
        ) {
            let s = IntervalSet::from_unsorted(v.iter().map(|&(a, l)| Interval::new(a, a + l)).collect());
            let want = s.overlap_len(&IntervalSet::single(Interval::new(lo, lo + len)));
            prop_assert_eq!(Coverage::new(s).covered(lo, lo + len), want);
        }
    }
}
