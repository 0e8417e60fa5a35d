//! The one-answer commands (`overview`, `stragglers`, `ops`, `collectives
//! --kind/--top`): answers computed by hand on synthetic runs, and agreement
//! with `--metrics` on the sample and corpus traces.

use ccl_bench::synth::{tp_dp_grid, two_rank_example, Coll, RankTrace};
use serde_json::Value;

use crate::support::{assert_close, corpus, metrics_doc, run, stderr, stdout, write_ranks};

fn doc(args: &[&str]) -> Value {
    let o = run(args);
    assert!(o.status.success(), "{args:?}: {}", stderr(&o));
    serde_json::from_str(&stdout(&o)).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Four ranks, one 200 µs step and one all-reduce ending at 194 µs: ranks
/// 1 and 2 compute until 174 µs and start it then; ranks 0 and 3 start at
/// 10 µs and wait 164 µs.
fn late_group() -> Vec<RankTrace> {
    let c = Coll::all_reduce_f32(1 << 20, 4);
    (0..4u32)
        .map(|r| {
            let mut t = RankTrace::new(Some(r), 4, 10);
            t.step(1, 0.0, 200.0);
            let arrive = if r == 1 || r == 2 { 174.0 } else { 10.0 };
            t.kernel("sm90_xmma_gemm_bf16", 0.0, arrive, 7, 10);
            t.collective(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                arrive,
                194.0 - arrive,
                20,
                &c,
            );
            t
        })
        .collect()
}

fn pairs(d: &Value) -> Vec<(u64, u64, i64, u64)> {
    d["waits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| {
            (
                w["waiter"].as_u64().unwrap(),
                w["waited_for"].as_u64().unwrap(),
                w["wait_ns"].as_i64().unwrap(),
                w["collectives"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// Ranks 0 and 3 each wait 164 µs while ranks 1 and 2 are both absent: each
/// absentee is charged half of each waiter's wait, 82 µs, not one of them
/// all of it by a tie-break; each late rank causes 164 µs per step.
#[test]
fn a_late_pair_is_waited_for_in_halves() {
    let dir = write_ranks(&late_group());
    let p = dir.path().to_str().unwrap();
    let d = doc(&["stragglers", p, "--format", "json"]);
    assert_eq!(d["straggler"]["verdict"], "straggler");
    assert_eq!(d["straggler"]["late_ranks"], serde_json::json!([1, 2]));
    assert_eq!(
        pairs(&d),
        [
            (0, 1, 82_000, 1),
            (0, 2, 82_000, 1),
            (3, 1, 82_000, 1),
            (3, 2, 82_000, 1)
        ]
    );
    // The ranks causing the most wait first, with what they cause per step.
    let ranks = d["ranks"].as_array().unwrap();
    assert_eq!(ranks[0]["caused_ns"], 164_000);
    assert_eq!(ranks[1]["caused_ns"], 164_000);
    assert_eq!(ranks[2]["caused_ns"], 0);
    let text = stdout(&run(&["stragglers", p]));
    assert!(text.contains("ranks {1, 2} arrive late together"), "{text}");
}

/// The 2 × 2 grid: in each of its two steps ranks 0 and 2 start their
/// tensor-parallel all-reduce 5 µs before their partners 1 and 3; the
/// data-parallel ones start together. So 0 waits 10 µs for 1 over two
/// collectives, 2 for 3 the same, and nobody else waits.
#[test]
fn who_waits_for_whom_on_the_grid() {
    let dir = write_ranks(&tp_dp_grid(true));
    let d = doc(&[
        "stragglers",
        dir.path().to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert_eq!(pairs(&d), [(0, 1, 10_000, 2), (2, 3, 10_000, 2)]);
    assert_eq!(d["waits_left_out"], 0);
    assert_eq!(d["ranks_left_out"], 0);
    let d = doc(&[
        "stragglers",
        dir.path().to_str().unwrap(),
        "--format",
        "json",
        "--top",
        "1",
    ]);
    assert_eq!(d["waits"].as_array().unwrap().len(), 1);
    assert_eq!(d["waits_left_out"], 1);
    assert_eq!(d["ranks_left_out"], 3);
}

/// Rank 0 of the two-rank example: step 2 launched K2 [110, 150), C2 [140,
/// 170) and K3 [170, 180) µs; the window [50, 120) µs overlaps C1 [30, 60),
/// M1 [60, 70) and K2.
#[test]
fn ops_of_a_step_and_of_a_window() {
    let dir = write_ranks(&two_rank_example());
    let p = dir.path().to_str().unwrap();
    let d = doc(&["ops", p, "--rank", "0", "--step", "2", "--format", "json"]);
    let names: Vec<&str> = (d["ops"].as_array().unwrap().iter())
        .map(|o| o["name"].as_str().unwrap())
        .collect();
    assert_eq!(names[0], "flash_fwd_kernel");
    assert!(names[1].starts_with("ncclDevKernel_AllGather"), "{names:?}");
    assert_eq!(names[2], "fused_moe_kernel");
    assert_eq!(
        (d["count"].as_u64(), d["left_out"].as_u64()),
        (Some(3), Some(0))
    );
    let first = &d["ops"][0];
    assert_eq!(first["dur_ns"], 40_000);
    assert_eq!(first["step"], 2);
    assert_eq!(first["class"], "attention");
    // Times are the run's: the window is taken on the same clock.
    let t0 = first["start_ns"].as_i64().unwrap() - 110_000;
    let (from, to) = ((t0 + 50_000).to_string(), (t0 + 120_000).to_string());
    let d = doc(&[
        "ops", p, "--rank", "0", "--from", &from, "--to", &to, "--limit", "2", "--format", "json",
    ]);
    assert_eq!(
        (d["count"].as_u64(), d["left_out"].as_u64()),
        (Some(3), Some(1))
    );
    let starts: Vec<i64> = (d["ops"].as_array().unwrap().iter())
        .map(|o| o["start_ns"].as_i64().unwrap() - t0)
        .collect();
    assert_eq!(starts, [30_000, 60_000]);
    // A step the rank does not have, and a rank the run does not have.
    let o = run(&["ops", p, "--rank", "0", "--step", "9"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("rank 0 has no step 9 (its steps are 1..=2)"),
        "{}",
        stderr(&o)
    );
    let o = run(&["ops", p, "--rank", "7"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains('7'), "{}", stderr(&o));
}

/// The overview's headline figures are `--metrics`' own, its straggler the
/// Stragglers' one, and its budget sums to the step.
fn overview_agrees(path: &std::path::Path) {
    let p = path.to_str().unwrap();
    let o = doc(&["overview", p, "--format", "json"]);
    let m = metrics_doc(path, p);
    let by_name = |n: &str| {
        m["metrics"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["name"] == n)
            .cloned()
            .unwrap()
    };
    let headline = o["headline"].as_array().unwrap();
    assert_eq!(headline.len(), 8, "{p}");
    for h in headline {
        let want = by_name(h["name"].as_str().unwrap());
        assert_eq!(h["value"], want["value"], "{p}: {}", h["name"]);
        assert_eq!(
            h["not_applicable"], want["not_applicable"],
            "{p}: {}",
            h["name"]
        );
    }
    assert_eq!(o["ranks"], m["ranks"].as_array().unwrap().len(), "{p}");
    let s = doc(&["stragglers", p, "--format", "json"]);
    assert_eq!(o["straggler"], s["straggler"], "{p}");
    let mean = &o["budget"]["mean"];
    if mean["step_ns"].as_i64().unwrap() > 0 {
        let sum: f64 = ["compute_only", "overlap", "exposed_comm", "copies", "idle"]
            .iter()
            .map(|k| mean["share"][format!("{k}_pct")].as_f64().unwrap())
            .sum();
        assert_close((sum * 1e3).round() / 1e3, 100.0, p);
    }
}

#[test]
fn overview_agrees_with_metrics_on_the_sample() {
    overview_agrees(&crate::support::sample());
}

#[test]
fn overview_agrees_with_metrics_on_corpus_traces() {
    for rel in [
        "kineto/dlrm_8rank_v100",
        "nsys/h100_tiny_transformer/h100_tiny_transformer_nsys.sqlite",
    ] {
        if let Some(p) = corpus(rel) {
            overview_agrees(&p);
        }
    }
}

/// `--kind` keeps one kind, `--top` the first N after sorting, and the
/// JSON counts what it cut.
#[test]
fn collectives_of_one_kind_capped() {
    let sample = crate::support::sample();
    let p = sample.to_str().unwrap();
    let all = doc(&["collectives", p, "--format", "json"]);
    let gathers = (all["instances"].as_array().unwrap().iter())
        .filter(|i| i["kind"] == "all_gather")
        .count();
    assert!(gathers > 3);
    let d = doc(&[
        "collectives",
        p,
        "--format",
        "json",
        "--kind",
        "all_gather",
        "--top",
        "3",
        "--sort",
        "wait",
        "--no-members",
    ]);
    let shown = d["instances"].as_array().unwrap();
    assert_eq!(shown.len(), 3);
    assert!(shown
        .iter()
        .all(|i| i["kind"] == "all_gather" && i.get("members").is_none()));
    assert_eq!(d["matched"], gathers);
    assert_eq!(d["left_out"], gathers - 3);
    let waits: Vec<i64> = shown
        .iter()
        .map(|i| i["wait_ns"].as_i64().unwrap())
        .collect();
    assert!(waits.windows(2).all(|w| w[0] >= w[1]), "{waits:?}");
    let o = run(&["collectives", p, "--kind", "allreduce"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("no collective kind 'allreduce'"),
        "{}",
        stderr(&o)
    );
}

/// Traces with Flight Recorder dumps beside them: the overview (and so the
/// MCP `open_run`) carries the hang verdict in brief, as `hang` gives it.
#[test]
fn overview_names_the_hang_where_dumps_are_present() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("trace_collection");
    let dir = tempfile::tempdir().unwrap();
    for src in ["llama_fsdp_8gpu", "llama_fsdp_8gpu_hang"] {
        for f in std::fs::read_dir(root.join(src)).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, dir.path().join(f.file_name().unwrap())).unwrap();
        }
    }
    let p = dir.path().to_str().unwrap();
    let o = doc(&["overview", p, "--format", "json"]);
    // `hang` exits 1 when it finds one.
    let hung = root.join("llama_fsdp_8gpu_hang");
    let out = run(&["hang", hung.to_str().unwrap(), "--format", "json"]);
    assert_eq!(out.status.code(), Some(1));
    let h: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(o["hang"]["verdict"], "hang");
    assert_eq!(o["hang"]["headline"], h["headline"]);
    assert_eq!(o["hang"]["dumps"], 8);
    // Without dumps, no such field.
    let plain = doc(&[
        "overview",
        crate::support::sample().to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(plain.get("hang").is_none());
}

/// The overview gives each warning's kind beside it: a file cut short is
/// `damaged`, a device-looking category no reader knows `ignored`.
#[test]
fn overview_gives_each_warnings_kind() {
    let dir = write_ranks(&two_rank_example());
    let f = dir.path().join("rank1_trace.json");
    let text = std::fs::read_to_string(&f).unwrap();
    let at = text.find("\"traceEvents\"").unwrap();
    let open = at + text[at..].find('[').unwrap() + 1;
    let odd = r#"{"ph": "X", "cat": "hpu_op", "name": "x", "ts": 70, "dur": 1},"#;
    let both = format!("{}{odd}{}", &text[..open], &text[open..]);
    std::fs::write(&f, &both[..both.len() - 40]).unwrap();
    let o = doc(&["overview", dir.path().to_str().unwrap(), "--format", "json"]);
    let said: Vec<(&str, &str)> = o["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .zip(o["warning_kinds"].as_array().unwrap())
        .map(|(w, k)| (w.as_str().unwrap(), k.as_str().unwrap()))
        .collect();
    assert_eq!(
        o["warnings"].as_array().unwrap().len(),
        o["warning_kinds"].as_array().unwrap().len()
    );
    let kind_of = |words: &str| said.iter().find(|(w, _)| w.contains(words)).map(|x| x.1);
    assert_eq!(kind_of("cut off"), Some("damaged"), "{said:?}");
    assert_eq!(kind_of("\"hpu_op\""), Some("ignored"), "{said:?}");
}
