//! Siegel's repeated median of a rank's clock samples, found without
//! selecting every sample's median slope.
//!
//! The plain fit selects, for each of up to a thousand samples, the median
//! of its few hundred slopes: a division and several moves per slope, over
//! a quarter million per rank. Here the samples' medians are narrowed down
//! instead, as a selection narrows down values: a few samples' medians,
//! found exactly, give two bounds around the answer; every other sample's
//! slopes are only counted against the bounds, which says on which side of
//! them its median lies; the samples between the bounds are narrowed again,
//! and the last few have their medians found exactly. Every slope is the
//! plain fit's quotient, so the answer is the plain fit's, bit for bit.

use crate::time::Ns;

/// The median, over the time-sorted samples `s`, of each sample's median
/// slope (offset change per ns, falling as this rank's clock gains) to the
/// samples at least half the samples' span away (to every sample at
/// another time where all share one time); `None` where no sample has a
/// partner, and where times or offsets lie more than 2^51 ns (26 days)
/// apart, which no clock measurement does.
pub(super) fn repeated_median(s: &[(Ns, Ns)]) -> Option<f64> {
    let pairs = Pairs::of(s)?;
    let mut buf = Vec::with_capacity(s.len());
    // Samples that pair with none count for nothing, as in the plain fit.
    let cand: Vec<usize> = (0..s.len()).filter(|&i| pairs.count(i) > 0).collect();
    let n = cand.len();
    if n == 0 {
        return None;
    }
    let (lo, hi) = middle(n);
    let (k_lo, k_hi) = narrow(&pairs, cand, (lo, hi), &mut buf);
    Some(if lo == hi {
        unordered(k_hi)
    } else {
        (unordered(k_lo) + unordered(k_hi)) / 2.0
    })
}

/// The ranks of the middle two of `n` values (one, twice, for an odd `n`).
fn middle(n: usize) -> (usize, usize) {
    let hi = n / 2;
    (if n.is_multiple_of(2) { hi - 1 } else { hi }, hi)
}

/// Samples whose medians are found exactly to place the bounds in a round
/// (at most; an eighth of the candidates, and no fewer than 16).
const PROBES: usize = 48;
/// How many probes beyond the answer's estimated place each bound lies.
const MARGIN: usize = 4;
/// Candidates this few have their medians found exactly.
const FEW: usize = 96;

/// The keys ([`ordered`]) of the medians ranked `ranks.0` and `ranks.1`
/// among the candidates `cand`'s medians.
fn narrow(
    pairs: &Pairs,
    mut cand: Vec<usize>,
    mut ranks: (usize, usize),
    buf: &mut Vec<i64>,
) -> (i64, i64) {
    let mut margin = MARGIN;
    // The probes' medians, sorted, while the candidates stay the same.
    let mut probed: Option<Vec<i64>> = None;
    loop {
        let c = cand.len();
        if c <= FEW {
            return exact(pairs, &cand, ranks, buf);
        }
        let probes_n = (c / 8).clamp(16, PROBES);
        let probes = probed.get_or_insert_with(|| {
            let mut p: Vec<i64> = (0..probes_n)
                .map(|p| pairs.median_key(cand[p * c / probes_n], buf))
                .collect();
            p.sort_unstable();
            p
        });
        // Where the answer's ranks fall among the probes, widened.
        let at = |r: usize| r * probes_n / c;
        let (from, to) = (at(ranks.0).checked_sub(margin), at(ranks.1) + margin);
        let spanned = &probes[from.unwrap_or(0)..probes_n.min(to + 1)];
        if spanned.windows(2).filter(|w| w[0] != w[1]).count() < 2 {
            // Medians on one or two values here: one bound instead, which
            // sets the medians equal to it apart.
            margin = 0;
        }
        let (low, high) = if margin == 0 {
            (
                Bound::of(probes[at(ranks.0)]),
                Bound::of(probes[at(ranks.0)]),
            )
        } else {
            (
                from.map_or(Bound::BELOW_ALL, |p| Bound::of(probes[p])),
                probes.get(to).map_or(Bound::ABOVE_ALL, |&k| Bound::of(k)),
            )
        };
        let parts = split(pairs, &cand, &low, &high, buf);
        // Which part holds a rank, and its rank there.
        let place = |r: usize| {
            let (b, i) = (parts[0].len(), parts[1].len());
            match r {
                r if r < b => (0, r),
                r if r < b + i => (1, r - b),
                r => (2, r - b - i),
            }
        };
        let ((p0, r0), (p1, r1)) = (place(ranks.0), place(ranks.1));
        if p0 != p1 {
            // The two middle ranks of an even count, in two parts: each
            // found there.
            let met = low.key == high.key;
            let mut parts = parts.map(Some);
            let mut find = |p: usize, r: usize| match p {
                // Between bounds that meet, every median is theirs.
                1 if met => low.key,
                p => narrow(pairs, parts[p].take().expect("a part"), (r, r), buf).0,
            };
            return (find(p0, r0), find(p1, r1));
        }
        if p0 == 1 && low.key == high.key {
            // Bounds that meet: every median between them is theirs.
            return (low.key, low.key);
        }
        let next = parts.into_iter().nth(p0).expect("three parts");
        if next.len() == c {
            if margin == 0 {
                return exact(pairs, &cand, ranks, buf);
            }
            // No bound split them (medians on a few values): one bound at
            // the answer's estimated place, which splits them or meets it.
            margin = 0;
            continue;
        }
        (cand, ranks, probed) = (next, (r0, r1), None);
    }
}

/// The medians of `cand`, found exactly; the keys ranked `ranks`.
fn exact(pairs: &Pairs, cand: &[usize], ranks: (usize, usize), buf: &mut Vec<i64>) -> (i64, i64) {
    let mut keys: Vec<i64> = cand.iter().map(|&i| pairs.median_key(i, buf)).collect();
    let (_, &mut k_hi, _) = keys.select_nth_unstable(ranks.1);
    let k_lo = if ranks.0 == ranks.1 {
        k_hi
    } else {
        *keys[..ranks.1].iter().max().expect("two middle ranks")
    };
    (k_lo, k_hi)
}

/// The candidates whose medians lie below `low`, between the bounds
/// (inclusive), and above `high`.
fn split(
    pairs: &Pairs,
    cand: &[usize],
    low: &Bound,
    high: &Bound,
    buf: &mut Vec<i64>,
) -> [Vec<usize>; 3] {
    let (mut below, mut inside, mut above) = (Vec::new(), Vec::new(), Vec::new());
    for &i in cand {
        let m = pairs.count(i);
        // The median lies between the slopes ranked `m_lo` and `m_hi` (the
        // mean of two floats lies between them, signed zeros included).
        let (m_lo, m_hi) = middle(m);
        let (under, over) = pairs.counts(i, low, high);
        let part = if under > m_hi {
            &mut below
        } else if over >= m - m_lo {
            &mut above
        } else if under <= m_lo && over < m - m_hi {
            &mut inside
        } else {
            // The two middle slopes straddle a bound: their mean decides.
            match pairs.median_key(i, buf) {
                k if k < low.key => &mut below,
                k if k > high.key => &mut above,
                _ => &mut inside,
            }
        };
        part.push(i);
    }
    [below, inside, above]
}

/// A slope to compare with, as a value and as a key.
struct Bound {
    key: i64,
    val: f64,
}

impl Bound {
    /// Beyond every slope: a pair's is at most 2^52 ns over 1 ns.
    const BELOW_ALL: Bound = Bound::of_value(-1e30);
    const ABOVE_ALL: Bound = Bound::of_value(1e30);

    fn of(key: i64) -> Self {
        Bound {
            key,
            val: unordered(key),
        }
    }

    const fn of_value(val: f64) -> Self {
        Bound {
            key: ordered(val),
            val,
        }
    }
}

/// The samples as exact floats (times and offsets from the first sample's,
/// whole numbers of ns under 2^51, so that every difference the plain fit
/// takes in integers comes out the same), and how far apart a pair must be.
struct Pairs {
    t: Vec<f64>,
    d: Vec<f64>,
    reach: f64,
}

/// Beyond this many ns apart, a difference of two might not be exact.
const EXACT: i64 = 1 << 51;

impl Pairs {
    fn of(s: &[(Ns, Ns)]) -> Option<Self> {
        let &(t0, d0) = s.first()?;
        let rel = |x: Ns, x0: Ns| {
            (x.0.checked_sub(x0.0))
                .filter(|v| v.abs() <= EXACT)
                .map(|v| v as f64)
        };
        let t = s.iter().map(|x| rel(x.0, t0)).collect::<Option<Vec<_>>>()?;
        let d = s.iter().map(|x| rel(x.1, d0)).collect::<Option<Vec<_>>>()?;
        // Only pairs at least half the samples' span apart: a slope between
        // two collectives a second apart is their ends' jitter over a
        // second, and where most collectives fall in the last second (a
        // short profiled window after a long start-up) those would decide
        // the median. At least 1 ns: a sample never pairs with its own time.
        let span = (s[s.len() - 1].0 - t0).0;
        Some(Pairs {
            t,
            d,
            reach: (span / 2).max(1) as f64,
        })
    }

    /// The samples sample `i` pairs with, a head and a tail in time order:
    /// `..head` and `tail..`.
    #[inline]
    fn partners(&self, i: usize) -> (usize, usize) {
        let ti = self.t[i];
        let head = self.t.partition_point(|&t| t <= ti - self.reach);
        let tail = self.t.partition_point(|&t| t < ti + self.reach);
        (head, tail.max(head))
    }

    /// How many slopes sample `i` has.
    fn count(&self, i: usize) -> usize {
        let (head, tail) = self.partners(i);
        head + self.t.len() - tail
    }

    /// Sample `i`'s slopes, each given to `f`: head, then tail.
    #[inline(always)]
    fn each(&self, i: usize, mut f: impl FnMut(f64)) {
        let (head, tail) = self.partners(i);
        let (ti, di) = (self.t[i], self.d[i]);
        // The offset falls as this rank's clock gains: (di - dj) / (tj - ti).
        for r in [0..head, tail..self.t.len()] {
            for (&tj, &dj) in self.t[r.clone()].iter().zip(&self.d[r]) {
                f((di - dj) / (tj - ti));
            }
        }
    }

    /// How many of sample `i`'s slopes lie below `low`, and how many above
    /// `high` (in `f64::total_cmp`'s order).
    fn counts(&self, i: usize, low: &Bound, high: &Bound) -> (usize, usize) {
        let (mut under, mut over) = (0usize, 0usize);
        if low.val != 0.0 && high.val != 0.0 {
            // Away from zero, float order is total order: compared as
            // floats, which vectorizes.
            self.each(i, |s| {
                under += usize::from(s < low.val);
                over += usize::from(s > high.val);
            });
        } else {
            // A bound of zero tells -0.0 from 0.0 (the slope of equal
            // offsets, signed as its pair's order in time).
            self.each(i, |s| {
                let k = ordered(s);
                under += usize::from(k < low.key);
                over += usize::from(k > high.key);
            });
        }
        (under, over)
    }

    /// Sample `i`'s median slope as a key, found as the plain fit finds it.
    fn median_key(&self, i: usize, buf: &mut Vec<i64>) -> i64 {
        buf.clear();
        self.each(i, |s| buf.push(ordered(s)));
        let n = buf.len();
        let (_, &mut hi, _) = buf.select_nth_unstable(n / 2);
        if n % 2 == 1 {
            return hi;
        }
        let lo = *buf[..n / 2].iter().max().expect("an even count above 0");
        ordered((unordered(lo) + unordered(hi)) / 2.0)
    }
}

/// `x` as an integer in `f64::total_cmp`'s order (the same bit trick): the
/// fit's comparisons run on integers. [`unordered`] undoes it.
const fn ordered(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

fn unordered(k: i64) -> f64 {
    f64::from_bits((k ^ ((((k >> 63) as u64) >> 1) as i64)) as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fit as first written: every pair filtered, medians on floats.
    fn plainly(s: &[(Ns, Ns)]) -> Option<f64> {
        let baseline = (s[s.len() - 1].0 - s[0].0) / 2;
        let mut per_sample = Vec::new();
        for &(ti, di) in s {
            let mut slopes: Vec<f64> = (s.iter())
                .filter(|&&(tj, _)| tj != ti && (tj - ti).abs() >= baseline)
                .map(|&(tj, dj)| (di - dj).as_f64() / (tj - ti).as_f64())
                .collect();
            per_sample.extend(median_of(&mut slopes));
        }
        median_of(&mut per_sample)
    }

    fn median_of(v: &mut [f64]) -> Option<f64> {
        let n = v.len();
        if n == 0 {
            return None;
        }
        let (_, &mut hi, _) = v.select_nth_unstable_by(n / 2, f64::total_cmp);
        if n % 2 == 1 {
            return Some(hi);
        }
        let lo = v[..n / 2].iter().copied().max_by(f64::total_cmp)?;
        Some((lo + hi) / 2.0)
    }

    fn numbers(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed.max(1);
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
    }

    /// Whether the fit matches the plain one; whether it found a slope.
    fn same(s: &[(Ns, Ns)], what: &str) -> bool {
        let got = repeated_median(s);
        let want = plainly(s);
        assert_eq!(
            got.map(f64::to_bits),
            want.map(f64::to_bits),
            "{what}: {got:?} {want:?}"
        );
        got.is_some()
    }

    #[test]
    fn ordered_keys_sort_as_total_cmp_and_come_back_whole() {
        let v = [
            -f64::INFINITY,
            -1e300,
            -1.5,
            -0.0,
            0.0,
            f64::MIN_POSITIVE,
            2.5,
            1e300,
            f64::INFINITY,
        ];
        for a in v {
            assert_eq!(unordered(ordered(a)).to_bits(), a.to_bits());
            for b in v {
                assert_eq!(ordered(a).cmp(&ordered(b)), a.total_cmp(&b), "{a} {b}");
            }
        }
    }

    /// Bit for bit the plain fit's: jitter, drift, late bunches, repeated
    /// times, offsets a whole epoch away, every sample at one time, and
    /// offsets all alike (every slope a signed zero).
    #[test]
    fn narrowing_is_the_plain_fit_bit_for_bit() {
        let mut found = 0;
        for seed in 1..60u64 {
            let mut r = numbers(seed);
            let n = 2 + (r() % 1100) as usize;
            let ppm = (r() % 200) as f64 - 100.0;
            let jitter = [0, 1, 2_000, 40_000][(seed % 4) as usize];
            let epoch = if seed % 5 == 0 {
                1_700_000_000_000_000_000
            } else {
                0
            };
            let mut s: Vec<(Ns, Ns)> = (0..n)
                .map(|i| {
                    let t = (i as i64 / (1 + (seed as i64 % 3))) * 1_000_000 + (r() % 50) as i64;
                    let late = if r().is_multiple_of(10) {
                        (r() % 500_000) as i64
                    } else {
                        0
                    };
                    let noise = if jitter > 0 { (r() % jitter) as i64 } else { 0 };
                    let d = epoch + (ppm * 1e-6 * t as f64) as i64 + noise - late;
                    (Ns(t + epoch), Ns(d))
                })
                .collect();
            if seed.is_multiple_of(7) {
                for x in &mut s {
                    x.0 = Ns(5);
                }
            }
            s.sort_unstable();
            found += usize::from(same(&s, &format!("seed {seed}")));
        }
        assert!(found > 45, "{found} of 59 found a slope");
    }

    /// Medians at every kind of tie: offsets on a few values only, so that
    /// many samples share a median and the bounds meet.
    #[test]
    fn ties_are_the_plain_fit_bit_for_bit() {
        for seed in 1..30u64 {
            let mut r = numbers(seed);
            let n = 200 + (r() % 900) as usize;
            let s: Vec<(Ns, Ns)> = (0..n as i64)
                .map(|i| (Ns(i * 1_000), Ns((r() % (seed % 4 + 1)) as i64 * 7)))
                .collect();
            assert!(same(&s, &format!("ties, seed {seed}")));
        }
    }

    #[test]
    fn no_partner_is_none() {
        assert_eq!(repeated_median(&[(Ns(5), Ns(1)), (Ns(5), Ns(2))]), None);
        assert_eq!(repeated_median(&[]), None);
    }

    /// Samples 2^52 ns apart in time, or in offset, are no clock
    /// measurement: their differences might not be exact as floats.
    #[test]
    fn samples_weeks_apart_are_no_fit() {
        let far = 1i64 << 52;
        let s = [(Ns(0), Ns(0)), (Ns(10), Ns(1)), (Ns(20), Ns(far))];
        assert_eq!(repeated_median(&s), None);
        let s = [(Ns(0), Ns(0)), (Ns(10), Ns(1)), (Ns(far), Ns(2))];
        assert_eq!(repeated_median(&s), None);
        // Just within: the plain fit's answer.
        let near = 1i64 << 51;
        let s = [(Ns(0), Ns(0)), (Ns(10), Ns(1)), (Ns(near), Ns(2))];
        same(&s, "2^51 ns");
    }
}
