//! Frame time of the terminal UI on a large trace: 64 ranks × 16,384 device ops
//! (1,048,576 events) and twice as many CPU ranges, 200 × 50 cells. The
//! Timeline must stay under 16 ms a frame at any zoom, with CPU lanes (and the
//! details pane) on too; key presses that recompute the kernel table are
//! measured too.
//!
//!     cargo bench --bench render

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

use ccl_bench::load::LoadReport;
use ccl_bench::metrics::Options;
use ccl_bench::model::classify::classify;
use ccl_bench::model::{
    Activity, CpuKind, CpuOp, CpuThread, DeviceOp, Ns, RankTimeline, Slot, Step, Trace,
};
use ccl_bench::tui::action::Action;
use ccl_bench::tui::app::App;
use ccl_bench::tui::data::Data;
use ccl_bench::tui::tabs::Tab;
use ccl_bench::tui::theme::Theme;

const RANKS: u32 = 64;
/// Device ops per rank: 16,384 by default (a million events in all);
/// `RENDER_OPS_PER_RANK=1048576` for a million per rank (64 M events, ~12 GB).
fn ops_per_rank() -> usize {
    std::env::var("RENDER_OPS_PER_RANK")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16_384)
}

/// A rank's device ops: compute kernels back to back on one stream, a
/// collective overlapping every fourth one on another, 16 steps.
fn rank(r: u32, ops: usize) -> RankTimeline {
    let mut t = RankTimeline {
        rank: r,
        world_size: Some(RANKS),
        ..Default::default()
    };
    let names = [
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64",
        "void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>",
        "triton_red_fused_rms_norm_0",
        "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    ];
    let ids: Vec<_> = names.iter().map(|n| t.strings.intern(n)).collect();
    let mut at = Ns(i64::from(r) * 7);
    let per_step = ops / 16;
    for i in 0..ops {
        let k = i % 4;
        let dur = Ns(5_000 + (i as i64 * 37 % 3_000));
        let (stream, start) = if k == 3 { (20, at - dur / 2) } else { (7, at) };
        t.ops.vec_mut().push(DeviceOp {
            start,
            dur,
            name: ids[k],
            activity: Activity::Kernel,
            class: classify(names[k], Activity::Kernel),
            coll: None,
            stream,
            device: 0,
            work: ccl_bench::model::PackedWork::NONE,
            meta: Slot::NONE,
            step: Some((i / per_step) as u32).into(),
            launch: start,
        });
        if k != 3 {
            at += dur + Ns(500);
        }
    }
    t.ops.sort_by_key(|o| o.start);
    // The launching thread: per kernel an operator holding its launch call,
    // 1 µs before the kernel starts (two CPU ranges per device op).
    let (op_name, launch_name) = (
        t.strings.intern("aten::mm"),
        t.strings.intern("cudaLaunchKernel"),
    );
    let mut cpu = Vec::with_capacity(2 * t.ops.len() + 16);
    for o in &mut t.ops {
        o.launch = o.start - Ns(1_000);
        let r = |start, dur, name, kind| CpuOp {
            start,
            dur,
            name,
            kind,
            depth: 0,
            parent: 0,
        };
        cpu.push(r(o.launch - Ns(500), Ns(1_200), op_name, CpuKind::Op));
        cpu.push(r(o.launch, Ns(400), launch_name, CpuKind::Runtime));
    }
    let launches = t.ops.len() as u64;
    let end = at;
    let step_name = t.strings.intern("ProfilerStep#0");
    for s in 0..16 {
        let len = end / 16;
        t.steps.push(Step {
            number: s,
            start: len * s,
            end: len * (s + 1),
        });
        cpu.push(CpuOp {
            start: len * s - Ns(2_000),
            dur: len,
            name: step_name,
            kind: CpuKind::Annotation,
            depth: 0,
            parent: 0,
        });
    }
    t.cpu = vec![CpuThread::new(1, launches, cpu)];
    t
}

fn bench(c: &mut Criterion) {
    let trace = Trace {
        ranks: (0..RANKS).map(|r| rank(r, ops_per_rank())).collect(),
        ..Default::default()
    };
    let events: usize = trace.ranks.iter().map(|r| r.ops.len()).sum();
    let data = Arc::new(Data::new(
        trace,
        LoadReport::default(),
        None,
        Options::default(),
    ));
    let mut terminal = Terminal::new(TestBackend::new(200, 50)).unwrap();
    let mut g = c.benchmark_group(format!("frame_200x50_{events}_events"));
    for (label, zoom_ins, cpu) in [
        ("timeline_whole_trace", 0, false),
        ("timeline_zoomed_2^12", 12, false),
        ("timeline_cpu_lanes_whole_trace", 0, true),
        ("timeline_cpu_lanes_zoomed_2^12", 12, true),
    ] {
        let mut app = App::new(Arc::clone(&data), Theme::default(), (200, 50));
        app.update(Action::SelectTab(Tab::Timeline));
        if cpu {
            app.update(Action::ToggleCpu);
            app.update(Action::ToggleDetails);
        }
        for _ in 0..zoom_ins {
            app.update(Action::ZoomIn);
        }
        g.bench_function(label, |b| {
            b.iter(|| {
                terminal
                    .draw(|f| f.render_widget(black_box(&app), f.area()))
                    .map(|_| ())
                    .unwrap()
            })
        });
    }
    for tab in [Tab::Summary, Tab::Kernels, Tab::Stragglers] {
        let mut app = App::new(Arc::clone(&data), Theme::default(), (200, 50));
        app.update(Action::SelectTab(tab));
        g.bench_function(tab.title().to_lowercase(), |b| {
            b.iter(|| {
                terminal
                    .draw(|f| f.render_widget(black_box(&app), f.area()))
                    .map(|_| ())
                    .unwrap()
            })
        });
    }
    g.finish();
    let mut g = c.benchmark_group(format!("key_{events}_events"));
    g.sample_size(10);
    let mut app = App::new(Arc::clone(&data), Theme::default(), (200, 50));
    app.update(Action::SelectTab(Tab::Kernels));
    // Cycles all ranks → rank 0 → … → rank 63 → all ranks.
    g.bench_function("kernels_next_rank_recompute", |b| {
        b.iter(|| app.update(Action::NextRank))
    });
    let mut app = App::new(Arc::clone(&data), Theme::default(), (200, 50));
    app.update(Action::SelectTab(Tab::Kernels));
    g.bench_function("kernels_toggle_grouping_all_ranks", |b| {
        b.iter(|| app.update(Action::ToggleGrouping))
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
