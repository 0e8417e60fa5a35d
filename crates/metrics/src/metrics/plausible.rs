//! Values no real run can produce are flagged, never printed as facts: a share
//! over 100 %, a bandwidth beyond any link or memory, a negative size or a
//! number that is not finite. Such a value turns into "not applicable" with
//! the bound it broke and the likely cause.

use super::outcome::{Outcome, Unit};
use super::Metric;

/// Fastest GPU-to-GPU link per GPU today (NVLink 5, 1,800 GB/s both
/// directions together), with headroom: no collective's bus bandwidth beats it.
pub(crate) const MAX_LINK_GBPS: f64 = 2_000.0;

/// Fastest GPU memory today (HBM3e, ~8 TB/s), with headroom: no copy beats it.
pub(crate) const MAX_MEMORY_GBPS: f64 = 20_000.0;

/// A year, in seconds: no profile runs that long, and even a time summed
/// over thousands of ranks stays below it.
pub(crate) const MAX_SECONDS: f64 = 365.0 * 86_400.0;

/// Slack for shares computed in floating point (100.000000001 %).
const EPS: f64 = 1e-6;

/// `out` unless its value is impossible for `m`; then why not.
pub fn check(m: &Metric, out: Outcome) -> Outcome {
    let Some(v) = out.as_value() else {
        return out;
    };
    match bound_broken(m, v) {
        Some(why) => Outcome::na(format!(
            "implausible value {} {}: {why}",
            m.unit.human(v),
            m.unit.symbol()
        )),
        None => out,
    }
}

fn bound_broken(m: &Metric, v: f64) -> Option<String> {
    if !v.is_finite() {
        return Some("not a finite number; the trace's values overflow".into());
    }
    let sized = matches!(
        m.unit,
        Unit::Percent
            | Unit::Count
            | Unit::GB
            | Unit::GBps
            | Unit::Flop
            | Unit::FlopPerS
            | Unit::FlopPerToken
            | Unit::Tokens
            | Unit::TokensPerS
    );
    if sized && v < -EPS {
        return Some("a size, count or share cannot be negative".into());
    }
    match m.unit {
        Unit::Percent if v > 100.0 + EPS => Some(if m.name == "mfu" {
            "model FLOPs per second beyond the GPUs' peak: the model size (--model-params \
             or the card's num_params), the tokens per step (card batch x sequence) or \
             --n-chips does not match this run"
                .into()
        } else {
            "a share cannot exceed 100 %; the trace's times are inconsistent".into()
        }),
        // A fitted constant (Hockney's α, a fit's residual) or a difference
        // of times (how far the CPU runs ahead) may come out below zero; a
        // measured duration cannot.
        Unit::Seconds if v < -EPS && !m.name.starts_with("hockney_") && m.name != "cpu_ahead_s" => {
            Some("a duration cannot be negative; the trace's times are inconsistent".into())
        }
        // Copies run at memory speed, collectives at link speed.
        Unit::Seconds if v.abs() > MAX_SECONDS => Some(
            "over a year, longer than any profile; the trace's timestamps are damaged or from \
             different clocks"
                .into(),
        ),
        Unit::GBps if m.name == "average_memory_bandwidth" => (v > MAX_MEMORY_GBPS).then(|| {
            format!(
                "beyond any GPU memory ({MAX_MEMORY_GBPS:.0} GB/s); the copies' byte counts \
                 or durations are wrong"
            )
        }),
        Unit::GBps if v > MAX_LINK_GBPS => Some(format!(
            "beyond any GPU interconnect ({MAX_LINK_GBPS:.0} GB/s per GPU, NVLink 5 is \
             1,800); the collectives' message sizes (In msg nelems, dtype) or durations \
             are wrong"
        )),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::find;

    fn verdict(name: &str, v: f64) -> Option<String> {
        match check(find(name).unwrap(), Outcome::value(v)) {
            Outcome::Value(_) => None,
            Outcome::NotApplicable(why) => Some(why.to_string()),
        }
    }

    #[test]
    fn impossible_values_are_not_applicable_with_the_bound() {
        assert_eq!(verdict("mfu", 42.0), None);
        assert_eq!(verdict("mfu", 100.0), None);
        let why = verdict("mfu", 1486.0).unwrap();
        assert!(
            why.starts_with("implausible value 1486.000 %") && why.contains("--model-params"),
            "{why}"
        );
        assert!(verdict("communication_ratio", 100.5).is_some());
        assert!(verdict("collective_vol_total_gb", -1.0).is_some());
        assert!(verdict("avg_step_time", f64::NAN).is_some());
        assert!(verdict("avg_step_time", f64::INFINITY).is_some());
        // Bus bandwidth: 900 GB/s is an NVLink 5 GPU, 5,000 is no link.
        assert_eq!(
            verdict("bandwidth_utilization_allreduce_group_6", 900.0),
            None
        );
        let why = verdict("avg_comm_bandwidth_GBps", 5_000.0).unwrap();
        assert!(why.contains("interconnect"), "{why}");
        // Copies run at memory speed: 3,000 GB/s is an H100 device-to-device copy.
        assert_eq!(verdict("average_memory_bandwidth", 3_000.0), None);
        assert!(verdict("average_memory_bandwidth", 1e6)
            .unwrap()
            .contains("memory"));
        // A negative step time is not a measurement; a fitted α may be.
        assert!(verdict("avg_step_time", -3.0)
            .unwrap()
            .contains("cannot be negative"));
        assert_eq!(verdict("hockney_alpha_s", -1e-6), None);
        // A wall time of 139 years is damaged timestamps, not a run.
        assert_eq!(verdict("wall_time_s", 3_600.0), None);
        assert!(verdict("wall_time_s", 4.4e9)
            .unwrap()
            .contains("over a year"));
        // Unbounded ratios and fitted constants stay as they are.
        assert_eq!(verdict("load_imbalance_ratio", 37.0), None);
        assert_eq!(verdict("hockney_alpha_s", -1e-6), None);
    }
}
