//! The metric registry: every metric is a name, a unit, a one-line meaning, the
//! inputs it needs and a compute function. The CLI table, `--list-metrics`, the
//! README table and the JSON/CSV outputs are all generated from [`METRICS`].

pub mod balance;
pub mod breakdown;
pub mod comm;
pub mod ctx;
pub mod kernel;
pub mod memory;
pub mod outcome;
pub mod ranks;
pub mod steps;

pub use ctx::Ctx;
pub use outcome::{Measured, Outcome, Unit};

/// What a metric needs from the trace to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Kernels,
    CommKernels,
    Steps,
    GridInfo,
    Memcpy,
    TwoRanks,
}

impl Need {
    pub fn describe(self) -> &'static str {
        match self {
            Self::Kernels => "GPU kernels",
            Self::CommKernels => "communication kernels",
            Self::Steps => "ProfilerStep annotations",
            Self::GridInfo => "kernel launch grids + deviceProperties",
            Self::Memcpy => "memcpy events with bytes",
            Self::TwoRanks => "≥ 2 ranks",
        }
    }
}

/// Where a metric is listed in the Summary tab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Time,
    Communication,
    Compute,
    Memory,
    Balance,
}

impl Group {
    pub const ALL: [Group; 5] = [
        Self::Time,
        Self::Communication,
        Self::Compute,
        Self::Memory,
        Self::Balance,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Time => "time",
            Self::Communication => "communication",
            Self::Compute => "compute",
            Self::Memory => "memory",
            Self::Balance => "balance",
        }
    }
}

pub struct Metric {
    pub name: &'static str,
    pub unit: Unit,
    pub group: Group,
    /// One line: what the number means and how it is computed.
    pub about: &'static str,
    pub needs: &'static [Need],
    pub compute: fn(&Ctx) -> Outcome,
}

impl Metric {
    pub fn eval(&self, ctx: &Ctx) -> Outcome {
        (self.compute)(ctx)
    }
}

use Need::*;

pub static METRICS: &[Metric] = &[
    Metric {
        name: "avg_step_time",
        unit: Unit::Seconds,
        group: Group::Time,
        about: "mean ProfilerStep duration per rank, averaged over ranks",
        needs: &[Steps],
        compute: steps::avg_step_time,
    },
    Metric {
        name: "coll_call_num",
        unit: Unit::Count,
        group: Group::Communication,
        about: "communication kernels (ncclKernel_*, ncclDevKernel_*, RCCL, ...) launched in the last step of rank 0 (or --rank)",
        needs: &[Kernels],
        compute: comm::coll_call_num,
    },
    Metric {
        name: "total_kernel_time",
        unit: Unit::Seconds,
        group: Group::Compute,
        about: "summed kernel durations over all ranks (memcpy/memset excluded)",
        needs: &[Kernels],
        compute: kernel::total_kernel_time,
    },
    Metric {
        name: "total_communication_time",
        unit: Unit::Seconds,
        group: Group::Communication,
        about: "summed communication kernel time per step (kernels launched in steps / number of steps), averaged over ranks",
        needs: &[Kernels],
        compute: comm::total_communication_time,
    },
    Metric {
        name: "communication_ratio",
        unit: Unit::Percent,
        group: Group::Communication,
        about: "summed communication kernel time / summed kernel time x 100, per rank, averaged",
        needs: &[Kernels],
        compute: comm::communication_ratio,
    },
    Metric {
        name: "communication_fraction",
        unit: Unit::Percent,
        group: Group::Communication,
        about: "summed communication time / summed GPU time incl. memcpy/memset x 100, per rank, averaged",
        needs: &[Kernels],
        compute: comm::communication_fraction,
    },
    Metric {
        name: "communication_overlap_ratio",
        unit: Unit::Ratio,
        group: Group::Communication,
        about: "|union(comm) ∩ union(compute)| / |union(comm)| per rank, averaged over ranks with communication",
        needs: &[CommKernels],
        compute: comm::communication_overlap_ratio,
    },
    Metric {
        name: "break_down_steps",
        unit: Unit::Percent,
        group: Group::Compute,
        about: "GPU time of ops launched in steps by class (communication, attention, moe, gemm, other compute, memory) as % of it; headline = compute share",
        needs: &[Kernels],
        compute: kernel::break_down_steps,
    },
    Metric {
        name: "moe_fraction",
        unit: Unit::Percent,
        group: Group::Compute,
        about: "summed MoE-class kernel time / summed kernel time x 100, per rank, averaged",
        needs: &[Kernels],
        compute: kernel::moe_fraction,
    },
    Metric {
        name: "dominant_kernel_concentration",
        unit: Unit::Percent,
        group: Group::Compute,
        about: "summed time of the kernel name with the most time / summed kernel time x 100, per rank, averaged",
        needs: &[Kernels],
        compute: kernel::dominant_kernel_concentration,
    },
    Metric {
        name: "aggregate_gpu_utilization",
        unit: Unit::Percent,
        group: Group::Compute,
        about: "union of GPU activity (kernels + memcpy/memset) / device window (first GPU op start to last GPU op end) x 100, per rank, averaged",
        needs: &[Kernels],
        compute: balance::aggregate_gpu_utilization,
    },
    Metric {
        name: "mean_sm_coverage",
        unit: Unit::Percent,
        group: Group::Compute,
        about: "duration-weighted mean over kernels of min(1, grid blocks / SMs) x 100, per rank, averaged",
        needs: &[GridInfo],
        compute: kernel::mean_sm_coverage,
    },
    Metric {
        name: "compute_bound_fraction",
        unit: Unit::Percent,
        group: Group::Compute,
        about: "time in kernels with SM coverage > 70% and duration above the median kernel / kernel time (kernels with grid info) x 100",
        needs: &[GridInfo],
        compute: kernel::compute_bound_fraction,
    },
    Metric {
        name: "memory_bound_fraction",
        unit: Unit::Percent,
        group: Group::Compute,
        about: "time in kernels with SM coverage < 50% / kernel time (kernels with grid info) x 100",
        needs: &[GridInfo],
        compute: kernel::memory_bound_fraction,
    },
    Metric {
        name: "memory_transfer_overhead",
        unit: Unit::Percent,
        group: Group::Memory,
        about: "memcpy/memset time not covered by compute kernels / device-side step time (first to last op of each step) x 100, per rank, averaged",
        needs: &[Kernels],
        compute: memory::memory_transfer_overhead,
    },
    Metric {
        name: "average_memory_bandwidth",
        unit: Unit::GBps,
        group: Group::Memory,
        about: "sum of bytes / sum of durations over memcpy events with a byte count, all ranks pooled",
        needs: &[Memcpy],
        compute: memory::average_memory_bandwidth,
    },
    Metric {
        name: "load_imbalance_ratio",
        unit: Unit::Ratio,
        group: Group::Balance,
        about: "max over ranks of GPU busy time (union of device activity) / min over ranks",
        needs: &[Kernels, TwoRanks],
        compute: balance::load_imbalance_ratio,
    },
];

/// The README's metric table, generated so it cannot drift from the registry.
pub fn markdown_table() -> String {
    let mut s = String::from("| metric | unit | needs | meaning |\n|---|---|---|---|\n");
    for m in METRICS {
        let needs: Vec<&str> = m.needs.iter().map(|n| n.describe()).collect();
        s += &format!(
            "| `{}` | {} | {} | {} |\n",
            m.name,
            m.unit.symbol(),
            needs.join(", "),
            m.about.replace('|', "\\|")
        );
    }
    s
}

pub fn find(name: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.name == name)
}

/// Metric names close to a mistyped one, closest first.
pub fn suggest(name: &str) -> Vec<&'static str> {
    let mut scored: Vec<(f64, &str)> = METRICS
        .iter()
        .map(|m| {
            let sim = strsim::jaro_winkler(name, m.name);
            let contains = m.name.contains(name) || name.contains(m.name);
            (if contains { sim + 1.0 } else { sim }, m.name)
        })
        .filter(|(s, _)| *s > 0.75)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(5).map(|(_, n)| n).collect()
}

/// Helpers for the metric unit tests: traces from `synth`, loaded through the
/// real Kineto reader.
#[cfg(test)]
pub(crate) mod testing {
    use crate::model::Trace;
    use crate::read::kineto;
    use crate::synth::RankTrace;

    pub fn trace(ranks: &[RankTrace]) -> Trace {
        let mut trace = Trace::default();
        for r in ranks {
            let text = r.to_json();
            let f = kineto::read(text.as_bytes(), "synthetic.json".as_ref())
                .expect("synthetic trace loads");
            let mut t = f.timeline;
            t.rank = f.dist_rank.unwrap_or(0);
            trace.ranks.push(t);
        }
        trace
    }

    /// The value of `metric` on `trace`, over all ranks or one.
    pub fn eval(trace: &Trace, metric: &str, rank: Option<u32>) -> super::Outcome {
        let ctx = super::Ctx::new(trace, rank).expect("rank exists");
        super::find(metric).expect("metric exists").eval(&ctx)
    }

    pub fn value(trace: &Trace, metric: &str, rank: Option<u32>) -> f64 {
        match eval(trace, metric, rank) {
            super::Outcome::Value(m) => m.value,
            super::Outcome::NotApplicable(why) => panic!("{metric} not applicable: {why}"),
        }
    }

    pub fn assert_close(got: f64, want: f64) {
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "got {got}, want {want}"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_documented() {
        let mut names: Vec<_> = METRICS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate metric names");
        for m in METRICS {
            assert!(!m.about.is_empty(), "{} has no description", m.name);
            assert!(
                !m.about.contains('\n'),
                "{}: description must be one line",
                m.name
            );
        }
    }

    #[test]
    fn suggestions_for_typos() {
        assert_eq!(suggest("comunication_ratio")[0], "communication_ratio");
        assert!(suggest("overlap").contains(&"communication_overlap_ratio"));
        assert!(suggest("zzzz").is_empty());
    }
}
