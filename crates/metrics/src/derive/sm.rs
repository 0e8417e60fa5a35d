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
        // Made once at their count (a rank has up to millions of kernels;
        // none has a coverage without its device's SM count).
        let n = covered().count();
        if n == 0 {
            return Self::default();
        }
        let mut ks: Vec<(Ns, f64)> = Vec::with_capacity(n);
        ks.extend(covered());
        // Summed in the kernels' order, before the median reorders them.
        let total = ks.iter().map(|k| k.0).sum();
        let weighted = ks.iter().map(|(d, c)| d.as_f64() * c).sum();
        let median = ks.select_nth_unstable_by_key(n / 2, |k| k.0).1 .0;
        let time = |pick: &dyn Fn(Ns, f64) -> bool| -> Ns {
            ks.iter().filter(|(d, c)| pick(*d, *c)).map(|k| k.0).sum()
        };
        Self {
            total,
            weighted,
            compute_bound: time(&|d, c| c > 0.7 && d > median),
            memory_bound: time(&|_, c| c < 0.5),
        }
    }
}
