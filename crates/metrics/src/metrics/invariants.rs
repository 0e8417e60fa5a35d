//! Property tests: for any set of kernels, the interval metrics keep the
//! relations that hold by construction (overlap <= min(compute, comm), union <=
//! sum, shares within [0, 1] or [0, 100], exposed = comm - overlap).

use proptest::prelude::*;

use super::testing::{eval, trace};
use super::Outcome;
use crate::synth::{Coll, RankTrace};

/// (communication?, start µs, duration µs, stream)
type Op = (bool, u32, u32, u32);

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec((any::<bool>(), 0u32..1000, 0u32..300, 0u32..3), 1..25)
}

/// One rank, one step around everything, so per-step and whole-trace metrics agree.
fn rank(ops: &[Op]) -> RankTrace {
    let mut r = RankTrace::new(Some(0), 1, 10);
    r.step(1, 0.0, 2000.0);
    let ar = Coll::all_reduce_f32(1 << 20, 1);
    for &(comm, start, dur, stream) in ops {
        let (ts, d) = (f64::from(start), f64::from(dur));
        if comm {
            r.collective(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                ts,
                d,
                stream + 10,
                &ar,
            );
        } else {
            r.kernel("sm90_xmma_gemm_bf16", ts, d, stream, 8);
        }
    }
    r
}

fn get(t: &crate::model::Trace, name: &str) -> Option<f64> {
    match eval(t, name, Some(0)) {
        Outcome::Value(m) => Some(m.value),
        Outcome::NotApplicable(_) => None,
    }
}

const EPS: f64 = 1e-12;

proptest! {
    #[test]
    fn interval_metrics_keep_their_invariants(ops in ops()) {
        let t = trace(&[rank(&ops)]);
        let sum = |comm: bool| ops.iter().filter(|o| o.0 == comm).map(|o| f64::from(o.2)).sum::<f64>() * 1e-6;
        let compute_union = get(&t, "total_compute_time_s").unwrap_or(0.0);
        let comm_union = get(&t, "total_comm_time_s").unwrap_or(0.0);
        // Union <= sum, for both kinds.
        prop_assert!(compute_union <= sum(false) + EPS, "{compute_union} > {}", sum(false));
        prop_assert!(comm_union <= sum(true) + EPS, "{comm_union} > {}", sum(true));
        if let Some(summed) = get(&t, "total_communication_time") {
            prop_assert!((summed - sum(true)).abs() <= EPS);
        }
        if let Some(ratio) = get(&t, "communication_overlap_ratio") {
            prop_assert!((0.0..=1.0).contains(&ratio), "{ratio}");
            let overlap = ratio * comm_union;
            prop_assert!(overlap <= compute_union.min(comm_union) + EPS);
            let pct = get(&t, "compute_comm_overlap").unwrap();
            prop_assert!((pct - 100.0 * ratio).abs() <= 1e-9);
            let exposed = get(&t, "exposed_comm_time_s").unwrap();
            prop_assert!((exposed - (comm_union - overlap)).abs() <= 1e-9, "{exposed} vs {comm_union} - {overlap}");
        }
        for share in ["communication_fraction", "aggregate_gpu_utilization", "dominant_kernel_concentration"] {
            if let Some(v) = get(&t, share) {
                prop_assert!((0.0..=100.0 + 1e-9).contains(&v), "{share} = {v}");
            }
        }
    }
}
