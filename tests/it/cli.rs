use std::io::Write;

use ccl_bench::synth::two_rank_example;

use crate::support::{assert_close, run, stderr, stdout, write_ranks};

#[test]
fn bare_number_on_stdout() {
    let dir = write_ranks(&two_rank_example());
    let p = dir.path().to_str().unwrap();
    let o = run(&["--trace", p, "--metric", "communication_ratio"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert_eq!(out.lines().count(), 1, "only the number: {out:?}");
    assert_close(
        out.trim().parse().unwrap(),
        (60.0 / 145.0 * 100.0 + 50.0) / 2.0,
        "communication_ratio",
    );
    // Counts print as integers.
    assert_eq!(
        stdout(&run(&["--trace", p, "--metric", "coll_call_num"])).trim(),
        "1"
    );
    // --rank narrows to one rank.
    let o = run(&[
        "--trace",
        p,
        "--metric",
        "communication_ratio",
        "--rank",
        "1",
    ]);
    assert_eq!(stdout(&o).trim(), "50");
}

#[test]
fn single_file_trace() {
    let dir = write_ranks(&two_rank_example());
    let f = dir.path().join("rank1_trace.json");
    let o = run(&["--trace", f.to_str().unwrap(), "--metric", "avg_step_time"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_close(stdout(&o).trim().parse().unwrap(), 200e-6, "avg_step_time");
}

#[test]
fn gzip_detected_by_content_not_extension() {
    let dir = tempfile::tempdir().unwrap();
    let text = two_rank_example()[1].to_json();
    // A gzip stream behind a plain .json name.
    let f = std::fs::File::create(dir.path().join("rank1_trace.json")).unwrap();
    let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
    gz.write_all(text.as_bytes()).unwrap();
    gz.finish().unwrap();
    let o = run(&[
        "--trace",
        dir.path().to_str().unwrap(),
        "--metric",
        "total_kernel_time",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_close(
        stdout(&o).trim().parse().unwrap(),
        200e-6,
        "total_kernel_time",
    );
}

#[test]
fn not_applicable_exits_3_with_reason() {
    let dir = write_ranks(&two_rank_example());
    let p = dir.path().to_str().unwrap();
    let o = run(&[
        "--trace",
        p,
        "--metric",
        "load_imbalance_ratio",
        "--rank",
        "0",
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert_eq!(stdout(&o), "");
    assert!(
        stderr(&o).contains("needs at least 2 ranks"),
        "{}",
        stderr(&o)
    );
    // Old scripts expect -1.
    let o = run(&[
        "--trace",
        p,
        "--metric",
        "load_imbalance_ratio",
        "--rank",
        "0",
        "--missing",
        "-1",
    ]);
    assert_eq!(o.status.code(), Some(0));
    assert_eq!(stdout(&o).trim(), "-1");
}

#[test]
fn unknown_metric_lists_close_names() {
    let o = run(&["--trace", "/nonexistent", "--metric", "comunication_ratio"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stdout(&o), "");
    assert!(stderr(&o).contains("communication_ratio"), "{}", stderr(&o));
}

#[test]
fn all_metrics_table_json_csv() {
    let dir = write_ranks(&two_rank_example());
    let p = dir.path().to_str().unwrap();
    let table = stdout(&run(&["--trace", p, "--metrics"]));
    for m in ccl_bench::metrics::METRICS {
        assert!(table.contains(m.name), "table lacks {}", m.name);
    }
    assert!(table.contains("2 ranks (ranks 0-1)"), "{table}");
    let o = run(&["--trace", p, "--all", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("valid JSON");
    let metrics = doc["metrics"].as_array().unwrap();
    assert_eq!(metrics.len(), ccl_bench::metrics::METRICS.len());
    let bd = metrics
        .iter()
        .find(|m| m["name"] == "break_down_steps")
        .unwrap();
    assert_eq!(bd["parts"].as_array().unwrap().len(), 6);
    let ratio = metrics
        .iter()
        .find(|m| m["name"] == "communication_ratio")
        .unwrap();
    assert_eq!(ratio["per_rank"]["1"], 50.0);
    let csv = stdout(&run(&["--trace", p, "--metrics", "--format", "csv"]));
    assert!(csv.starts_with("metric,value,unit,min,min_rank,max,max_rank,status,about"));
    assert!(csv.contains("\ncommunication_ratio,"));
    assert!(csv.contains("\nbreak_down_steps.other_compute,"));
}

#[test]
fn list_metrics_and_classes() {
    let o = run(&["--list-metrics"]);
    assert!(o.status.success());
    let out = stdout(&o);
    for m in ccl_bench::metrics::METRICS {
        assert!(out.contains(m.name));
    }
    let out = stdout(&run(&["--list-classes"]));
    assert!(out.contains("communication") && out.contains("gemm"));
}

#[test]
fn iteration_layout_picks_newest_or_the_one_asked() {
    let dir = tempfile::tempdir().unwrap();
    let ranks = two_rank_example();
    for (k, r) in [(3, &ranks[0]), (5, &ranks[1])] {
        let it = dir.path().join(format!("profile_traces/iteration_{k}"));
        std::fs::create_dir_all(&it).unwrap();
        std::fs::write(it.join("rank0_trace.json"), r.to_json()).unwrap();
    }
    let p = dir.path().to_str().unwrap();
    // Newest: iteration 5 holds the one-step trace (200 µs).
    let o = run(&["--trace", p, "--metric", "avg_step_time"]);
    assert_close(
        stdout(&o).trim().parse().unwrap(),
        200e-6,
        "newest iteration",
    );
    let o = run(&[
        "--trace",
        p,
        "--metric",
        "avg_step_time",
        "--iteration",
        "3",
    ]);
    assert_close(stdout(&o).trim().parse().unwrap(), 100e-6, "iteration 3");
    let o = run(&[
        "--trace",
        p,
        "--metric",
        "avg_step_time",
        "--iteration",
        "4",
    ]);
    assert_ne!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("iteration 4 not found; available: 3, 5"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn help_describes_the_tool() {
    let out = stdout(&run(&["--help"]));
    assert!(out.contains("--metric") && out.contains("Exit status"));
}

#[test]
fn bundled_sample_is_what_the_generator_writes() {
    use ccl_bench::synth::{samples, training_run, SAMPLE_CARD};
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("trace_collection");
    for (name, shape) in samples() {
        let dir = root.join(name);
        for (rank, t) in training_run(&shape).iter().enumerate() {
            let committed =
                std::fs::read_to_string(dir.join(format!("rank{rank}_trace.json"))).unwrap();
            assert!(
                committed == t.to_json(),
                "{name} rank {rank} differs: rerun `cargo run --example gen_sample`"
            );
        }
        assert_eq!(
            std::fs::read_to_string(dir.join("workload_card.yaml")).unwrap(),
            SAMPLE_CARD
        );
    }
    let dir = root.join("llama_fsdp_8gpu");
    // And the README's run command works on it.
    let o = run(&[dir.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains("8 ranks (ranks 0-7)"));
}

#[test]
fn compare_two_runs() {
    let a = write_ranks(&two_rank_example());
    let (pa, pb) = (a.path().to_str().unwrap(), a.path().to_str().unwrap());
    // A run against itself: no differences, exit 0, even as a CI gate.
    let o = run(&["compare", pa, pb, "--fail-on-regression"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("avg_step_time"), "{out}");
    assert!(
        !out.lines().any(|l| l.trim_end().ends_with("WORSE")),
        "{out}"
    );
    let o = run(&["compare", pa, pb, "--metric", "avg_step_time"]);
    assert_eq!(stdout(&o).trim(), "0");
    // B: rank 1's step is slower (its all-reduce takes 2x): worse step time.
    let mut slow = two_rank_example();
    slow.truncate(1);
    let b = write_ranks(&slow);
    let o = run(&[
        "compare",
        pa,
        b.path().to_str().unwrap(),
        "--format",
        "json",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let step = v["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["metric"] == "avg_step_time")
        .unwrap();
    // A: mean of rank 0 (100 µs) and rank 1 (200 µs) = 150 µs; B: rank 0 only, 100 µs.
    assert_close(step["delta"].as_f64().unwrap(), -50e-6, "delta");
    assert_eq!(step["verdict"], "better");
    assert!(v["ranks"]["not_compared"]
        .as_str()
        .unwrap()
        .contains("2 vs 1"));
    let o = run(&[
        "compare",
        b.path().to_str().unwrap(),
        pa,
        "--fail-on-regression",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("avg_step_time"), "{}", stderr(&o));
    // `ccl-bench A B` without a terminal prints the same comparison.
    let o = run(&[pa, b.path().to_str().unwrap(), "--metric", "avg_step_time"]);
    assert_close(stdout(&o).trim().parse().unwrap(), -50e-6, "bare delta");
    let o = run(&[pa, pb]);
    assert!(
        o.status.success() && stdout(&o).contains("B - A"),
        "{}",
        stdout(&o)
    );
}

#[test]
fn user_class_rules_beside_the_trace() {
    let dir = write_ranks(&two_rank_example());
    let p = dir.path().to_str().unwrap();
    // Built in: the fused MoE kernel (10 µs of rank 0's 145 µs of kernels) is MoE.
    let moe = |o: &std::process::Output| stdout(o).trim().parse::<f64>().unwrap();
    assert_close(
        moe(&run(&[
            "--trace",
            p,
            "--metric",
            "moe_fraction",
            "--rank",
            "0",
        ])),
        10.0 / 145.0 * 100.0,
        "moe",
    );
    // A rules file beside the trace makes it a GEMM.
    std::fs::write(
        dir.path().join("ccl-bench-classes.toml"),
        "[[rule]]\nclass = \"gemm\"\npattern = \"^fused_moe\"\n",
    )
    .unwrap();
    let o = run(&["--trace", p, "--metric", "moe_fraction", "--rank", "0"]);
    assert_eq!(moe(&o), 0.0);
    assert!(
        stderr(&o).contains("1 op(s) reclassified"),
        "{}",
        stderr(&o)
    );
    // A broken rules file is an error naming it.
    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[[rule]]\nclass = \"magic\"\npattern = \"x\"\n").unwrap();
    let o = run(&[
        "--trace",
        p,
        "--classes",
        bad.to_str().unwrap(),
        "--metrics",
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("bad.toml") && stderr(&o).contains("unknown class 'magic'"),
        "{}",
        stderr(&o)
    );
}

/// A JAX/TF profiler trace JSON (device processes) is told from a PyTorch one
/// by its content and read as one rank per device.
#[test]
fn xla_trace_json_by_content() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("host1.trace.json");
    std::fs::write(
        &f,
        r#"{"traceEvents": [
        {"ph": "M", "pid": 7, "name": "process_name", "args": {"name": "/device:GPU:0"}},
        {"ph": "M", "pid": 8, "name": "process_name", "args": {"name": "/device:GPU:1"}},
        {"ph": "M", "pid": 7, "tid": 1, "name": "thread_name", "args": {"name": "Stream #14(Kernel)"}},
        {"ph": "M", "pid": 8, "tid": 1, "name": "thread_name", "args": {"name": "Stream #14(Kernel)"}},
        {"ph": "X", "pid": 7, "tid": 1, "name": "gemm_fusion", "ts": 10, "dur": 30},
        {"ph": "X", "pid": 7, "tid": 1, "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 40, "dur": 10},
        {"ph": "X", "pid": 8, "tid": 1, "name": "gemm_fusion", "ts": 12, "dur": 20}
    ]}"#,
    )
    .unwrap();
    let p = f.to_str().unwrap();
    let o = run(&["--trace", p, "--inputs"]);
    assert!(
        stdout(&o).starts_with("XLA profiler trace JSON"),
        "{}",
        stdout(&o)
    );
    // 30 + 10 + 20 µs of kernels over two ranks; one all-reduce.
    let o = run(&["--trace", p, "--metric", "total_kernel_time"]);
    assert_close(stdout(&o).trim().parse().unwrap(), 60e-6, "kernel time");
    let o = run(&["--trace", p, "--metric", "num_comm_kernels"]);
    assert_eq!(stdout(&o).trim(), "1", "{}", stderr(&o));
}

/// One message for a name that is no metric, wherever a metric is asked for.
#[test]
fn an_unknown_metric_is_named_with_the_closest_in_every_command() {
    let s = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/trace_collection/llama_fsdp_8gpu"
    );
    let asks: [&[&str]; 2] = [
        &["--trace", s, "--metric", "avg_step_tme"],
        &["compare", s, s, "--metric", "avg_step_tme"],
    ];
    for args in asks {
        let o = run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let err = stderr(&o);
        assert!(
            err.contains("unknown metric 'avg_step_tme'; did you mean avg_step_time"),
            "{args:?}: {err}"
        );
        assert!(o.stdout.is_empty());
    }
}
