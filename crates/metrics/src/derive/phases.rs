//! Device time of each training phase (forward, backward, optimizer, FSDP
//! ranges) per rank, from `record_function` ranges.

use crate::model::{Annotation, Interval, IntervalSet, Ns, RankTimeline};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Phase {
    Forward,
    Backward,
    Optimizer,
    FsdpAllGather,
    FsdpReduceScatter,
    FsdpCopyIn,
    FsdpCopyOut,
}

impl Phase {
    pub(crate) const ALL: [Self; 7] = [
        Self::Forward,
        Self::Backward,
        Self::Optimizer,
        Self::FsdpAllGather,
        Self::FsdpReduceScatter,
        Self::FsdpCopyIn,
        Self::FsdpCopyOut,
    ];

    pub(crate) fn matches(self, name: &str) -> bool {
        let fsdp = name.strip_prefix("FSDP::");
        match self {
            Self::Forward => name == "forward" || name.ends_with("## forward ##"),
            Self::Backward => name == "backward" || name.ends_with("## backward ##"),
            Self::Optimizer => name == "optimizer" || name.starts_with("Optimizer.step#"),
            Self::FsdpAllGather => {
                fsdp.is_some_and(|n| n.contains("all_gather") && !n.contains("copy"))
            }
            Self::FsdpReduceScatter => fsdp.is_some_and(|n| {
                n.contains("reduce_scatter") || n.contains("post_backward_reduce")
            }),
            Self::FsdpCopyIn => fsdp.is_some_and(|n| n.contains("copy_in")),
            Self::FsdpCopyOut => fsdp.is_some_and(|n| n.contains("copy_out")),
        }
    }

    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Forward => "forward",
            Self::Backward => "backward",
            Self::Optimizer => "optimizer",
            Self::FsdpAllGather => "FSDP all_gather",
            Self::FsdpReduceScatter => "FSDP reduce_scatter",
            Self::FsdpCopyIn => "FSDP copy_in",
            Self::FsdpCopyOut => "FSDP copy_out",
        }
    }

    pub(crate) fn describe(self) -> &'static str {
        match self {
            Self::Forward => "`forward` ranges",
            Self::Backward => "`backward` ranges",
            Self::Optimizer => "`optimizer` / `Optimizer.step#*` ranges",
            Self::FsdpAllGather => "`FSDP::all_gather` ranges",
            Self::FsdpReduceScatter => {
                "`FSDP::reduce_scatter` / `FSDP::post_backward_reduce` ranges"
            }
            Self::FsdpCopyIn => "`FSDP::*copy_in` ranges",
            Self::FsdpCopyOut => "`FSDP::*copy_out` ranges",
        }
    }
}

/// Device time of a phase: the union of the device ops launched during its CPU
/// ranges (kernels run after their launch, and autograd launches backward
/// kernels from its own thread while the main thread sits in `backward`); a
/// range that launched nothing counts its own CPU length. Busy time, not the
/// hull: a copy on a side stream launched in `backward` may run while forward
/// kernels are still queued, and hulls would then count that time twice.
/// The `gpu_user_annotation` mirrors are not used: they only cover kernels
/// launched by the annotating thread, so a mirrored `backward` is µs long.
///
/// Every phase of a rank at once (indexed like [`Phase::ALL`]), so that its ops
/// are put in launch order once; `None` where the rank has no such range.
pub(crate) fn phase_times(t: &RankTimeline) -> [Option<Ns>; Phase::ALL.len()] {
    // Only ranges that start in a measured step, as per-step averages divide
    // by the measured steps.
    let measured = t.measured_steps();
    let in_measured = |a: &Annotation| {
        t.steps.is_empty() || {
            let i = measured.partition_point(|s| s.start <= a.start);
            i > 0 && a.start < measured[i - 1].end
        }
    };
    let ranges = Phase::ALL.map(|phase| -> Vec<&Annotation> {
        t.annotations
            .iter()
            .filter(|a| !a.on_gpu && phase.matches(t.name(a.name)) && in_measured(a))
            .collect()
    });
    if ranges.iter().all(|r| r.is_empty()) {
        return [None; Phase::ALL.len()];
    }
    let mut by_launch: Vec<(Ns, Interval)> =
        t.ops.iter().map(|o| (o.launch, o.interval())).collect();
    by_launch.sort_unstable_by_key(|p| p.0);
    ranges.map(|ranges| {
        if ranges.is_empty() {
            return None;
        }
        let mut spans = Vec::new();
        for a in ranges {
            let lo = by_launch.partition_point(|p| p.0 < a.start);
            let hi = by_launch.partition_point(|p| p.0 < a.end);
            if lo == hi {
                spans.push(Interval::new(a.start, a.end));
            }
            spans.extend(by_launch[lo..hi].iter().map(|p| p.1));
        }
        Some(IntervalSet::from_unsorted(spans).total())
    })
}
