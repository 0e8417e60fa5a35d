//! Clock sanity across ranks. Each rank's profiler stamps events with its own
//! host's clock: ranks whose clocks count from different epochs, or tick at
//! different rates, make every cross-rank timing (sync wait, arrival order, the
//! timeline) wrong. This finds both, from the raw clocks, and says what the
//! alignment on shared collectives did about it.

mod repeated_median;

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
    fit(samples, center(samples))
}

/// [`drift_ppm`] of samples whose [`center`] is `c`.
fn fit(samples: &[(Ns, Ns)], c: (Ns, Ns)) -> Option<f64> {
    repeated_median::repeated_median(&fitted(samples, c)?).map(|m| m * 1e6)
}

/// The samples' median offset, and their median deviation around it.
fn center(samples: &[(Ns, Ns)]) -> (Ns, Ns) {
    let mid = median(samples.iter().map(|x| x.1).collect());
    (
        mid,
        median(samples.iter().map(|x| (x.1 - mid).abs()).collect()),
    )
}

/// The samples the drift fit uses: those near the median offset, in time
/// order, at most [`MAX_FIT`] evenly spaced; `None` below 8 of them.
fn fitted(samples: &[(Ns, Ns)], (mid, spread): (Ns, Ns)) -> Option<Vec<(Ns, Ns)>> {
    if samples.len() < 8 {
        return None;
    }
    // Collectives that ended late on one rank are off the line by far more
    // than the clocks' jitter: left out, as the offset's median leaves them.
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
    drift_of(samples, center(samples))
}

/// [`drift`] of samples whose [`center`] is `c`.
fn drift_of(samples: &[(Ns, Ns)], c: (Ns, Ns)) -> Option<Drift> {
    let (ppm, spread) = (fit(samples, c)?, c.1);
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
    let c = center(samples);
    Some(Measured {
        samples: samples.len(),
        spread: c.1,
        drift: (c.1 <= SPREAD_LIMIT)
            .then(|| drift_of(samples, c))
            .flatten(),
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
