//! What the SM-coverage metrics need of a rank's kernels.

use crate::model::{Ns, RankTimeline};

/// Kernels of a rank with known SM coverage, summed as the SM-coverage metrics
/// need them (a few numbers per rank, so they can be kept with the rank's stats).
#[derive(Debug, Clone, Copy, Default)]
pub struct SmCoverage {
    /// Summed duration.
    pub total: Ns,
    /// Σ duration × coverage.
    pub weighted: f64,
    /// Duration of kernels over 70 % of the SMs and longer than the median kernel.
    pub compute_bound: Ns,
    /// Duration of kernels under 50 % of the SMs.
    pub memory_bound: Ns,
}

impl SmCoverage {
    pub(crate) fn of(t: &RankTimeline) -> Self {
        let covered =
            || (t.kernels()).filter_map(|k| Some((k.dur, k.sm_coverage(t.num_sms(k.device))?)));
        // The durations alone, made once at their count: the median is all
        // they are ordered for (a rank has up to millions of kernels).
        let mut durs: Vec<Ns> = Vec::with_capacity(covered().count());
        durs.extend(covered().map(|k| k.0));
        let mid = durs.len() / 2;
        let median = durs
            .get(mid)
            .is_some()
            .then(|| *durs.select_nth_unstable(mid).1);
        drop(durs);
        let median = median.unwrap_or(Ns::ZERO);
        let time = |pick: &dyn Fn(Ns, f64) -> bool| -> Ns {
            covered().filter(|(d, c)| pick(*d, *c)).map(|k| k.0).sum()
        };
        Self {
            total: covered().map(|k| k.0).sum(),
            weighted: covered().map(|(d, c)| d.as_f64() * c).sum(),
            compute_bound: time(&|d, c| c > 0.7 && d > median),
            memory_bound: time(&|_, c| c < 0.5),
        }
    }
}
