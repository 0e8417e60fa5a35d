//! The regression gate: two runs judged by their per-step samples rather
//! than by their means alone. Each headline figure gives one sample per
//! measured step (the mean over the ranks in scope of that step's value on
//! each rank, steps matched by position); the change B - A, relative to
//! A's mean, gets a 95 % confidence interval (Welch's t: the runs' noise may
//! differ), and the interval is judged against the threshold:
//!
//! - **regressed** / **improved**: the whole interval lies beyond the
//!   threshold, in the worse / better direction;
//! - **no change**: the whole interval lies within it;
//! - **inconclusive**: fewer than [`MIN_STEPS`] measured steps in a run, or
//!   an interval that straddles the threshold (the runs are too noisy, or
//!   too short, to tell a change of that size from none).
//!
//! A run as a whole has regressed when any figure has; else it is
//! inconclusive when any figure is; else improved when any figure is.

use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, StudentsT};

use crate::metrics::Ctx;
use crate::model::time::ns_to_s;
use crate::model::Ns;

/// The fewest measured steps a run needs for its noise to be estimated.
pub const MIN_STEPS: usize = 3;

/// The confidence of the intervals.
pub const CONFIDENCE: f64 = 0.95;

/// A headline figure the gate judges, one sample per measured step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Figure {
    /// The step's duration (`ProfilerStep#N`, CPU side), s.
    StepTime,
    /// Communication of the step's ops not under its compute, s.
    ExposedComm,
    /// Time the step's collectives waited for their last member, s.
    CommWait,
    /// The union of the step's device ops over the step's duration.
    BusyShare,
}

impl Figure {
    pub const ALL: [Figure; 4] = [
        Self::StepTime,
        Self::ExposedComm,
        Self::CommWait,
        Self::BusyShare,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::StepTime => "step_time",
            Self::ExposedComm => "exposed_comm",
            Self::CommWait => "comm_wait",
            Self::BusyShare => "busy_share",
        }
    }

    /// Seconds, or a share (0-1).
    pub fn is_share(self) -> bool {
        self == Self::BusyShare
    }

    fn higher_is_worse(self) -> bool {
        self != Self::BusyShare
    }
}

/// What the gate concluded, of a figure or of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regressed,
    Improved,
    NoChange,
    Inconclusive,
    /// The figure cannot be had of these runs (no collectives matched
    /// across ranks, no communication): not judged.
    NotApplicable,
}

impl Verdict {
    pub fn label(self) -> &'static str {
        match self {
            Self::Regressed => "REGRESSED",
            Self::Improved => "improved",
            Self::NoChange => "no change",
            Self::Inconclusive => "inconclusive",
            Self::NotApplicable => "not applicable",
        }
    }
}

/// Per figure (indexed like [`Figure::ALL`]): per rank, per measured step
/// position; or why the run cannot give it.
pub type PerRank = Vec<Result<Vec<Vec<f64>>, String>>;

/// One run's figures per rank and measured step: what a baseline keeps.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepFigures {
    /// Measured steps every rank in scope has (the step positions kept).
    pub steps: usize,
    /// The ranks in scope, in the order of each figure's rows.
    pub ranks: Vec<u32>,
    pub values: PerRank,
}

/// One run's samples of each figure (indexed like [`Figure::ALL`]): per
/// measured step position, the mean over the ranks; or why none.
#[derive(Debug, Clone)]
pub struct Samples {
    pub values: Vec<Result<Vec<f64>, String>>,
}

impl StepFigures {
    /// The figures of the run `ctx` holds (its ops are needed: a whole load).
    pub fn of(ctx: &Ctx) -> Self {
        let ranks = &ctx.ranks;
        let steps = ranks
            .iter()
            .map(|t| t.measured_steps().len())
            .min()
            .unwrap_or(0);
        let rank_numbers = ranks.iter().map(|t| t.rank).collect();
        if steps == 0 {
            let why = "no measured steps (ProfilerStep ranges) on some rank";
            return Self {
                steps,
                ranks: rank_numbers,
                values: vec![Err(why.to_owned()); Figure::ALL.len()],
            };
        }
        let sums: Vec<Vec<crate::derive::steps::StepSums>> = ranks
            .iter()
            .map(|t| crate::derive::steps::sums(t))
            .collect();
        let per_rank = |f: &dyn Fn(usize, usize) -> f64| -> Vec<Vec<f64>> {
            (0..ranks.len())
                .map(|k| (0..steps).map(|p| f(k, p)).collect())
                .collect()
        };
        let step = |k: usize, p: usize| ranks[k].measured().start + p;
        let dur = |k: usize, p: usize| ranks[k].steps[step(k, p)].dur();
        let step_time = per_rank(&|k, p| ns_to_s(dur(k, p)));
        let any_comm = sums.iter().flatten().any(|s| s.comm.get() > 0);
        let exposed = match any_comm {
            true => Ok(per_rank(&|k, p| ns_to_s(sums[k][step(k, p)].exposed_comm))),
            false => Err("no communication ops".to_owned()),
        };
        let busy = per_rank(&|k, p| match dur(k, p).get() {
            d if d > 0 => sums[k][step(k, p)].busy.get() as f64 / d as f64,
            _ => 0.0,
        });
        Self {
            steps,
            ranks: rank_numbers,
            values: vec![Ok(step_time), exposed, waits(ctx, steps), Ok(busy)],
        }
    }

    /// Whether the figures are of the shape [`StepFigures::of`] makes and
    /// every value plausible (finite, not negative): a baseline is read
    /// from a file.
    pub fn check(&self) -> Result<(), String> {
        if self.values.len() != Figure::ALL.len() {
            return Err(format!(
                "{} figures, not {}",
                self.values.len(),
                Figure::ALL.len()
            ));
        }
        for (f, v) in Figure::ALL.iter().zip(&self.values) {
            let Ok(rows) = v else { continue };
            if rows.len() != self.ranks.len() || rows.iter().any(|r| r.len() != self.steps) {
                return Err(format!("{}: not one value per rank and step", f.name()));
            }
            if rows.iter().flatten().any(|x| !x.is_finite() || *x < 0.0) {
                return Err(format!(
                    "{}: a value that is not a finite time or share",
                    f.name()
                ));
            }
        }
        Ok(())
    }

    /// Per step position, the mean over the ranks.
    pub fn samples(&self) -> Samples {
        let values = (self.values.iter())
            .map(|v| {
                let rows = v.as_ref().map_err(Clone::clone)?;
                let n = rows.len().max(1) as f64;
                Ok((0..self.steps)
                    .map(|p| rows.iter().map(|r| r[p]).sum::<f64>() / n)
                    .collect())
            })
            .collect();
        Samples { values }
    }
}

/// Per rank in scope and measured step position, the time its collectives
/// launched in that step waited for the last member.
fn waits(ctx: &Ctx, steps: usize) -> Result<Vec<Vec<f64>>, String> {
    let trace = ctx.trace;
    // Scope index of each rank of the trace, if in scope.
    let scope: Vec<Option<usize>> = (trace.ranks.iter())
        .map(|t| ctx.ranks.iter().position(|r| std::ptr::eq(*r, t)))
        .collect();
    let mut sum = vec![vec![0.0; steps]; ctx.ranks.len()];
    let mut matched = false;
    ctx.instances().walk(trace, |_, _, members| {
        let last = members.iter().map(|m| m.op.start).max();
        let Some(last) = last else { return };
        matched = true;
        for m in members {
            let (Some(k), Some(i)) = (scope[m.r], m.op.step.get()) else {
                continue;
            };
            let t = &trace.ranks[m.r];
            let Some(p) = (i as usize).checked_sub(t.measured().start) else {
                continue;
            };
            if p < steps && t.measured().contains(&(i as usize)) {
                let wait = (last - m.op.start).clamp(Ns::ZERO, m.op.dur);
                sum[k][p] += ns_to_s(wait);
            }
        }
    });
    match matched {
        true => Ok(sum),
        false => Err("no collective is matched across ranks".into()),
    }
}

/// A run's samples of one figure, summarized.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Summary {
    pub steps: usize,
    pub mean: f64,
    /// Sample standard deviation (n - 1); 0 for one sample.
    pub sd: f64,
}

impl Summary {
    pub fn of(x: &[f64]) -> Self {
        let n = x.len();
        let mean = x.iter().sum::<f64>() / n.max(1) as f64;
        let var = match n {
            0 | 1 => 0.0,
            _ => x.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64,
        };
        Self {
            steps: n,
            mean,
            sd: var.sqrt(),
        }
    }
}

/// One figure judged.
#[derive(Debug, Clone, Serialize)]
pub struct Judgement {
    pub figure: Figure,
    pub a: Option<Summary>,
    pub b: Option<Summary>,
    /// (B - A) / A's mean.
    pub change: Option<f64>,
    /// The change's confidence interval, relative to A's mean.
    pub interval: Option<(f64, f64)>,
    pub verdict: Verdict,
    /// Why, in words, with the figures.
    pub why: String,
}

/// The difference of means B - A and its interval's half-width (Welch).
pub fn welch(a: &[f64], b: &[f64]) -> Option<(f64, f64)> {
    let (sa, sb) = (Summary::of(a), Summary::of(b));
    if sa.steps < 2 || sb.steps < 2 {
        return None;
    }
    let (va, vb) = (
        sa.sd.powi(2) / sa.steps as f64,
        sb.sd.powi(2) / sb.steps as f64,
    );
    let d = sb.mean - sa.mean;
    let se2 = va + vb;
    if se2 == 0.0 {
        return Some((d, 0.0));
    }
    let df =
        se2.powi(2) / (va.powi(2) / (sa.steps - 1) as f64 + vb.powi(2) / (sb.steps - 1) as f64);
    let t = StudentsT::new(0.0, 1.0, df).ok()?;
    Some((d, t.inverse_cdf(0.5 + CONFIDENCE / 2.0) * se2.sqrt()))
}

/// Judges figure `figure` from A's and B's samples, against `threshold`
/// (relative, e.g. 0.05).
pub fn judge(
    figure: Figure,
    a: &Result<Vec<f64>, String>,
    b: &Result<Vec<f64>, String>,
    threshold: f64,
) -> Judgement {
    let mut j = Judgement {
        figure,
        a: a.as_deref().ok().map(Summary::of),
        b: b.as_deref().ok().map(Summary::of),
        change: None,
        interval: None,
        verdict: Verdict::NotApplicable,
        why: String::new(),
    };
    let (a, b) = match (a, b) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(why), _) => {
            j.why = format!("run A: {why}");
            return j;
        }
        (_, Err(why)) => {
            j.why = format!("run B: {why}");
            return j;
        }
    };
    let (sa, sb) = (Summary::of(a), Summary::of(b));
    if !(sa.mean.is_finite() && sb.mean.is_finite()) || sa.mean <= 0.0 {
        j.why = "run A's mean is zero: a relative change has no meaning".into();
        return j;
    }
    j.change = Some((sb.mean - sa.mean) / sa.mean);
    if sa.steps < MIN_STEPS || sb.steps < MIN_STEPS {
        j.verdict = Verdict::Inconclusive;
        j.why = format!(
            "too few measured steps to know the noise (A {}, B {}; at least {MIN_STEPS} each)",
            sa.steps, sb.steps
        );
        return j;
    }
    let Some((d, half)) = welch(a, b) else {
        j.verdict = Verdict::Inconclusive;
        j.why = "no interval could be made".into();
        return j;
    };
    let (lo, hi) = ((d - half) / sa.mean, (d + half) / sa.mean);
    j.interval = Some((lo, hi));
    // Worse is up for times, down for the busy share.
    let (worse_lo, worse_hi) = match figure.higher_is_worse() {
        true => (lo, hi),
        false => (-hi, -lo),
    };
    let pct = |v: f64| format!("{:+.1} %", v * 100.0);
    let span = format!("{} to {}", pct(lo), pct(hi));
    let th = format!("{:.1} %", threshold * 100.0);
    (j.verdict, j.why) = if worse_lo > threshold {
        (
            Verdict::Regressed,
            format!("{span}: worse beyond {th} throughout"),
        )
    } else if worse_hi < -threshold {
        (
            Verdict::Improved,
            format!("{span}: better beyond {th} throughout"),
        )
    } else if lo > -threshold && hi < threshold {
        (Verdict::NoChange, format!("{span}: within ±{th}"))
    } else {
        (
            Verdict::Inconclusive,
            format!("{span} straddles ±{th}: the runs are too noisy or too short to tell"),
        )
    };
    j
}

/// Two runs gated.
#[derive(Debug, Clone, Serialize)]
pub struct Gate {
    pub threshold: f64,
    pub confidence: f64,
    pub figures: Vec<Judgement>,
    pub verdict: Verdict,
}

/// Judges every figure of B against A's (see the module's rules).
pub fn gate(a: &Ctx, b: &Ctx, threshold: f64) -> Gate {
    let (sa, sb) = (StepFigures::of(a).samples(), StepFigures::of(b).samples());
    gate_samples(&sa, &sb, threshold)
}

/// [`gate`] of two runs' samples (one may come from a baseline).
pub fn gate_samples(sa: &Samples, sb: &Samples, threshold: f64) -> Gate {
    let figures: Vec<Judgement> = (Figure::ALL.iter().enumerate())
        .map(|(k, &f)| judge(f, &sa.values[k], &sb.values[k], threshold))
        .collect();
    let any = |v: Verdict| figures.iter().any(|j| j.verdict == v);
    let verdict = if any(Verdict::Regressed) {
        Verdict::Regressed
    } else if any(Verdict::Inconclusive)
        || figures.iter().all(|j| j.verdict == Verdict::NotApplicable)
    {
        Verdict::Inconclusive
    } else if any(Verdict::Improved) {
        Verdict::Improved
    } else {
        Verdict::NoChange
    };
    Gate {
        threshold,
        confidence: CONFIDENCE,
        figures,
        verdict,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn welch_interval_by_hand() {
        // A: 1, 2, 3 (mean 2, variance 1); B: 2, 4, 6 (mean 4, variance 4).
        // se² = 1/3 + 4/3 = 5/3; df = (5/3)² / ((1/3)²/2 + (4/3)²/2) = 25/9 / (17/18)
        // = 50/17 = 2.941; t(0.975, 2.941) = 3.2 (4.303 at 2, 3.182 at 3).
        let (d, half) = welch(&[1.0, 2.0, 3.0], &[2.0, 4.0, 6.0]).unwrap();
        assert_eq!(d, 2.0);
        let t = half / (5.0f64 / 3.0).sqrt();
        assert!((3.18..3.25).contains(&t), "{t}");
        // Identical samples: no spread, an interval of width 0.
        assert_eq!(welch(&[1.0, 1.0], &[2.0, 2.0]), Some((1.0, 0.0)));
        assert_eq!(welch(&[1.0], &[2.0, 2.0]), None);
    }

    fn ok(v: &[f64]) -> Result<Vec<f64>, String> {
        Ok(v.to_vec())
    }

    #[test]
    fn verdicts_against_the_threshold() {
        let a = ok(&[100.0, 101.0, 99.0, 100.0, 100.0]);
        // +10 % with 1 % noise: the interval lies above 5 %.
        let b = ok(&[110.0, 111.0, 109.0, 110.0, 110.0]);
        let j = judge(Figure::StepTime, &a, &b, 0.05);
        assert_eq!(j.verdict, Verdict::Regressed, "{}", j.why);
        assert!((j.change.unwrap() - 0.10).abs() < 1e-12);
        // Faster: improved; the busy share up: improved too.
        let j = judge(Figure::StepTime, &b, &a, 0.05);
        assert_eq!(j.verdict, Verdict::Improved, "{}", j.why);
        assert_eq!(
            judge(Figure::BusyShare, &a, &b, 0.05).verdict,
            Verdict::Improved
        );
        // The same: no change.
        assert_eq!(
            judge(Figure::StepTime, &a, &a, 0.05).verdict,
            Verdict::NoChange
        );
        // +10 % in 3 steps of 10 % noise: inconclusive.
        let noisy = ok(&[100.0, 120.0, 110.0]);
        let j = judge(Figure::StepTime, &ok(&[90.0, 110.0, 100.0]), &noisy, 0.05);
        assert_eq!(j.verdict, Verdict::Inconclusive, "{}", j.why);
        assert!(j.why.contains("straddles"), "{}", j.why);
        // Two steps: too few to know the noise.
        let j = judge(Figure::StepTime, &ok(&[1.0, 1.0]), &ok(&[2.0, 2.0]), 0.05);
        assert_eq!(j.verdict, Verdict::Inconclusive);
        assert!(j.why.contains("too few"), "{}", j.why);
        // A figure a run lacks is not judged, with the run's reason.
        let j = judge(Figure::CommWait, &Err("none".into()), &a, 0.05);
        assert_eq!(j.verdict, Verdict::NotApplicable);
        assert_eq!(j.why, "run A: none");
    }
}
