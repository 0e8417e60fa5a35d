//! What a person sees and concludes from the screen on real and realistic
//! traces: step navigation, Esc, step instances, busy fractions, verdicts.

use std::path::Path;
use std::sync::Arc;

use ccl_bench::model::Ns;
use ccl_bench::synth::RankTrace;
use ccl_bench::tui::action::Action;
use ccl_bench::tui::app::App;
use ccl_bench::tui::data::Data;
use ccl_bench::tui::tabs::kernels::KernelsState;
use ccl_bench::tui::tabs::timeline::TimelineState;
use ccl_bench::tui::tabs::Tab;
use ccl_bench::tui::theme::Theme;

use crate::support::{assert_close, corpus, run, stdout, write_ranks};
use crate::tui::load;

const SAMPLE: &str = "trace_collection/llama_fsdp_8gpu";

fn app(data: Data) -> App {
    App::new(Arc::new(data), Theme::mono(), (120, 30))
}

/// `n` from the start visits every step once, in order; `p` walks back.
fn assert_steps_walk(data: Data, what: &str) {
    let mut a = app(data);
    a.update(Action::SelectTab(Tab::Timeline));
    let n = a.data.steps.len();
    assert!(n > 1, "{what}: needs several steps, has {n}");
    let mut seen = Vec::new();
    for _ in 0..n + 2 {
        a.update(Action::NextStep);
        seen.push(a.state::<TimelineState>().unwrap().step);
    }
    let want: Vec<Option<usize>> = (0..n).map(Some).chain([Some(n - 1), Some(n - 1)]).collect();
    assert_eq!(seen, want, "{what}: n walks every step");
    assert_eq!(
        a.state::<TimelineState>().unwrap().message.as_deref(),
        Some("no later step")
    );
    for i in (0..n - 1).rev() {
        a.update(Action::PrevStep);
        assert_eq!(
            a.state::<TimelineState>().unwrap().step,
            Some(i),
            "{what}: p walks back"
        );
    }
    a.update(Action::PrevStep);
    assert_eq!(
        a.state::<TimelineState>().unwrap().message.as_deref(),
        Some("no earlier step")
    );
}

#[test]
fn next_step_walks_every_step_on_the_sample() {
    assert_steps_walk(load(Path::new(SAMPLE)), "sample");
}

#[test]
fn next_step_walks_every_step_on_real_traces() {
    for rel in [
        "nsys/h100_tiny_transformer/h100_tiny_transformer_nsys.sqlite",
        "kineto/h100_gpt_eager",
        "kineto/legacy_2021",
        "kineto/hta/ns_resolution_trace",
    ] {
        let Some(p) = corpus(rel) else { return };
        assert_steps_walk(load(&p), rel);
    }
}

#[test]
fn esc_cancels_and_never_quits() {
    let mut a = app(load(Path::new(SAMPLE)));
    // `/ gemm Enter` then Esc: the filter goes, the program stays.
    a.update(Action::SelectTab(Tab::Kernels));
    let all = a.state::<KernelsState>().unwrap().shown.len();
    a.update(Action::Filter);
    for c in "gemm".chars() {
        a.update(Action::Input(c));
    }
    a.update(Action::Submit);
    assert!(a.state::<KernelsState>().unwrap().shown.len() < all);
    a.update(Action::Back);
    assert!(!a.quit, "Esc after a filter must not quit");
    assert_eq!(
        (
            a.state::<KernelsState>().unwrap().filter.as_str(),
            a.state::<KernelsState>().unwrap().shown.len()
        ),
        ("", all)
    );
    // Zoomed timeline: Esc walks back to the whole trace.
    a.update(Action::SelectTab(Tab::Timeline));
    let full = a.state::<TimelineState>().unwrap().view;
    a.update(Action::ZoomIn);
    a.update(Action::ZoomIn);
    assert_ne!(a.state::<TimelineState>().unwrap().view, full);
    // Esc goes back one zoom at a time, then stays on the whole trace.
    a.update(Action::Back);
    a.update(Action::Back);
    assert!(!a.quit, "Esc on a zoomed timeline must not quit");
    assert_eq!(a.state::<TimelineState>().unwrap().view, full);
    // Nothing left to cancel: still no quit, on every tab.
    for tab in [Tab::Summary, Tab::Kernels, Tab::Timeline, Tab::Stragglers] {
        a.update(Action::SelectTab(tab));
        a.update(Action::Back);
        assert!(!a.quit, "Esc on {tab:?}");
    }
    a.update(Action::Quit);
    assert!(a.quit);
}

/// One rank whose profiler was restarted: ProfilerStep#2..4, then #2..4 again.
fn restarted() -> RankTrace {
    let mut r = RankTrace::new(Some(0), 1, 10);
    for (i, n) in [2, 3, 4, 2, 3, 4].into_iter().enumerate() {
        let t = 100.0 * i as f64;
        r.step(n, t, 90.0);
        let c = r.kernel("sm90_xmma_gemm_bf16", t + 10.0, 50.0, 7, 10);
        r.launch(c, t + 5.0);
    }
    r
}

#[test]
fn repeated_step_numbers_stay_separate_steps() {
    let dir = write_ranks(&[restarted()]);
    let d = load(dir.path());
    let labels: Vec<String> = d.steps.iter().map(|s| s.label()).collect();
    assert_eq!(
        labels,
        [
            "step 2",
            "step 3",
            "step 4",
            "step 2 (2nd)",
            "step 3 (2nd)",
            "step 4 (2nd)"
        ]
    );
    // Each step is its own 50 µs kernel, not a merged 350 µs "step 3".
    for s in &d.steps {
        assert_eq!(s.span.len(), Ns(50_000), "{}", s.label());
    }
    assert!(
        d.warnings
            .iter()
            .any(|w| w.text.contains("6 steps but only 3")),
        "{:?}",
        d.warnings
    );
    assert_eq!(d.trace.ranks[0].steps.len(), 6);
}

#[test]
fn repeated_correlation_ids_pair_with_the_launch_before() {
    // Two launches share correlation id 1; each kernel belongs to the step of
    // the launch just before it, not to the last launch with that id.
    let text = r#"{"traceEvents": [
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 100},
      {"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#2", "ts": 100, "dur": 100},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 90, "dur": 2, "args": {"correlation": 1}},
      {"ph": "X", "cat": "kernel", "name": "gemm_a", "ts": 95, "dur": 20, "args": {"correlation": 1, "stream": 7, "device": 0}},
      {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "ts": 150, "dur": 2, "args": {"correlation": 1}},
      {"ph": "X", "cat": "kernel", "name": "gemm_b", "ts": 160, "dur": 20, "args": {"correlation": 1, "stream": 7, "device": 0}}
    ]}"#;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rank0_trace.json"), text).unwrap();
    let d = load(dir.path());
    let t = &d.trace.ranks[0];
    let steps: Vec<(&str, Option<u32>)> = t
        .ops
        .iter()
        .map(|o| (t.name(o.name), o.step.get()))
        .collect();
    assert_eq!(steps, [("gemm_a", Some(0)), ("gemm_b", Some(1))]);
}

#[test]
fn step_time_leaves_out_warm_up_and_profiler_stop() {
    let Some(dir) = corpus("kineto/h100_gpt_eager") else {
        return;
    };
    let d = dir.to_str().unwrap();
    // ProfilerStep#2..4: 12.5, 15.2 and 51.0 ms (the profiler stopping). CCL-Bench
    // reports step 3 alone, 0.01525 s; every step averages 0.02625 s.
    let one = run(&["--trace", d, "--metric", "avg_step_time"]);
    assert_close(
        stdout(&one).trim().parse().unwrap(),
        0.015246334,
        "measured",
    );
    let all = run(&["--trace", d, "--metric", "avg_step_time", "--all-steps"]);
    assert_close(
        stdout(&all).trim().parse().unwrap(),
        0.026253425,
        "all steps",
    );
    // Which steps were used is said in the table and the JSON.
    let table = stdout(&run(&["--trace", d, "--metrics"]));
    assert!(
        table.contains("per-step metrics use: step 3 of steps 2-4 (first and last left out"),
        "{table}"
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&run(&[
        "--trace",
        d,
        "--metrics",
        "--format",
        "json",
    ])))
    .unwrap();
    assert!(json["steps_used"]
        .as_str()
        .unwrap()
        .starts_with("step 3 of steps 2-4"));
}

#[test]
fn the_regression_gate_ignores_noise_in_shares() {
    // The bundled pair: step time 22.6 % better; memory_transfer_overhead
    // 0.172 % -> 0.222 % is +29 % relative but 0.05 points: not a regression.
    let (a, b) = (SAMPLE, "trace_collection/llama_fsdp_8gpu_balanced");
    let o = run(&["compare", a, b, "--fail-on-regression"]);
    assert!(o.status.success(), "{}", crate::support::stderr(&o));
    let out = stdout(&o);
    let row = out
        .lines()
        .find(|l| l.starts_with("memory_transfer_overhead"))
        .unwrap();
    assert!(row.contains("+0.05pt") && !row.contains("WORSE"), "{row}");
    // Reversed, the straggler comes back: the gate names what tripped and by how much.
    let o = run(&["compare", b, a, "--fail-on-regression"]);
    assert_eq!(o.status.code(), Some(1));
    let err = crate::support::stderr(&o);
    assert!(err.contains("avg_step_time +29."), "{err}");
}

/// A TensorBoard log dir from the JAX/TF profiler: `plugins/profile/<run>/`,
/// newest run by default, and `.xplane.pb` named when nothing is found.
#[test]
fn tensorboard_log_dirs_are_searched() {
    let ranks = ccl_bench::synth::two_rank_example();
    let dir = tempfile::tempdir().unwrap();
    for (run_name, r) in [
        ("2024_01_01_09_00_00", &ranks[0]),
        ("2024_05_01_12_30_45", &ranks[1]),
    ] {
        let run_dir = dir.path().join("plugins/profile").join(run_name);
        std::fs::create_dir_all(&run_dir).unwrap();
        std::fs::write(run_dir.join("host0.trace.json"), r.to_json()).unwrap();
    }
    let p = dir.path().to_str().unwrap();
    // The newest run holds the one-step trace (200 µs).
    let o = run(&["--trace", p, "--metric", "avg_step_time"]);
    assert!(o.status.success(), "{}", crate::support::stderr(&o));
    assert_close(stdout(&o).trim().parse().unwrap(), 200e-6, "newest run");
    let o = run(&["--trace", p, "--inputs"]);
    assert!(
        stdout(&o).contains("2024_05_01_12_30_45") && stdout(&o).contains("newest of 2"),
        "{}",
        stdout(&o)
    );
    // Pointed at plugins/profile itself.
    let o = run(&[
        "--trace",
        dir.path().join("plugins/profile").to_str().unwrap(),
        "--metric",
        "avg_step_time",
    ]);
    assert_close(
        stdout(&o).trim().parse().unwrap(),
        200e-6,
        "plugins/profile",
    );

    let empty = tempfile::tempdir().unwrap();
    let o = run(&["--trace", empty.path().to_str().unwrap()]);
    assert!(!o.status.success());
    assert!(
        crate::support::stderr(&o).contains(".xplane.pb"),
        "{}",
        crate::support::stderr(&o)
    );

    // The real XSpace, laid out as the JAX profiler writes it.
    let Some(xplane) = corpus("xla/xprof_tpu/tpu_inference_2.xplane.pb") else {
        return;
    };
    let run_dir = dir.path().join("plugins/profile/2024_06_01_00_00_00");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::copy(&xplane, run_dir.join("tpu.xplane.pb")).unwrap();
    let o = run(&["--trace", p, "--metric", "total_kernel_time"]);
    assert!(o.status.success(), "{}", crate::support::stderr(&o));
    assert!(stdout(&o).trim().parse::<f64>().unwrap() > 0.0);
    // TPUs are called TPUs: 6013 device ops on 4 of them.
    let o = run(&["overview", p]);
    let text = stdout(&o);
    assert!(text.contains("4 ranks · 6013 TPU ops"), "{text}");
    assert!(text.contains("the TPU is busy"), "{text}");
}

/// `ccl-bench` with no argument and no terminal prints the sample's metric
/// table, as the README says.
#[test]
fn no_argument_without_a_terminal_prints_the_sample() {
    let o = run(&[]);
    assert!(o.status.success(), "{}", crate::support::stderr(&o));
    assert!(stdout(&o).contains("avg_step_time"), "{}", stdout(&o));
    assert!(crate::support::stderr(&o).contains("bundled sample"));
    // A metric without a trace stays a usage error.
    let o = run(&["--metric", "avg_step_time"]);
    assert_eq!(o.status.code(), Some(2));
}

/// Impossible values are flagged with their cause, never printed as facts.
#[test]
fn implausible_values_are_flagged() {
    // A 70B model on the sample's 8 GPUs would run at 1485 % of peak.
    let o = run(&[
        "--trace",
        SAMPLE,
        "--metric",
        "mfu",
        "--model-params",
        "70B",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    let err = crate::support::stderr(&o);
    assert!(
        err.contains("implausible value 1485") && err.contains("--model-params"),
        "{err}"
    );
    // The card's own size stays a plain number.
    let o = run(&["--trace", SAMPLE, "--metric", "mfu"]);
    assert!(o.status.success());

    // `"In msg nelems": 1e20` (beyond 2^64) on one all-reduce: its size is
    // ignored with a warning, not read as 1.8e10 GB.
    let mut ranks = ccl_bench::synth::two_rank_example();
    let json = ranks[1].to_json();
    let bad = regex::Regex::new(r#""In msg nelems":\s*\d+"#)
        .unwrap()
        .replace(&json, r#""In msg nelems": 1e20"#)
        .into_owned();
    assert_ne!(bad, json, "the synthetic trace records a message size");
    ranks.truncate(1);
    let dir = write_ranks(&ranks);
    std::fs::write(dir.path().join("rank1_trace.json"), bad).unwrap();
    let p = dir.path().to_str().unwrap();
    let o = run(&[
        "--trace",
        p,
        "--rank",
        "1",
        "--metric",
        "collective_vol_total_gb",
    ]);
    assert_eq!(o.status.code(), Some(3), "{}", stdout(&o));
    let o = run(&["--trace", p, "--inputs"]);
    assert!(
        stdout(&o).contains("1 collective record with a message size that is no real size"),
        "{}",
        stdout(&o)
    );
}

/// The first screen answers "where did the time go?" at 80x24: verdicts
/// (communication, overlap, utilization, straggler) and the per-step budget,
/// with the metrics that do not apply folded and the selected metric
/// explained in full.
#[test]
fn summary_opens_on_where_the_time_went() {
    use crate::tui::{draw, text};
    let screen = |a: &App| text(draw(a).buffer());
    let Some(dir) = corpus("kineto/dlrm_8rank_v100") else {
        return;
    };
    let mut a = App::new(Arc::new(load(&dir)), Theme::mono(), (80, 24));
    let s = screen(&a);
    for want in [
        "Verdicts",
        "communication",
        "overlap",
        "utilization",
        "straggler     rank 7",
        "Where the time went",
        "exp. comm",
        "idle",
        "waiting",
    ] {
        assert!(s.contains(want), "{want}:\n{s}");
    }
    // Every rank's budget sums to its step.
    for r in &a.data.ranks {
        assert_eq!(r.budget().iter().sum::<Ns>(), r.span, "rank {}", r.rank);
    }
    // The selected metric is explained in full at the bottom, at any width
    // (past the step figures: iteration, device step, CPU ahead).
    for _ in 0..4 {
        a.update(Action::Down);
    }
    let s = screen(&a);
    assert!(s.contains("wall_time_s = 16.2 ms"), "{s}");
    assert!(s.contains("(CPU and GPU"), "{s}");

    // A JAX/TPU trace: the metrics that do not apply are folded, `a` shows them.
    let Some(xla) = corpus("xla/xprof_tpu") else {
        return;
    };
    let mut a = App::new(Arc::new(load(&xla)), Theme::mono(), (100, 200));
    let folded = screen(&a);
    assert!(folded.contains("not applicable to this trace (a shows them)"));
    assert!(
        !folded.contains("achieved_flops_from_trace_json"),
        "{folded}"
    );
    a.update(Action::ToggleNotApplicable);
    let shown = screen(&a);
    assert!(shown.contains("achieved_flops_from_trace_json"), "{shown}");
    assert!(!shown.contains("(a shows them)"));
    // Reasons fit the format: no PyTorch advice on an XLA trace.
    assert!(!shown.contains("torch.profiler"), "{shown}");
    assert!(shown.contains("this XLA trace records no pe"), "{shown}");
}
