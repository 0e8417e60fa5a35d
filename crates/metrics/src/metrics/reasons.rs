//! Reasons that fit the trace's format. A metric says why it does not apply
//! in PyTorch terms (`profile with torch.profiler(with_flops=True)`); on an
//! Nsight Systems or XLA trace that advice is wrong, so the reason is
//! restated in what that profiler can and cannot record.

use super::outcome::Outcome;
use crate::model::timeline::SourceFormat;

/// (what the PyTorch reason mentions, the reason for Nsight Systems, for XLA)
const RESTATED: &[(&str, &str, &str)] = &[
    (
        "with_flops=True",
        "Nsight Systems exports record no per-op FLOPs",
        "this XLA trace records no per-op FLOPs",
    ),
    (
        "_dump_snapshot",
        "no CUDA memory snapshot (a PyTorch file, torch.cuda.memory._dump_snapshot) beside the export",
        "CUDA memory snapshots are PyTorch files; XLA traces have none",
    ),
    (
        "record_param_comms",
        "Nsight Systems exports record no collective message sizes",
        "this XLA trace records no collective message sizes",
    ),
    (
        "cuda_runtime / cuda_driver",
        "the export has no CUDA runtime launch calls (profile with -t cuda)",
        "XLA traces record no kernel-launch calls",
    ),
    (
        "blocks per SM",
        "the export has no launch grids with a known SM count",
        "XLA traces record no launch grids",
    ),
    (
        "ProfilerStep annotations",
        "the export has no steps (NVTX ranges named ProfilerStep#N or step_N mark them)",
        "XLA traces carry no step markers, so per-step figures do not apply",
    ),
];

/// `out`, its reason restated for `format` where the PyTorch advice does not fit.
pub fn for_format(out: Outcome, format: SourceFormat) -> Outcome {
    let Outcome::NotApplicable(why) = &out else {
        return out;
    };
    let pick = |&(_, nsys, xla): &(&str, &'static str, &'static str)| match format {
        SourceFormat::PyTorch => None,
        SourceFormat::Nsys => Some(nsys),
        SourceFormat::Xla => Some(xla),
    };
    match RESTATED.iter().find(|r| why.contains(r.0)).and_then(pick) {
        Some(restated) => Outcome::na(restated),
        None => out,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytorch_advice_is_restated_for_other_profilers() {
        let why = "no op carries a `flops` arg (profile with torch.profiler(with_flops=True))";
        let na = || Outcome::na(why);
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
    }
}
