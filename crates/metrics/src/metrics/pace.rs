//! Which side sets the pace of the steps: the device, when the CPU launches
//! a step's work faster than the device runs it (the CPU runs ahead and the
//! device's step is the one the run sustains), or the CPU, when the device
//! idles between the ops it is given.

use super::ctx::Ctx;
use super::outcome::{Lack, Outcome, Why};
use crate::derive::RankRow;
use crate::model::time::{human, ns_to_s};
use crate::model::Ns;

/// A device step this much longer than the CPU's is not noise ...
const NOISE_SHARE: f64 = 0.02;
/// ... nor this (timer resolution, launch jitter).
const NOISE_FLOOR: Ns = Ns(10_000);
/// Idle for at least this share of its step, the device is said to wait for
/// the CPU.
const IDLE_SAYS: f64 = 0.3;

/// The step a rank sustains: the longer of its CPU step and its device
/// step; `None` without steps.
fn sustained(r: &RankRow) -> Option<Ns> {
    r.step_time.map(|cpu| cpu.max(r.span))
}

/// Whether the rank's device step outlasts its CPU step beyond noise, with
/// the device finishing after the CPU: the CPU runs ahead.
fn device_bound(r: &RankRow) -> bool {
    let Some(cpu) = r.step_time else {
        return false;
    };
    let noise = NOISE_FLOOR.max(Ns((cpu.as_f64() * NOISE_SHARE) as i64));
    r.span > cpu + noise && r.ahead.is_some_and(|a| a > Ns::ZERO)
}

/// Who sets the pace, over the ranks with steps.
#[derive(Debug, Clone, PartialEq)]
pub enum Pace {
    /// The device's step outlasts the CPU's on `ranks` (all of them when
    /// `all`): `device` and `cpu` are their mean steps, `ahead` how far
    /// their CPU runs ahead at a step's end.
    DeviceBound {
        ranks: Vec<u32>,
        all: bool,
        device: Ns,
        cpu: Ns,
        ahead: Ns,
    },
    /// The device idles `idle` (0-1) of its step: it waits for the CPU.
    HostBound { idle: f64 },
    /// Neither: the device is busy `busy` (0-1) of its step.
    Even { busy: f64 },
}

impl Pace {
    /// The pace of `rows`; `None` when no rank has steps.
    pub fn of(rows: &[RankRow]) -> Option<Pace> {
        let stepped: Vec<&RankRow> = rows.iter().filter(|r| r.step_time.is_some()).collect();
        if stepped.is_empty() {
            return None;
        }
        let bound: Vec<&RankRow> = stepped
            .iter()
            .copied()
            .filter(|r| device_bound(r))
            .collect();
        let mean = |v: &[&RankRow], f: &dyn Fn(&RankRow) -> Ns| {
            v.iter().map(|r| f(r)).sum::<Ns>() / v.len().max(1) as i64
        };
        if !bound.is_empty() {
            return Some(Pace::DeviceBound {
                ranks: bound.iter().map(|r| r.rank).collect(),
                all: bound.len() == stepped.len(),
                device: mean(&bound, &|r| r.span),
                cpu: mean(&bound, &|r| r.step_time.unwrap_or_default()),
                ahead: mean(&bound, &|r| r.ahead.unwrap_or_default()),
            });
        }
        let (span, idle) = (mean(&stepped, &|r| r.span), mean(&stepped, &|r| r.idle));
        if span <= Ns::ZERO {
            return None;
        }
        let idle = idle.as_f64() / span.as_f64();
        Some(if idle >= IDLE_SAYS {
            Pace::HostBound { idle }
        } else {
            Pace::Even { busy: 1.0 - idle }
        })
    }

    /// "GPU-bound: the CPU runs 14.0 ms ahead (its step: 15.2 ms)", with
    /// `xpu` naming the device.
    pub fn sentence(&self, xpu: &str) -> String {
        match self {
            Pace::DeviceBound {
                ranks,
                all,
                cpu,
                ahead,
                ..
            } => {
                let on = if *all {
                    String::new()
                } else {
                    format!(
                        " on rank{} {}",
                        if ranks.len() == 1 { "" } else { "s" },
                        ranks
                            .iter()
                            .map(u32::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    )
                };
                format!(
                    "{xpu}-bound{on}: the CPU runs {} ahead (its steps take {})",
                    human(*ahead),
                    human(*cpu)
                )
            }
            Pace::HostBound { idle } => format!(
                "CPU-bound: the {xpu} idles {:.0} % of its step waiting for work",
                idle * 100.0
            ),
            Pace::Even { busy } => format!("the {xpu} is busy {:.0} % of its step", busy * 100.0),
        }
    }
}

fn no_steps() -> Why {
    Why::Lacks(Lack::Steps, crate::model::timeline::NO_STEPS)
}

/// Mean device-side step per rank (first start to last end of the ops
/// launched in each measured step), averaged over ranks with steps.
pub(crate) fn device_step_time(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.rank_rows()
            .iter()
            .map(|r| (r.rank, r.step_time.map(|_| ns_to_s(r.span)))),
        no_steps(),
    )
}

/// Per rank the longer of its CPU and device steps, averaged over ranks.
pub(crate) fn iteration_time(ctx: &Ctx) -> Outcome {
    let out = Outcome::rank_mean(
        ctx.rank_rows()
            .iter()
            .map(|r| (r.rank, sustained(r).map(ns_to_s))),
        no_steps(),
    );
    match Pace::of(ctx.rank_rows()) {
        Some(p) if out.as_value().is_some() => out.with_note(p.sentence("device")),
        _ => out,
    }
}

/// How far the CPU runs ahead of the device at a step's end, per rank,
/// averaged.
pub(crate) fn cpu_ahead(ctx: &Ctx) -> Outcome {
    Outcome::rank_mean(
        ctx.rank_rows()
            .iter()
            .map(|r| (r.rank, r.ahead.map(ns_to_s))),
        no_steps(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::testing::{assert_close, trace, value};
    use crate::synth::RankTrace;

    /// Four 100 µs CPU steps (0-400 µs), the middle two measured. Each step
    /// launches one 150 µs kernel, which runs as soon as the device is free:
    /// [10, 160), [160, 310), [310, 460), [460, 610). Step 2 (100-200 µs)
    /// launched [160, 310): its device step is 150 µs and its work ends at
    /// 310, 110 µs after the CPU step; step 3: [310, 460), 460 - 300 = 160.
    fn gpu_bound() -> RankTrace {
        let mut r = RankTrace::new(Some(0), 1, 10);
        for (n, at) in [(1, 0.0), (2, 100.0), (3, 200.0), (4, 300.0)] {
            r.step(n, at, 100.0);
        }
        for (k, start) in [10.0, 160.0, 310.0, 460.0].into_iter().enumerate() {
            let c = r.kernel("sm90_gemm_bf16", start, 150.0, 7, 1);
            r.launch(c, 5.0 + 100.0 * k as f64);
        }
        r
    }

    #[test]
    fn a_device_that_lags_sets_the_pace() {
        let t = trace(&[gpu_bound()]);
        assert_close(value(&t, "avg_step_time", None), 100e-6);
        assert_close(value(&t, "device_step_time_s", None), 150e-6);
        assert_close(value(&t, "iteration_time_s", None), 150e-6);
        // (110 + 160) / 2 = 135 µs.
        assert_close(value(&t, "cpu_ahead_s", None), 135e-6);
        let ctx = Ctx::new(&t, None).expect("all ranks");
        let pace = Pace::of(ctx.rank_rows()).expect("steps");
        assert_eq!(
            pace.sentence("GPU"),
            "GPU-bound: the CPU runs 135 µs ahead (its steps take 100 µs)"
        );
    }

    #[test]
    fn a_device_that_waits_for_the_cpu() {
        // The same steps, each launching a 30 µs kernel 10 µs in: the device
        // step is the kernel (30 µs); the run sustains the CPU's 100 µs, the
        // device idles 0 of its own step: busy, not waiting.
        let mut r = RankTrace::new(Some(0), 1, 10);
        for (n, at) in [(1, 0.0), (2, 100.0), (3, 200.0), (4, 300.0)] {
            r.step(n, at, 100.0);
        }
        for k in 0..4 {
            let at = 100.0 * f64::from(k);
            let c = r.kernel("sm90_gemm_bf16", at + 10.0, 10.0, 7, 1);
            r.launch(c, at + 5.0);
            let c = r.kernel("sm90_gemm_bf16", at + 80.0, 10.0, 7, 1);
            r.launch(c, at + 75.0);
        }
        let t = trace(&[r]);
        // Device step: [10, 90) of each step, 80 µs, busy 20 of it.
        assert_close(value(&t, "device_step_time_s", None), 80e-6);
        assert_close(value(&t, "iteration_time_s", None), 100e-6);
        // The last kernel ends 10 µs before the step does.
        assert_close(value(&t, "cpu_ahead_s", None), -10e-6);
        let ctx = Ctx::new(&t, None).expect("all ranks");
        assert_eq!(
            Pace::of(ctx.rank_rows()).expect("steps").sentence("GPU"),
            "CPU-bound: the GPU idles 75 % of its step waiting for work"
        );
    }
}
