//! Execution-trace nodes linked to the profiler's communication kernels.

use crate::metrics::testing::trace;
use crate::model::exec_trace::{link_sizes, EtColl, EtRank, Linked};
use crate::model::CollKind;
use crate::synth::RankTrace;

/// Three steps, each launching an all-reduce kernel and the send/recv
/// kernel of an all-to-all, no sizes recorded (no `record_param_comms`);
/// the third is cut short by the profiler after the all-reduce. The ET's
/// iteration: an all-reduce of 1,000 B, an all-to-all of 64 B. Steps 1 and
/// 2 link one for one (4 kernels), the send/recv kernel becoming the
/// all-to-all it ran; step 3 does not line up and takes nothing.
#[test]
fn nodes_link_to_kernels_step_by_step() {
    let mut r = RankTrace::new(Some(0), 2, 10);
    for (n, at) in [(1, 0.0), (2, 100.0), (3, 200.0)] {
        r.step(n, at, 100.0);
        let ar = r.kernel(
            "ncclKernel_AllReduce_RING_LL_Sum_float",
            at + 10.0,
            20.0,
            20,
            8,
        );
        r.launch(ar, at + 1.0);
        if n < 3 {
            let a2a = r.kernel(
                "ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t",
                at + 40.0,
                10.0,
                20,
                8,
            );
            r.launch(a2a, at + 2.0);
        }
    }
    let mut t = trace(&[r]);
    let et = EtRank {
        rank: 0,
        colls: vec![
            EtColl::sized(CollKind::AllReduce, 1_000),
            EtColl::sized(CollKind::AllToAll, 64),
        ],
        ..Default::default()
    };
    let rank = &mut t.ranks[0];
    assert_eq!(
        link_sizes(rank, &et),
        Linked {
            kernels: 4,
            unmatched: vec![(3, 1)]
        }
    );
    let sized: Vec<(Option<u64>, Option<CollKind>, Option<i64>)> = rank
        .kernels()
        .filter(|o| o.is_comm())
        .map(|o| {
            (
                rank.coll_meta(o).and_then(|m| m.in_bytes()),
                o.coll,
                o.step.get().map(|s| rank.steps[s as usize].number),
            )
        })
        .collect();
    assert_eq!(
        sized,
        [
            (Some(1_000), Some(CollKind::AllReduce), Some(1)),
            (Some(64), Some(CollKind::AllToAll), Some(1)),
            (Some(1_000), Some(CollKind::AllReduce), Some(2)),
            (Some(64), Some(CollKind::AllToAll), Some(2)),
            (None, Some(CollKind::AllReduce), Some(3)),
        ]
    );
    // Linked again, nothing is left to link.
    assert_eq!(link_sizes(rank, &et).kernels, 0);
}
