//! Clock sanity across ranks. Each rank's profiler stamps events with its own
//! host's clock: ranks whose clocks count from different epochs, or tick at
//! different rates, make every cross-rank timing (sync wait, arrival order, the
//! timeline) wrong. This finds both, from the raw clocks, and says what the
//! alignment on shared collectives did about it.

use super::collectives::{offsets_from, BySeq, Instances};
use super::time::{human, median, Ns};
use super::trace::Offset;
use super::trace::Trace;
use super::RankTimeline;

/// The first rank's end of each matched collective it took part in.
pub(crate) type RefEnds = BySeq<Ns>;

pub fn ref_ends(trace: &Trace, inst: &Instances) -> RefEnds {
    BySeq::of(inst, |i| {
        let (_, o) = i.pairs().find(|&(r, _)| r == 0)?;
        Some(trace.ranks[0].ops[o].end())
    })
}

/// For each collective `t` shares with the first rank, (the first rank's
/// end time, first rank's end − this rank's end), in op order.
pub fn samples_of(t: &RankTimeline, ends: &RefEnds) -> Vec<(Ns, Ns)> {
    let mut out = Vec::new();
    ends.walk(t, |op, ref_end| out.push((ref_end, ref_end - op.end())));
    out
}

/// Per rank (like `Trace::ranks`): [`samples_of`] each.
pub fn samples(trace: &Trace, inst: &Instances) -> Vec<Vec<(Ns, Ns)>> {
    let ends = ref_ends(trace, inst);
    trace.ranks.iter().map(|t| samples_of(t, &ends)).collect()
}

/// Samples a drift fit uses at most (evenly spaced in time order): the fit
/// compares every pair.
const MAX_FIT: usize = 1024;

/// Samples further from the median offset than 5 median deviations, and
/// than this, are collectives that ended late on one rank, not the clock.
const INLIER_FLOOR: Ns = Ns(10_000);

/// How much faster this rank's clock runs than the first rank's, in parts per
/// million: the slope of the offset over time, fitted as the offset is
/// found. The samples far off the median offset (beyond 5 median
/// deviations and 10 µs: collectives that ended late on one rank) are left
/// out, and the rest fitted by Siegel's repeated median (for each sample
/// the median slope to every other at least half the samples' span away,
/// then the median of those), which a bunch of late ones in one part of
/// the trace does not tilt, nor the jitter of collectives close together. A real drift
/// keeps its samples: its ends are about 2 median deviations off. `None`
/// below 8 samples.
pub fn drift_ppm(samples: &[(Ns, Ns)]) -> Option<f64> {
    let s = fitted(samples)?;
    // Only pairs at least half the samples' span apart: a slope between two
    // collectives a second apart is their ends' jitter over a second, and
    // where most collectives fall in the last second (a short profiled
    // window after a long start-up) those would decide the median.
    let baseline = (s[s.len() - 1].0 - s[0].0) / 2;
    let mut slopes = Vec::with_capacity(s.len());
    let mut per_sample = Vec::with_capacity(s.len());
    for &(ti, di) in &s {
        slopes.clear();
        // The offset falls as this rank's clock gains: (di - dj) / (tj - ti).
        let slope = |&(tj, dj): &(Ns, Ns)| ordered((di - dj).as_f64() / (tj - ti).as_f64());
        if baseline > Ns::ZERO {
            // Sorted by time, the samples far enough away are a head and a tail.
            let head = s.partition_point(|x| x.0 <= ti - baseline);
            let tail = s.partition_point(|x| x.0 < ti + baseline);
            slopes.extend(s[..head].iter().chain(&s[tail.max(head)..]).map(slope));
        } else {
            slopes.extend(s.iter().filter(|x| x.0 != ti).map(slope));
        }
        per_sample.extend(median_ordered(&mut slopes));
    }
    median_of(&mut per_sample).map(|m| m * 1e6)
}

/// The samples the drift fit uses: those near the median offset, in time
/// order, at most [`MAX_FIT`] evenly spaced; `None` below 8 of them.
fn fitted(samples: &[(Ns, Ns)]) -> Option<Vec<(Ns, Ns)>> {
    if samples.len() < 8 {
        return None;
    }
    // Collectives that ended late on one rank are off the line by far more
    // than the clocks' jitter: left out, as the offset's median leaves them.
    let mid = median(samples.iter().map(|x| x.1).collect());
    let spread = median(samples.iter().map(|x| (x.1 - mid).abs()).collect());
    let reach = (spread * 5).max(INLIER_FLOOR);
    let mut s: Vec<(Ns, Ns)> = samples
        .iter()
        .copied()
        .filter(|x| (x.1 - mid).abs() <= reach)
        .collect();
    if s.len() < 8 {
        return None;
    }
    s.sort_unstable();
    let every = s.len().div_ceil(MAX_FIT);
    Some(s.into_iter().step_by(every).collect())
}

/// `x` as an integer in `f64::total_cmp`'s order (the same bit trick): the
/// fit's million comparisons run on integers. [`unordered`] undoes it.
fn ordered(x: f64) -> i64 {
    let b = x.to_bits() as i64;
    b ^ ((((b >> 63) as u64) >> 1) as i64)
}

fn unordered(k: i64) -> f64 {
    f64::from_bits((k ^ ((((k >> 63) as u64) >> 1) as i64)) as u64)
}

/// [`median_of`] of values made by [`ordered`]: the same value, bit for bit.
fn median_ordered(v: &mut [i64]) -> Option<f64> {
    let n = v.len();
    if n == 0 {
        return None;
    }
    let (_, &mut hi, _) = v.select_nth_unstable(n / 2);
    if n % 2 == 1 {
        return Some(unordered(hi));
    }
    let lo = *v[..n / 2].iter().max()?;
    Some((unordered(lo) + unordered(hi)) / 2.0)
}

/// The median of `v` (mean of the middle two for an even count), reordering it.
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

/// Drift below this many ns of offset change over the trace is noise.
const DRIFT_FLOOR: Ns = Ns(5_000);

/// Matched collectives whose end times scatter more than this around the
/// offset are not a clock measurement.
const SPREAD_LIMIT: Ns = Ns(1_000_000);

/// A clock rate told apart from the scatter of the collectives' ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Drift {
    pub ppm: f64,
    /// What it changes the offset by over `span`.
    pub change: Ns,
    /// From the first sample to the last.
    pub span: Ns,
}

/// The drift of `samples` (see [`samples_of`]) where it is a measurement:
/// its change over their span beyond three times their scatter (median
/// deviation around the offset) and 5 µs; `None` otherwise, and below 8
/// samples.
pub fn drift(samples: &[(Ns, Ns)]) -> Option<Drift> {
    let ppm = drift_ppm(samples)?;
    let diffs: Vec<Ns> = samples.iter().map(|x| x.1).collect();
    let mid = median(diffs.clone());
    let spread = median(diffs.iter().map(|&d| (d - mid).abs()).collect());
    let span = samples.iter().map(|x| x.0).max()? - samples.iter().map(|x| x.0).min()?;
    let change = Ns::rounded(ppm * 1e-6 * span.as_f64());
    // The fit rests on few samples at one end as often as not: a change
    // within three times the scatter is not told apart from it.
    (change.abs() > DRIFT_FLOOR.max(spread * 3)).then_some(Drift { ppm, change, span })
}

/// What a rank's samples (see [`samples_of`]) say of its clock against the
/// first rank's, for [`check`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub samples: usize,
    /// The median deviation of the samples around their median offset.
    pub spread: Ns,
    /// `None` also where the spread says the samples are no clock
    /// measurement (beyond 1 ms).
    pub drift: Option<Drift>,
}

/// [`Measured`] of `samples`; `None` without any. The repeated-median fit
/// is quadratic in the samples (up to a thousand), so callers measure
/// ranks in parallel.
pub fn measure(samples: &[(Ns, Ns)]) -> Option<Measured> {
    if samples.is_empty() {
        return None;
    }
    let diffs: Vec<Ns> = samples.iter().map(|x| x.1).collect();
    let mid = median(diffs.clone());
    let spread = median(diffs.iter().map(|&d| (d - mid).abs()).collect());
    Some(Measured {
        samples: samples.len(),
        spread,
        drift: (spread <= SPREAD_LIMIT).then(|| drift(samples)).flatten(),
    })
}

/// What is wrong with the ranks' clocks, one line per finding; `measured`
/// gives each rank's [`Measured`] (indexed like `trace.ranks`; the first
/// rank's is not read), `offsets` are those alignment applied (`None`: not
/// aligned).
pub fn check(
    trace: &Trace,
    measured: &[Option<Measured>],
    offsets: Option<&[Offset]>,
) -> Vec<String> {
    let mut out = Vec::new();
    let Some(first) = trace.ranks.first() else {
        return out;
    };
    let Some(w0) = first.window else {
        return out;
    };
    for (i, t) in trace.ranks.iter().enumerate().skip(1) {
        let aligned_by = offsets
            .and_then(|o| o.get(i))
            .filter(|o| o.samples > 0)
            .map(|o| o.samples);
        if let Some(w) = t.window {
            // Traces of one run overlap in time; a gap longer than both traces
            // (and than a second) means another epoch, not a late start.
            let gap = w.start - w0.start;
            let longest = w.len().max(w0.len()).max(Ns(1_000_000_000));
            if gap.abs() > longest {
                let fix = match aligned_by {
                    Some(n) => format!("aligned on {n} shared collectives"),
                    None => "no shared collectives align them, so its cross-rank timings \
                             (sync wait, arrival order, the timeline) are not meaningful"
                        .into(),
                };
                out.push(format!(
                    "rank {}: its clock reads {} {} rank {}'s, more than either trace lasts \
                     (a different clock epoch); {fix}",
                    t.rank,
                    human(gap.abs()),
                    if gap > Ns::ZERO { "ahead of" } else { "behind" },
                    first.rank
                ));
            }
        }
        let Some(Measured {
            samples,
            spread,
            drift,
        }) = measured.get(i).copied().flatten()
        else {
            continue;
        };
        // Collectives end on all members within microseconds; a wide spread
        // means the matched calls are not the same ones (sampled traces,
        // point-to-point traffic), and then no drift can be read either.
        if spread > SPREAD_LIMIT {
            out.push(format!(
                "rank {}: the collectives matched with rank {}'s end ±{} apart (median deviation \
                 over {}), not together: they are probably not the same calls, so its clock \
                 offset and cross-rank timings are uncertain",
                t.rank,
                first.rank,
                human(spread),
                samples
            ));
            continue;
        }
        if let Some(Drift { ppm, change, span }) = drift {
            let fix = match aligned_by {
                Some(_) => format!(
                    "one offset is applied, so aligned times are off by up to {} at the ends",
                    human(change.abs() / 2)
                ),
                None => "the clocks were not aligned".into(),
            };
            out.push(format!(
                "rank {}: its clock runs {:.1} ppm {} against rank {}'s ({} over the {} \
                 its shared collectives span); {fix}",
                t.rank,
                ppm.abs(),
                if ppm > 0.0 { "fast" } else { "slow" },
                first.rank,
                human(change.abs()),
                human(span)
            ));
        }
    }
    out
}

/// Per-rank offsets relative to the first rank, from the end times of the
/// collectives each rank shares with it: the median of (reference end − rank
/// end), robust to the few collectives that end late on one rank. Ranks that
/// share no collective with the reference get offset 0 and no samples.
pub fn estimate_offsets(trace: &Trace, inst: &Instances) -> Vec<Offset> {
    offsets_from(trace, &samples(trace, inst))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fit as first written: every pair filtered, medians on floats.
    fn drift_ppm_plainly(samples: &[(Ns, Ns)]) -> Option<f64> {
        let s = fitted(samples)?;
        let baseline = (s[s.len() - 1].0 - s[0].0) / 2;
        let mut per_sample = Vec::new();
        for &(ti, di) in &s {
            let mut slopes: Vec<f64> = (s.iter())
                .filter(|&&(tj, _)| tj != ti && (tj - ti).abs() >= baseline)
                .map(|&(tj, dj)| (di - dj).as_f64() / (tj - ti).as_f64())
                .collect();
            per_sample.extend(median_of(&mut slopes));
        }
        median_of(&mut per_sample).map(|m| m * 1e6)
    }

    /// A small deterministic generator (xorshift): the samples need not be
    /// random, only varied.
    fn numbers(seed: u64) -> impl FnMut() -> u64 {
        let mut x = seed.max(1);
        move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        }
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

    /// The fit on integers over a head and a tail is the plain fit, bit for
    /// bit: with drift, late bunches, repeated times, more samples than it
    /// fits, and every sample at one time.
    #[test]
    fn the_fit_is_the_plain_fit_bit_for_bit() {
        let mut fitted = 0;
        for seed in 1..40u64 {
            let mut r = numbers(seed);
            let n = 8 + (r() % 3000) as usize;
            let ppm = (r() % 200) as f64 - 100.0;
            let mut s: Vec<(Ns, Ns)> = (0..n)
                .map(|i| {
                    // Times with repeats (several collectives end together).
                    let t = (i as i64 / (1 + (seed as i64 % 3))) * 1_000_000 + (r() % 50) as i64;
                    let late = if r().is_multiple_of(10) {
                        (r() % 500_000) as i64
                    } else {
                        0
                    };
                    let d = (ppm * 1e-6 * t as f64) as i64 + (r() % 2_000) as i64 - late;
                    (Ns(t), Ns(d))
                })
                .collect();
            if seed.is_multiple_of(7) {
                for x in &mut s {
                    x.0 = Ns(5);
                }
            }
            let got = drift_ppm(&s);
            fitted += usize::from(got.is_some());
            let want = drift_ppm_plainly(&s);
            assert_eq!(
                got.map(f64::to_bits),
                want.map(f64::to_bits),
                "seed {seed}: {got:?} {want:?}"
            );
        }
        assert!(fitted > 30, "{fitted} of 39 fitted");
    }
}
