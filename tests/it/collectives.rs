//! `ccl-bench collectives`: one row per matched collective with its members,
//! the grouped view, and agreement with the Stragglers verdict.

use ccl_bench::synth::{late_pair, tp_dp_grid};

use crate::support::{corpus, run, stderr, stdout, write_ranks};

fn json(args: &[&str]) -> serde_json::Value {
    let o = run(args);
    assert!(o.status.success(), "{}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap()
}

#[test]
fn late_pair_instance_and_group() {
    // Rank 0 starts the all-reduce at 10 µs, rank 1 at 40 µs; both end at 60.
    let dir = write_ranks(&late_pair());
    let p = dir.path().to_str().unwrap();
    let doc = json(&["collectives", p, "--format", "json", "--align", "none"]);
    let inst = doc["instances"].as_array().unwrap();
    assert_eq!(inst.len(), 1);
    let i = &inst[0];
    assert_eq!(i["kind"], "all_reduce");
    assert_eq!(i["last_rank"], 1);
    assert_eq!(i["last_by_ns"], 30_000);
    assert_eq!(i["wait_ns"], 30_000);
    assert_eq!(i["transfer_ns"], 20_000);
    // 4 bytes in 20 µs; factor 2(n-1)/n = 1 for n = 2.
    assert_eq!(i["busbw_Bps"].as_f64(), Some(200_000.0));
    assert_eq!(i["members"].as_array().unwrap().len(), 2);
    let g = &doc["groups"][0];
    assert_eq!(
        (g["count"].as_u64(), g["culprit"]["rank"].as_u64()),
        (Some(1), Some(1))
    );
    // CSV: a header and one row; the grouped view alone.
    let o = run(&["collectives", p, "--format", "csv", "--align", "none"]);
    let text = stdout(&o);
    assert_eq!(text.lines().count(), 2, "{text}");
    let row = text.lines().nth(1).unwrap();
    // id, kind, group (the trace's process group "0"), role (both ranks of
    // the job), seq, n, bytes, start, end, wait, transfer, algbw, busbw,
    // last rank, late by.
    assert_eq!(
        row,
        "0,all_reduce,0,world,0,2,4,10000,60000,30000,20000,200000,200000,1,30000"
    );
    let o = run(&["collectives", p, "--grouped"]);
    assert!(stdout(&o).contains("rank 1 (30.0 µs)"), "{}", stdout(&o));
}

#[test]
fn dlrm_instances_have_their_eight_members_and_blame_the_straggler() {
    let Some(d) = corpus("kineto/dlrm_8rank_v100") else {
        return;
    };
    let p = d.to_str().unwrap();
    let doc = json(&["collectives", p, "--format", "json"]);
    let inst = doc["instances"].as_array().unwrap();
    let kinds: Vec<&str> = inst.iter().map(|i| i["kind"].as_str().unwrap()).collect();
    assert_eq!(kinds.iter().filter(|k| **k == "all_to_all").count(), 5);
    assert_eq!(kinds.iter().filter(|k| **k == "all_reduce").count(), 3);
    for i in inst {
        let ranks: Vec<u64> = i["members"]
            .as_array()
            .unwrap()
            .iter()
            .map(|m| m["rank"].as_u64().unwrap())
            .collect();
        assert_eq!(ranks, (0..8).collect::<Vec<_>>());
    }
    // The rank whose late arrivals caused the most wait is the Stragglers verdict.
    let mut caused = [0i64; 8];
    for i in inst {
        caused[i["last_rank"].as_u64().unwrap() as usize] += i["last_by_ns"].as_i64().unwrap();
    }
    let most = (0..8).max_by_key(|&r| caused[r]).unwrap();
    let o = run(&["--trace", p, "--metric", "slowest_rank"]);
    assert_eq!(stdout(&o).trim(), most.to_string());
    // Sorted by wait, largest first.
    let o = run(&["collectives", p, "--sort", "wait", "--format", "csv"]);
    let waits: Vec<i64> = stdout(&o)
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(9).unwrap().parse().unwrap())
        .collect();
    assert!(waits.windows(2).all(|w| w[0] >= w[1]), "{waits:?}");
    // The table's start is on the Timeline's origin (the first device op of
    // any rank), as the Collectives tab's is: all-to-all 1 at 11.4 ms, the
    // first at 2.06 ms (it said 0 and 9.30 ms, from the first collective).
    let table = stdout(&run(&["collectives", p]));
    let start = |id: &str| {
        table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(id))
            .map(|l| {
                l.split_whitespace()
                    .skip(6)
                    .take(2)
                    .collect::<Vec<_>>()
                    .join(" ")
            })
    };
    assert_eq!(start("0").as_deref(), Some("2.06 ms"), "{table}");
    assert_eq!(start("1").as_deref(), Some("11.4 ms"), "{table}");
}

#[test]
fn hockney_fit_per_kind_over_two_sizes() {
    use ccl_bench::synth::{Coll, RankTrace};
    // Two ranks, all-reduces of 2^20 and 2^22 f32 (4 MiB, 16 MiB) started
    // together, taking 30 and 90 µs: β = 60 µs / 12 MiB, α = 30 µs − 4 MiB·β = 10 µs.
    let mut ranks = vec![
        RankTrace::new(Some(0), 2, 10),
        RankTrace::new(Some(1), 2, 10),
    ];
    for r in &mut ranks {
        let name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
        r.collective(name, 0.0, 30.0, 20, &Coll::all_reduce_f32(1 << 20, 2));
        r.collective(name, 100.0, 90.0, 20, &Coll::all_reduce_f32(1 << 22, 2));
    }
    let dir = write_ranks(&ranks);
    let doc = json(&[
        "collectives",
        dir.path().to_str().unwrap(),
        "--format",
        "json",
    ]);
    let f = &doc["fits"][0];
    assert_eq!(
        (f["kind"].as_str(), f["sizes"].as_u64()),
        (Some("all_reduce"), Some(2))
    );
    let beta = 60e-6 / (12.0 * 1024.0 * 1024.0);
    assert!(
        (f["beta_s_per_byte"].as_f64().unwrap() - beta).abs() < 1e-18,
        "{f}"
    );
    assert!(
        (f["alpha_s"].as_f64().unwrap() - 10e-6).abs() < 1e-12,
        "{f}"
    );
    assert!(f["residual_s"].as_f64().unwrap() < 1e-12);
    let o = run(&["collectives", dir.path().to_str().unwrap(), "--grouped"]);
    assert!(stdout(&o).contains("Hockney fit"), "{}", stdout(&o));
}

#[test]
fn process_groups_and_roles_of_a_tp_dp_grid() {
    // 2 × 2: tp pairs {0, 1}, {2, 3} (groups 1, 2), dp pairs {0, 2}, {1, 3}.
    let dir = write_ranks(&tp_dp_grid(true));
    let p = dir.path().to_str().unwrap();
    let doc = json(&["collectives", p, "--format", "json", "--align", "none"]);
    let pgs = doc["process_groups"].as_array().unwrap();
    let role = |name: &str| {
        let g = pgs.iter().find(|g| g["name"] == name).unwrap();
        (
            g["role"].as_str().unwrap(),
            g["role_from"].as_str().unwrap(),
        )
    };
    assert_eq!(role("1"), ("tp", "pg_desc"));
    assert_eq!(role("4"), ("dp", "pg_desc"));
    assert_eq!(pgs[2]["ranks"], serde_json::json!([0, 2]));
    // 8 instances: per step, one in each of the four groups.
    let inst = doc["instances"].as_array().unwrap();
    assert_eq!(inst.len(), 8);
    let tp = inst.iter().filter(|i| i["role"] == "tp").count();
    assert_eq!(tp, 4);
    // The per-role breakdown as CSV rows `metric.part`.
    let o = run(&["--trace", p, "--metrics", "--format", "csv"]);
    let text = stdout(&o);
    let row = |name: &str| {
        text.lines()
            .find(|l| l.starts_with(&format!("{name},")))
            .unwrap_or_else(|| panic!("no {name} in {text}"))
            .split(',')
            .nth(1)
            .unwrap()
            .parse::<f64>()
            .unwrap()
    };
    assert!((row("comm_time_by_role_s.tp") - 17.5e-6).abs() < 1e-12);
    assert!((row("comm_time_by_role_s.dp") - 40e-6).abs() < 1e-12);
    assert!((row("comm_wait_by_role_s.tp") - 2.5e-6).abs() < 1e-12);
    // One part as a bare number; a part the run lacks exits 3 and names those it has.
    let o = run(&["--trace", p, "--metric", "comm_time_by_role_s.tp"]);
    let tp: f64 = stdout(&o).trim().parse().unwrap();
    assert!((tp - 17.5e-6).abs() < 1e-12, "{tp}");
    let o = run(&["--trace", p, "--metric", "comm_time_by_role_s.pp"]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("parts: tp, dp"), "{}", stderr(&o));
    let o = run(&["--trace", p, "--metric", "hockney_alpha_by_role_s"]);
    let alpha: f64 = stdout(&o).trim().parse().unwrap();
    assert!((alpha - 10e-6).abs() < 1e-12, "{alpha}");
}
