//! Inputs as other people's real runs write them: communication libraries
//! that bypass NCCL, per-rank folders of profiler windows, nsys-jax archives.

use std::sync::Arc;

use ccl_bench::synth::RankTrace;
use ccl_bench::tui::app::App;
use ccl_bench::tui::theme::Theme;

use crate::support::{assert_close, run, stdout, write_ranks};
use crate::tui::{draw, load, text};

fn metric(dir: &std::path::Path, name: &str) -> f64 {
    let out = run(&["--trace", dir.to_str().unwrap(), "--metric", name]);
    assert!(out.status.success(), "{name}: {}", stdout(&out));
    stdout(&out)
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{name}"))
}

/// A DeepEP expert-parallel step as a production trace names it: dispatch and
/// combine are communication (all-to-all), not MoE compute.
#[test]
fn deepep_kernels_are_all_to_all_communication() {
    let ranks: Vec<RankTrace> = (0..2)
        .map(|r| {
            let mut t = RankTrace::new(Some(r), 2, 10);
            t.step(1, 0.0, 100.0);
            t.kernel("my_fused_router_kernel", 0.0, 10.0, 7, 64);
            t.kernel(
                "void dpsk::ep::internode::dispatch<true, 8, 2, 4, 8>(int4*, float*, int*)",
                10.0,
                20.0,
                20,
                24,
            );
            t.kernel(
                "void deep_ep::intranode::notify_dispatch<8>(int const*, int*, int)",
                30.0,
                5.0,
                20,
                1,
            );
            t.kernel("sm90_xmma_gemm_bf16_bf16", 35.0, 30.0, 7, 132);
            t.kernel(
                "void dpsk::ep::internode::combine<__nv_bfloat16, 2, 8, 4096>(int4*, float*)",
                65.0,
                25.0,
                20,
                24,
            );
            t
        })
        .collect();
    let dir = write_ranks(&ranks);
    // Device time 90 µs per rank: 50 µs of DeepEP, 10 µs unrecognised.
    assert_close(
        metric(dir.path(), "communication_fraction"),
        50.0 / 90.0 * 100.0,
        "communication_fraction",
    );
    assert_close(metric(dir.path(), "moe_fraction"), 0.0, "moe_fraction");
    assert_close(
        metric(dir.path(), "unclassified_fraction"),
        10.0 / 90.0 * 100.0,
        "unclassified_fraction",
    );
    let table = stdout(&run(&[
        "--trace",
        dir.path().to_str().unwrap(),
        "--metrics",
    ]));
    let kinds = table
        .lines()
        .skip_while(|l| !l.starts_with("total_comm_time_s"))
        .nth(1)
        .unwrap();
    assert!(kinds.trim_start().starts_with("all_to_all"), "{kinds}");

    // The Summary says what share no rule recognised, and which kernel.
    let app = App::new(Arc::new(load(dir.path())), Theme::mono(), (140, 30));
    let screen = text(draw(&app).buffer());
    let line = screen
        .lines()
        .find(|l| l.contains("unclassified"))
        .unwrap_or_else(|| panic!("{screen}"));
    assert!(
        line.contains("unclassified: 11 % of device time, most in my_fused_router_kernel"),
        "{line}"
    );
}

/// Below a tenth of device time the Summary keeps quiet.
#[test]
fn a_small_unclassified_share_is_not_a_verdict() {
    let mut t = RankTrace::new(Some(0), 1, 10);
    t.step(1, 0.0, 100.0);
    t.kernel("my_kernel", 0.0, 5.0, 7, 1);
    t.kernel("sm90_xmma_gemm_bf16_bf16", 5.0, 95.0, 7, 1);
    let dir = write_ranks(&[t]);
    let app = App::new(Arc::new(load(dir.path())), Theme::mono(), (140, 30));
    let screen = text(draw(&app).buffer());
    assert!(!screen.contains("unclassified:"), "{screen}");
}
