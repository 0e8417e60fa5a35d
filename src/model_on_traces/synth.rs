//! The synthetic training run, as the metrics see it.

use crate::metrics::testing::{trace, value};
use crate::synth::*;

#[test]
fn training_run_is_deterministic() {
    let a: Vec<String> = training_run(&RunShape::default())
        .iter()
        .map(RankTrace::to_json)
        .collect();
    let b: Vec<String> = training_run(&RunShape::default())
        .iter()
        .map(RankTrace::to_json)
        .collect();
    assert_eq!(a, b);
}

#[test]
fn the_straggler_is_the_busiest_rank_and_others_wait() {
    let t = trace(&training_run(&RunShape::default()));
    let ctx = crate::metrics::Ctx::new(&t, None).unwrap();
    let compute: Vec<crate::model::Ns> = ctx.stats().iter().map(|s| s.whole.compute).collect();
    // Rank 5 computes ~30 % longer than rank 0.
    let slow = compute[5].as_f64() / compute[0].as_f64();
    assert!((1.25..1.4).contains(&slow), "{slow}");
    // Busy time hides it: the fast ranks are busy inside NCCL kernels, waiting.
    assert!(value(&t, "load_imbalance_ratio", None) < 1.1);
    // Fast ranks wait inside collectives, so they spend more time communicating.
    let comm5 = value(&t, "communication_ratio", Some(5));
    let comm0 = value(&t, "communication_ratio", Some(0));
    assert!(comm0 > comm5, "rank 0 {comm0} vs straggler {comm5}");
    assert!(value(&t, "communication_overlap_ratio", None) > 0.0);
    assert_eq!(value(&t, "coll_call_num", None), f64::from(2 * 8 + 1));
}
