//! `ccl-bench gate`: runs of known per-step noise and a known shift get the
//! verdict their statistics give, with documented exit codes.

use std::path::Path;

use ccl_bench::synth::{Coll, RankTrace};

use crate::support::{run, stderr, stdout};

/// Standard normal draws, fixed by `seed` (an LCG through Box-Muller).
fn normals(seed: u64, n: usize) -> Vec<f64> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut uniform = || {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((x >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    (0..n)
        .map(|_| {
            let (u, v) = (uniform(), uniform());
            (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
        })
        .collect()
}

/// Two ranks and `measured + 2` steps (the first and last are not
/// measured): step k lasts 1 ms × (1 + shift) × (1 + noise × z_k) on both
/// ranks, a GEMM over its first 60 % and an all-reduce after it, rank 1
/// arriving 5 % of the step late.
fn write_run(dir: &Path, measured: usize, shift: f64, noise: f64, seed: u64) {
    let z = normals(seed, measured + 2);
    let mut ranks: Vec<RankTrace> = (0..2).map(|r| RankTrace::new(Some(r), 2, 132)).collect();
    let c = Coll::all_reduce_f32(1 << 20, 2);
    let mut at = 0.0;
    for (k, z) in z.iter().enumerate() {
        let d = 1000.0 * (1.0 + shift) * (1.0 + noise * z);
        for (r, t) in ranks.iter_mut().enumerate() {
            t.step(k as u32, at, d);
            let g = t.kernel("sm90_xmma_gemm_bf16", at + 1.0, 0.6 * d, 7, 132);
            t.launch(g, at + 0.5);
            let arrive = at + (0.6 + 0.05 * r as f64) * d + 2.0;
            let end = at + 0.65 * d + 2.0 + 0.2 * d;
            let n = t.collective(
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
                arrive,
                end - arrive,
                20,
                &c,
            );
            t.launch(n, at + 0.7);
        }
        at += d + 10.0;
    }
    for (r, t) in ranks.iter().enumerate() {
        std::fs::write(dir.join(format!("rank{r}_trace.json")), t.to_json()).unwrap();
    }
}

fn runs(measured: usize, shift: f64, noise: f64) -> (tempfile::TempDir, tempfile::TempDir) {
    let (a, b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    write_run(a.path(), measured, 0.0, noise, 1);
    write_run(b.path(), measured, shift, noise, 2);
    (a, b)
}

fn gate(a: &Path, b: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["gate", a.to_str().unwrap(), b.to_str().unwrap()];
    args.extend(extra);
    run(&args)
}

fn doc(o: &std::process::Output) -> serde_json::Value {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

fn verdicts(d: &serde_json::Value) -> Vec<(String, String)> {
    d["gate"]["figures"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| {
            (
                f["figure"].as_str().unwrap().to_owned(),
                f["verdict"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

#[test]
fn a_five_percent_shift_in_twenty_steps_of_one_percent_noise_regressed() {
    let (a, b) = runs(20, 0.05, 0.01);
    let o = gate(
        a.path(),
        b.path(),
        &["--threshold", "3%", "--format", "json"],
    );
    assert_eq!(o.status.code(), Some(4), "{}", stderr(&o));
    let d = doc(&o);
    assert_eq!(d["schema_version"], 1);
    assert_eq!(d["gate"]["verdict"], "regressed");
    let step = &d["gate"]["figures"][0];
    assert_eq!(step["figure"], "step_time");
    assert_eq!(step["verdict"], "regressed", "{step}");
    assert_eq!(step["a"]["steps"], 20);
    let (lo, hi) = (
        step["interval"][0].as_f64().unwrap(),
        step["interval"][1].as_f64().unwrap(),
    );
    let change = step["change"].as_f64().unwrap();
    // About +5 %, the interval around it and above the threshold.
    assert!(lo > 0.03 && lo < change && change < hi, "{step}");
    assert!((change - 0.05).abs() < 0.015, "{step}");
    // The wait and exposed communication scale with the step: worse too;
    // the busy share does not move.
    let v = verdicts(&d);
    assert_eq!(v[3], ("busy_share".into(), "no_change".into()), "{v:?}");
    // The same runs the other way round: improved, exit 0.
    let o = gate(b.path(), a.path(), &["--threshold", "3%"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).contains("gate: improved"), "{}", stdout(&o));
}

#[test]
fn three_steps_of_ten_percent_noise_are_inconclusive() {
    let (a, b) = runs(3, 0.05, 0.10);
    let o = gate(a.path(), b.path(), &[]);
    assert_eq!(o.status.code(), Some(0), "passes by default");
    let text = stdout(&o);
    assert!(text.contains("gate: inconclusive"), "{text}");
    assert!(text.contains("straddles"), "{text}");
    let o = gate(a.path(), b.path(), &["--inconclusive", "fail"]);
    assert_eq!(o.status.code(), Some(5), "{}", stdout(&o));
    // Two measured steps: too few to know the noise.
    let (a, b) = runs(2, 0.05, 0.01);
    let o = gate(a.path(), b.path(), &["--format", "json"]);
    let d = doc(&o);
    assert_eq!(d["gate"]["verdict"], "inconclusive");
    let why = d["gate"]["figures"][0]["why"].as_str().unwrap();
    assert!(why.contains("too few measured steps"), "{why}");
}

#[test]
fn the_same_run_profiled_twice_is_no_change_and_markdown_says_so() {
    let (a, b) = runs(20, 0.0, 0.01);
    let o = gate(a.path(), b.path(), &["--format", "markdown"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let md = stdout(&o);
    assert!(md.starts_with("### 🟢 gate: no change"), "{md}");
    assert!(md.contains("| `step_time` |"), "{md}");
    // A run that is not there: the CLI's error, exit 1.
    let o = gate(a.path(), Path::new("/nonexistent/run"), &[]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("/nonexistent/run"), "{}", stderr(&o));
}

#[test]
fn the_bundled_pair_improved_over_all_its_steps() {
    let (a, b) = (
        Path::new("trace_collection/llama_fsdp_8gpu"),
        Path::new("trace_collection/llama_fsdp_8gpu_balanced"),
    );
    // Three steps, one measured: too few to judge.
    let o = gate(a, b, &["--format", "json"]);
    assert_eq!(doc(&o)["gate"]["verdict"], "inconclusive");
    // Every step counted: the straggler fixed, 22.5 % shorter steps.
    let o = gate(a, b, &["--all-steps", "--format", "json"]);
    assert_eq!(o.status.code(), Some(0));
    let d = doc(&o);
    assert_eq!(d["gate"]["verdict"], "improved");
    let v = verdicts(&d);
    assert_eq!(v[0], ("step_time".into(), "improved".into()), "{v:?}");
    assert_eq!(v[2], ("comm_wait".into(), "improved".into()), "{v:?}");
    let change = d["gate"]["figures"][0]["change"].as_f64().unwrap();
    assert!((change + 0.225).abs() < 0.005, "{change}");
}

/// A run kept as a baseline gates a later run as the run itself would,
/// from a small file; `baseline list` names it; a name that is not kept is
/// an error naming the ones that are.
#[test]
fn a_saved_baseline_gates_like_its_run() {
    let (a, b) = runs(20, 0.05, 0.01);
    let store = tempfile::tempdir().unwrap();
    let dir = store.path().join("baselines");
    let d = dir.to_str().unwrap();
    let o = run(&[
        "baseline",
        "save",
        "main",
        a.path().to_str().unwrap(),
        "--baselines",
        d,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("kept baseline main (2 rank(s), 20 measured step(s))"),
        "{}",
        stderr(&o)
    );
    let size = std::fs::metadata(dir.join("main.json")).unwrap().len();
    assert!(size < 8 << 10, "{size} bytes");
    let listed = stdout(&run(&["baseline", "list", "--baselines", d]));
    assert!(
        listed.starts_with("main  ") && listed.contains("20 measured step(s)"),
        "{listed}"
    );
    let direct = gate(
        a.path(),
        b.path(),
        &["--threshold", "3%", "--format", "json"],
    );
    let against = run(&[
        "gate",
        b.path().to_str().unwrap(),
        "--against",
        "main",
        "--baselines",
        d,
        "--threshold",
        "3%",
        "--format",
        "json",
    ]);
    assert_eq!(against.status.code(), Some(4), "{}", stderr(&against));
    let (x, y) = (doc(&direct), doc(&against));
    assert_eq!(x["gate"], y["gate"], "the same verdicts and figures");
    assert!(
        y["a"].as_str().unwrap().starts_with("baseline main ("),
        "{}",
        y["a"]
    );
    // Not kept: named, with what is.
    let o = run(&[
        "gate",
        b.path().to_str().unwrap(),
        "--against",
        "nope",
        "--baselines",
        d,
    ]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("baseline nope") && stderr(&o).contains("there: main"),
        "{}",
        stderr(&o)
    );
    // Two runs and --against: a usage error.
    let o = run(&[
        "gate",
        a.path().to_str().unwrap(),
        b.path().to_str().unwrap(),
        "--against",
        "main",
        "--baselines",
        d,
    ]);
    assert_eq!(o.status.code(), Some(2));
}

/// `compare --against NAME` gives, metric by metric, what comparing with
/// the run itself gives; kernels and ranks are not kept, and it says so.
#[test]
fn compare_against_a_baseline_gives_the_runs_metric_rows() {
    let (a, b) = (
        "trace_collection/llama_fsdp_8gpu",
        "trace_collection/llama_fsdp_8gpu_balanced",
    );
    let store = tempfile::tempdir().unwrap();
    let d = store.path().to_str().unwrap();
    assert!(run(&["baseline", "save", "main", a, "--baselines", d])
        .status
        .success());
    let json = |o: std::process::Output| -> serde_json::Value {
        assert!(o.status.success(), "{}", stderr(&o));
        serde_json::from_str(&stdout(&o)).unwrap()
    };
    let direct = json(run(&["compare", a, b, "--format", "json"]));
    let kept = json(run(&[
        "compare",
        b,
        "--against",
        "main",
        "--baselines",
        d,
        "--format",
        "json",
    ]));
    assert_eq!(direct["metrics"], kept["metrics"]);
    assert_eq!(kept["kernels"], serde_json::json!([]));
    let text = stdout(&run(&["compare", b, "--against", "main", "--baselines", d]));
    assert!(
        text.starts_with("A: baseline main (trace_collection/llama_fsdp_8gpu, saved "),
        "{text}"
    );
    assert!(
        text.contains("a baseline keeps the metrics' values"),
        "{text}"
    );
    assert!(!text.contains("(none in either run)"), "{text}");
    let one = |args: &[&str]| stdout(&run(args));
    assert_eq!(
        one(&["compare", a, b, "-m", "avg_step_time"]),
        one(&[
            "compare",
            b,
            "--against",
            "main",
            "--baselines",
            d,
            "-m",
            "avg_step_time"
        ])
    );
}
