//! Reasons that fit the trace's format. A metric that finds the trace
//! lacking says what it lacks (`Outcome::lacks`, a [`Lack`]) with the advice
//! for a PyTorch profiler trace (`profile with torch.profiler(with_flops=True)`);
//! on an Nsight Systems or XLA trace that advice is wrong, so the lack is
//! worded in what that profiler can and cannot record. Other reasons are
//! the metric's own and stay as they are.

use super::outcome::{Lack, Outcome, Why};
use crate::model::timeline::SourceFormat;

/// What `lack` means on a trace of `format`, where the PyTorch advice does
/// not fit; `None` for PyTorch traces, whose metrics word it themselves.
fn restated(lack: Lack, format: SourceFormat) -> Option<&'static str> {
    use Lack::*;
    use SourceFormat::*;
    Some(match (lack, format) {
        (_, PyTorch) => return None,
        (Flops, Nsys) => "Nsight Systems exports record no per-op FLOPs",
        (Flops, Xla) => "this XLA trace records no per-op FLOPs",
        (MemorySnapshot, Nsys) => {
            "no CUDA memory snapshot (a PyTorch file, torch.cuda.memory._dump_snapshot) beside the export"
        }
        (MemorySnapshot, Xla) => "CUDA memory snapshots are PyTorch files; XLA traces have none",
        (CollSizes, Nsys) => "Nsight Systems exports record no collective message sizes",
        (CollSizes, Xla) => "this XLA trace records no collective message sizes",
        (LaunchCalls, Nsys) => "the export has no CUDA runtime launch calls (profile with -t cuda)",
        (LaunchCalls, Xla) => "XLA traces record no kernel-launch calls",
        (LaunchGrids, Nsys) => "the export has no launch grids with a known SM count",
        (LaunchGrids, Xla) => "XLA traces record no launch grids",
        (Steps, Nsys) => {
            "the export has no steps (NVTX ranges named ProfilerStep#N or step_N mark them)"
        }
        (Steps, Xla) => {
            "no XLA program ran repeatedly and took most of the device's program time (as a training step does), so per-step figures do not apply"
        }
    })
}

/// `out`, what it lacks worded for `format`.
pub(crate) fn for_format(out: Outcome, format: SourceFormat) -> Outcome {
    match out {
        Outcome::NotApplicable(Why::Lacks(lack, pytorch)) => match restated(lack, format) {
            Some(said) => Outcome::na(said),
            None => Outcome::NotApplicable(Why::Lacks(lack, pytorch)),
        },
        out => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytorch_advice_is_restated_for_other_profilers() {
        let why = "no op carries a `flops` arg (profile with torch.profiler(with_flops=True))";
        let na = || Outcome::lacks(Lack::Flops, why);
        assert_eq!(for_format(na(), SourceFormat::PyTorch), na());
        assert_eq!(
            for_format(na(), SourceFormat::Xla),
            Outcome::na("this XLA trace records no per-op FLOPs")
        );
        assert!(matches!(
            for_format(na(), SourceFormat::Nsys),
            Outcome::NotApplicable(w) if w.starts_with("Nsight Systems")
        ));
        // Values and other reasons stay.
        assert_eq!(
            for_format(Outcome::value(1.0), SourceFormat::Xla),
            Outcome::value(1.0)
        );
        assert_eq!(
            for_format(Outcome::na("needs at least 2 ranks"), SourceFormat::Xla),
            Outcome::na("needs at least 2 ranks")
        );
        // What a reason lacks is its kind, not words it happens to contain.
        assert_eq!(
            for_format(Outcome::na(why), SourceFormat::Xla),
            Outcome::na(why)
        );
    }
}
