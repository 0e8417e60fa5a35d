//! Cross-rank verdicts through the whole pipeline (files, clock alignment,
//! matching, blame), on runs shaped like the ones that fooled the tool: a
//! late pair, a send/recv between two steps' all-reduces on one host, and a
//! rank whose timeline runs 15 % slow on a shared clock.

use ccl_bench::synth::{Coll, RankTrace};

use crate::support::{run, stderr, stdout, write_ranks};

const AR: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";

/// `ranks` ranks, `steps` steps of 2 ms: compute until `compute(r)` µs into
/// the step, then an all-reduce that ends at 1,900 µs on every rank; ranks
/// 1 and 2 send/recv 300 µs first when `p2p`.
fn run_of(ranks: u32, steps: u32, compute: impl Fn(u32) -> f64, p2p: bool) -> Vec<RankTrace> {
    let c = Coll::all_reduce_f32(1 << 20, ranks);
    (0..ranks)
        .map(|r| {
            let mut t = RankTrace::new(Some(r), ranks, 108);
            for k in 0..steps {
                let at = 2000.0 * f64::from(k);
                t.step(k + 1, at, 2000.0);
                let mut busy = at + compute(r);
                t.kernel("sm90_xmma_gemm_bf16", at, compute(r), 7, 108);
                if p2p && (r == 1 || r == 2) {
                    let peer = 3 - r;
                    t.p2p(r == 1, Some(peer), busy, 100.0, ranks);
                    busy += 100.0;
                }
                t.collective(AR, busy, at + 1900.0 - busy, 20, &c);
            }
            t
        })
        .collect()
}

fn dir_arg(d: &tempfile::TempDir) -> &str {
    d.path().to_str().unwrap()
}

/// Ranks 1 and 2 compute 1,640 µs where 0 and 3 compute 10: they arrive
/// late together, and the verdict names both.
#[test]
fn a_late_pair_is_the_verdict() {
    let dir = write_ranks(&run_of(
        4,
        3,
        |r| if r == 1 || r == 2 { 1640.0 } else { 10.0 },
        false,
    ));
    let o = run(&["--trace", dir_arg(&dir), "--metrics", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let m = |name: &str| {
        doc["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| m["name"] == name)
            .cloned()
            .unwrap()
    };
    let slowest = m("slowest_rank");
    assert_eq!(slowest["value"].as_f64(), Some(1.0), "{slowest}");
    let note = slowest["note"].as_str().unwrap();
    assert!(
        note.starts_with("ranks {1, 2} arrive late together"),
        "{note}"
    );
    // The others wait 1,630 µs of the 2 ms step for them.
    let share = m("straggler_wait_share")["value"].as_f64().unwrap();
    assert!((share - (1.0 + 1630.0 / 2000.0)).abs() < 1e-6, "{share}");
    let whatif = m("whatif_no_straggler_step_s")["value"].as_f64().unwrap();
    assert!(whatif < 2e-3, "{whatif}");
    // One host clock: nothing moved.
    assert!(
        doc["clock_offsets"].as_array().is_none_or(|a| a.is_empty()),
        "{}",
        doc["clock_offsets"]
    );
}

/// Ranks 1 and 2 send/recv before each step's all-reduce: the sends pair
/// with the recvs (2 members), the all-reduces with each other (4), all
/// within one step, and no clock moves.
#[test]
fn a_send_recv_between_all_reduces_on_one_host() {
    let dir = write_ranks(&run_of(4, 3, |_| 500.0, true));
    let o = run(&["collectives", dir_arg(&dir), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!stderr(&o).contains("clock"), "{}", stderr(&o));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let inst = doc["instances"].as_array().unwrap();
    assert_eq!(inst.len(), 6);
    let p2p: Vec<_> = inst
        .iter()
        .filter(|i| i["members"].as_array().unwrap().len() == 2)
        .collect();
    assert_eq!(p2p.len(), 3);
    for i in &p2p {
        assert_eq!(i["key"]["channel"], "0 p2p 1->2", "{i}");
        assert_eq!(i["group"], "0", "{i}");
        assert!(
            i["matched_by"].as_str().unwrap().contains("Src/Dst Rank"),
            "{i}"
        );
    }
    for i in inst {
        let steps: Vec<_> = i["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["step"].clone())
            .collect();
        assert!(steps.iter().all(|s| *s == steps[0]), "{i}");
    }
}

/// Rank 3's trace stretched by 1.15 on the clock it shares with the
/// others (an injected straggler): its collectives do not end with the
/// others', so no offset fits; raw clocks are kept, the verdict is unknown,
/// and the work comparison names rank 3.
#[test]
fn a_stretched_rank_is_unknown_by_clock_and_named_by_work() {
    let mut ranks = run_of(4, 10, |_| 1500.0, false);
    let slow = run_of(4, 10, |_| 1500.0, false).remove(3);
    let mut v: serde_json::Value = serde_json::from_str(&slow.to_json()).unwrap();
    for e in v["traceEvents"].as_array_mut().unwrap() {
        for k in ["ts", "dur"] {
            if let Some(x) = e[k].as_f64() {
                e[k] = serde_json::json!(x * 1.15);
            }
        }
    }
    ranks.truncate(3);
    let dir = write_ranks(&ranks);
    std::fs::write(dir.path().join("rank3_trace.json"), v.to_string()).unwrap();
    let o = run(&["--trace", dir_arg(&dir), "--metric", "slowest_rank"]);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    let err = stderr(&o);
    assert!(
        err.contains("clock offsets too uncertain to apply (rank 3"),
        "{err}"
    );
    assert!(
        err.contains("unknown (clock offsets too uncertain"),
        "{err}"
    );
    assert!(err.contains("by work: rank 3 works"), "{err}");
}
