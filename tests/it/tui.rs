//! The terminal UI without a terminal: every tab rendered into ratatui's
//! TestBackend (insta snapshots), tiny sizes, and key handling through
//! `App::update`.

use std::path::Path;
use std::sync::Arc;

use ratatui::backend::TestBackend;
use ratatui::buffer::Buffer;
use ratatui::layout::Rect;
use ratatui::widgets::Widget;
use ratatui::Terminal;

use ccl_bench::load::LoadOptions;
use ccl_bench::load::Progress;
use ccl_bench::metrics::Options;
use ccl_bench::model::Ns;
use ccl_bench::synth::two_rank_example;
use ccl_bench::tui::action::Action;
use ccl_bench::tui::app::{bar, tab_at, App};
use ccl_bench::tui::data::Data;
use ccl_bench::tui::loading::Failed;
use ccl_bench::tui::pair::Pair;
use ccl_bench::tui::registry::Has;
use ccl_bench::tui::tabs::kernels::KernelsState;
use ccl_bench::tui::tabs::stragglers::StragglersState;
use ccl_bench::tui::tabs::timeline::TimelineState;
use ccl_bench::tui::tabs::Tab;
use ccl_bench::tui::theme::Theme;
use ccl_bench::tui::{keymap, load_data};

use crate::support::write_ranks;

const SAMPLE: &str = "trace_collection/llama_fsdp_8gpu";

/// Loads a trace with the default options, as the UI does.
pub fn load(path: &Path) -> Data {
    load_data(
        path,
        &LoadOptions::default(),
        Options::default(),
        &Progress::default(),
    )
    .unwrap_or_else(|e| panic!("{} loads: {e:#}", path.display()))
}

fn sample() -> Data {
    load(Path::new(SAMPLE))
}

/// A hand-made fixture, not a run: its clocks stay as written.
fn unaligned(dir: &Path) -> Data {
    load_data(
        dir,
        &LoadOptions {
            align: false,
            ..LoadOptions::default()
        },
        Options::default(),
        &Progress::default(),
    )
    .expect("loads as far as valid")
}

fn two_ranks() -> Data {
    let dir = write_ranks(&two_rank_example());
    let mut d = unaligned(dir.path());
    // The temporary directory's name changes every run.
    d.trace.source = "two_ranks".into();
    d
}

fn app(data: Data, size: (u16, u16)) -> App {
    App::new(Arc::new(data), Theme::mono(), size)
}

pub fn draw(app: &App) -> TestBackend {
    let (w, h) = app.size;
    let mut t = Terminal::new(TestBackend::new(w, h)).unwrap();
    t.draw(|f| f.render_widget(app, f.area())).unwrap();
    t.backend().clone()
}

pub fn text(buf: &Buffer) -> String {
    let a = buf.area;
    (0..a.height)
        .map(|y| {
            (0..a.width)
                .map(|x| buf[(x, y)].symbol())
                .collect::<String>()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn every_tab_at_80x24_and_200x50() {
    let data = Arc::new(sample());
    for (w, h) in [(80, 24), (200, 50)] {
        for tab in Tab::available(Has::default()) {
            let mut a = App::new(Arc::clone(&data), Theme::mono(), (w, h));
            a.update(Action::SelectTab(tab));
            insta::assert_snapshot!(
                format!("sample_{}_{w}x{h}", tab.title().to_lowercase()),
                draw(&a)
            );
        }
    }
}

#[test]
fn tiny_terminals_never_panic() {
    let data = Arc::new(two_ranks());
    for (w, h) in [(1, 1), (10, 5), (3, 2), (1, 40), (200, 1), (0, 0)] {
        let mut a = App::with_pair(
            Pair::new(two_ranks(), two_ranks(), Options::default(), 0.05),
            Theme::mono(),
            (w, h),
        );
        let _ = &data;
        for tab in Tab::all() {
            a.update(Action::SelectTab(tab));
            // Drive every kind of action at this size too.
            for act in [
                Action::ZoomIn,
                Action::Down,
                Action::PanRight,
                Action::NextSort,
                Action::Click { col: 0, row: 0 },
                Action::Click {
                    col: w / 2,
                    row: h / 2,
                },
                Action::ScrollUp {
                    col: w / 2,
                    row: h / 2,
                },
                Action::Drag { col: 0, row: h / 2 },
                Action::End,
            ] {
                a.update(act);
            }
            let mut buf = Buffer::empty(Rect::new(0, 0, w, h));
            (&a).render(buf.area, &mut buf);
            a.update(Action::ToggleHelp);
            (&a).render(buf.area, &mut buf);
            a.update(Action::ToggleHelp);
        }
    }
}

#[test]
fn tabs_switch_by_number_cycle_and_click() {
    let mut a = app(two_ranks(), (100, 30));
    assert_eq!(a.tab, Tab::Summary);
    a.update(Action::SelectTab(Tab::Timeline));
    assert_eq!(a.tab, Tab::Timeline);
    a.update(Action::NextTab);
    assert_eq!(a.tab, Tab::Stragglers);
    a.update(Action::NextTab);
    assert_eq!(a.tab, Tab::Collectives);
    a.update(Action::NextTab);
    assert_eq!(a.tab, Tab::Summary);
    a.update(Action::PrevTab);
    assert_eq!(a.tab, Tab::Collectives);
    a.update(Action::PrevTab);
    // " ccl-bench " is 11 cells; " 1 Summary " follows, then " 2 Kernels ".
    let tabs = Tab::available(Has::default());
    let at = |col| tab_at(col, &tabs, Tab::Summary, 160);
    assert_eq!(at(11), Some(Tab::Summary));
    assert_eq!(at(23), Some(Tab::Kernels));
    assert_eq!(at(0), None);
    // 40 cells: no brand, and the tabs but the active one by number:
    // " 1 Summary " then " 2 " from column 12.
    let (brand, labels) = bar(&tabs, Tab::Summary, 40);
    assert!(!brand);
    assert_eq!(labels[1].1, " 2 ");
    assert_eq!(tab_at(12, &tabs, Tab::Summary, 40), Some(Tab::Kernels));
    // One run: no Compare tab, by number or by cycling.
    a.update(Action::SelectTab(Tab::Compare));
    assert_eq!(a.tab, Tab::Stragglers);
    a.update(Action::Click { col: 23, row: 0 });
    assert_eq!(a.tab, Tab::Kernels);
    let screen = text(draw(&a).buffer());
    assert!(
        screen.lines().next().unwrap().contains("2 Kernels"),
        "{screen}"
    );
}

#[test]
fn help_lists_keys_and_esc_closes_it() {
    let mut a = app(two_ranks(), (100, 40));
    a.update(Action::ToggleHelp);
    let screen = text(draw(&a).buffer());
    assert!(screen.contains("Keys"), "{screen}");
    assert!(screen.contains("zoom in at the cursor"), "{screen}");
    a.update(Action::Back);
    assert!(a.help.is_none() && !a.quit);
    // Esc cancels; it never quits (only q and Ctrl-C do).
    a.update(Action::Back);
    assert!(!a.quit);
}

#[test]
fn kernels_filter_sort_group_and_rank() {
    let mut a = app(two_ranks(), (100, 30));
    a.update(Action::SelectTab(Tab::Kernels));
    // Largest total first: the gemm (135 µs over both ranks).
    assert_eq!(
        a.state::<KernelsState>()
            .unwrap()
            .rows()
            .next()
            .unwrap()
            .name,
        "sm90_xmma_gemm_bf16"
    );
    assert_eq!(a.state::<KernelsState>().unwrap().shown.len(), 6);
    a.update(Action::Filter);
    assert_eq!(a.mode(), keymap::Mode::Typing);
    for c in "nccl".chars() {
        a.update(Action::Input(c));
    }
    // While typing, 'q' is text, and the filter applies as it is typed.
    assert_eq!(a.state::<KernelsState>().unwrap().shown.len(), 2);
    a.update(Action::Submit);
    assert_eq!(a.mode(), keymap::Mode::Normal);
    assert_eq!(a.state::<KernelsState>().unwrap().filter, "nccl");
    // Sort ascending by total: the all-gather (30 µs) before the all-reduce (130 µs).
    a.update(Action::ReverseSort);
    let names: Vec<&str> = a
        .state::<KernelsState>()
        .unwrap()
        .rows()
        .map(|r| r.name.as_str())
        .collect();
    assert!(names[0].contains("AllGather"), "{names:?}");
    // Clicking the "count" header sorts by count (largest first).
    let header_row = 2; // tab bar, title, header
                        // Name takes 100 − 73 = 27 cells, then class (13), then count at 42..50.
    a.update(Action::Click {
        col: 45,
        row: header_row,
    });
    assert_eq!(a.state::<KernelsState>().unwrap().sort, (2, true));
    assert!(a
        .state::<KernelsState>()
        .unwrap()
        .rows()
        .next()
        .unwrap()
        .name
        .contains("AllReduce"));
    // Esc while typing clears the filter.
    a.update(Action::Filter);
    a.update(Action::Back);
    assert_eq!(a.state::<KernelsState>().unwrap().shown.len(), 6);
    // Classes, then rank 0 only.
    a.update(Action::ToggleGrouping);
    assert!(a
        .state::<KernelsState>()
        .unwrap()
        .rows()
        .any(|r| r.name == "communication"));
    a.update(Action::NextRank);
    assert_eq!(a.state::<KernelsState>().unwrap().rank, Some(0));
    let comm = a
        .state::<KernelsState>()
        .unwrap()
        .rows()
        .find(|r| r.name == "communication")
        .unwrap();
    assert_eq!((comm.count, comm.total), (2, Ns(60_000)));
    a.update(Action::PrevRank);
    assert_eq!(a.state::<KernelsState>().unwrap().rank, None);
    insta::assert_snapshot!("two_ranks_kernel_classes", draw(&a));
}

#[test]
fn timeline_zoom_pan_steps_cursor() {
    let mut a = app(two_ranks(), (100, 20));
    a.update(Action::SelectTab(Tab::Timeline));
    let full = a.state::<TimelineState>().unwrap().view;
    // Device ops span [0, 200) µs over both ranks.
    assert_eq!((full.start, full.end), (Ns::ZERO, Ns(200_000)));
    a.update(Action::ZoomIn);
    assert_eq!(a.state::<TimelineState>().unwrap().view.len(), Ns(100_000));
    // The cursor (at 0) stays on screen when zooming.
    assert_eq!(a.state::<TimelineState>().unwrap().view.start, Ns::ZERO);
    a.update(Action::PanRight);
    assert_eq!(a.state::<TimelineState>().unwrap().view.start, Ns(12_500));
    a.update(Action::ZoomOut);
    a.update(Action::ZoomOut);
    assert_eq!(
        a.state::<TimelineState>().unwrap().view,
        full,
        "never wider than the trace"
    );
    // Steps: #1 spans [0,200) over both ranks (rank 1's step); #2 is [110,180).
    a.update(Action::GoToStep);
    a.update(Action::Input('2'));
    a.update(Action::Submit);
    assert_eq!(a.state::<TimelineState>().unwrap().cursor, Ns(110_000));
    assert!(
        a.state::<TimelineState>().unwrap().view.start <= Ns(110_000)
            && a.state::<TimelineState>().unwrap().view.end >= Ns(180_000)
    );
    assert!(a.state::<TimelineState>().unwrap().view.len() < Ns(80_000));
    a.update(Action::GoToStep);
    a.update(Action::Input('9'));
    a.update(Action::Submit);
    assert_eq!(
        a.state::<TimelineState>().unwrap().message.as_deref(),
        Some("no step 9; the trace has steps 1 to 2")
    );
    insta::assert_snapshot!("two_ranks_timeline_step2", draw(&a));
    // This fixture was loaded with its own clocks: nothing to toggle.
    a.update(Action::ToggleAlign);
    assert!(!a.state::<TimelineState>().unwrap().raw);
    assert!(a
        .state::<TimelineState>()
        .unwrap()
        .message
        .as_deref()
        .unwrap()
        .contains("clocks not moved"));
    // The cursor names the op under it on the selected lane.
    a.update(Action::ResetZoom);
    a.update(Action::Down);
    let screen = text(draw(&a).buffer());
    // Cursor at 110 µs: rank 1 is in its all-reduce [100, 200).
    assert!(
        screen.contains("rank 1 · column 100 % busy · stream 20: ncclDevKernel_AllReduce"),
        "{screen}"
    );
    assert!(screen.contains("cursor 110 µs · step 2"), "{screen}");
    // Per-stream lanes: rank 0 has streams 7 and 20, rank 1 too.
    a.update(Action::ToggleStreams);
    assert_eq!(a.state::<TimelineState>().unwrap().lanes(&a.data).len(), 4);
    assert_eq!(
        a.state::<TimelineState>().unwrap().lane,
        2,
        "stays on rank 1"
    );
    // A click moves the cursor; a drag pans.
    a.update(Action::ZoomIn);
    let before = a.state::<TimelineState>().unwrap().view.start;
    a.update(Action::Click { col: 60, row: 4 });
    a.update(Action::Drag { col: 50, row: 4 });
    a.update(Action::Release);
    assert!(a.state::<TimelineState>().unwrap().view.start > before);
    insta::assert_snapshot!("two_ranks_timeline_streams", draw(&a));
}

#[test]
fn stragglers_name_the_slow_rank() {
    let mut a = app(sample(), (120, 20));
    a.update(Action::SelectTab(Tab::Stragglers));
    let screen = text(draw(&a).buffer());
    // The sample's ranks share one clock: it is not moved, and the toggle
    // says why.
    a.update(Action::SelectTab(Tab::Timeline));
    a.update(Action::ToggleAlign);
    assert!(!a.state::<TimelineState>().unwrap().raw);
    assert!(text(draw(&a).buffer()).contains("clocks not moved"));
    a.update(Action::SelectTab(Tab::Stragglers));
    // The sample's rank 5 computes 1.3x slower: the others wait for it.
    assert!(screen.contains("Straggler rank 5"), "{screen}");
    a.update(Action::NextSort); // by step time, descending
    assert_eq!(a.state::<StragglersState>().unwrap().sort, (1, true));
    for _ in 0..7 {
        a.update(Action::NextSort);
    }
    assert_eq!(
        a.state::<StragglersState>().unwrap().sort,
        (8, true),
        "work"
    );
    assert_eq!(
        a.data.ranks[a.state::<StragglersState>().unwrap().order[0]].rank,
        5
    );
}

#[test]
fn load_errors_are_shown_not_panicked() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rank0_trace.json"), "{\"traceEvents\": 5}").unwrap();
    let Err(err) = load_data(
        dir.path(),
        &LoadOptions::default(),
        Options::default(),
        &Progress::default(),
    ) else {
        panic!("a bad trace must not load")
    };
    let message = format!("{err:#}");
    let mut buf = Buffer::empty(Rect::new(0, 0, 60, 10));
    Failed {
        message: &message,
        theme: Theme::mono(),
    }
    .render(buf.area, &mut buf);
    let screen = text(&buf);
    assert!(screen.contains("Cannot open the trace"), "{screen}");
    assert!(screen.contains("rank0_trace.json"), "{screen}");
}

#[test]
fn real_traces_render_on_every_tab() {
    for rel in ["kineto/dlrm_8rank_v100", "kineto/h100_gpt_eager"] {
        let Some(dir) = crate::support::corpus(rel) else {
            continue;
        };
        let data = load(&dir);
        let ranks = data.trace.ranks.len();
        let mut a = app(data, (120, 40));
        let mut screens = Vec::new();
        for tab in Tab::available(Has::default()) {
            a.update(Action::SelectTab(tab));
            for act in [
                Action::ZoomIn,
                Action::NextStep,
                Action::Down,
                Action::NextRank,
            ] {
                a.update(act);
            }
            screens.push(text(draw(&a).buffer()));
        }
        // Kernels tab: rows with shares; Summary: metric values.
        assert!(screens[1].contains('%'), "{rel}: {}", screens[1]);
        assert!(
            screens[0].contains("avg_step_time"),
            "{rel}: {}",
            screens[0]
        );
        assert!(screens[2].contains("rank 0"), "{rel}: {}", screens[2]);
        if ranks > 1 {
            assert!(
                screens[3].contains("Straggler rank") || screens[3].contains("No straggler"),
                "{rel}: {}",
                screens[3]
            );
        }
    }
}

/// The bundled pair: the straggler run (A) and the same run balanced (B).
fn sample_pair(size: (u16, u16)) -> App {
    let pair = Pair::new(
        load(Path::new(SAMPLE)),
        load(Path::new("trace_collection/llama_fsdp_8gpu_balanced")),
        Options::default(),
        0.05,
    );
    App::with_pair(pair, Theme::mono(), size)
}

#[test]
fn two_runs_open_on_the_compare_tab() {
    for (w, h) in [(80, 24), (200, 50)] {
        let a = sample_pair((w, h));
        assert_eq!(a.tab, Tab::Compare);
        insta::assert_snapshot!(format!("pair_compare_{w}x{h}"), draw(&a));
    }
}

#[test]
fn compare_tab_views_filter_steps_and_run_switch() {
    let mut a = sample_pair((160, 50));
    let screen = text(draw(&a).buffer());
    // Fixing the straggler: shorter steps (better), slowest rank no longer 5.
    let line = |s: &str, name: &str| {
        s.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .unwrap_or_else(|| panic!("no {name} row in\n{s}"))
            .to_owned()
    };
    let step = line(&screen, "avg_step_time");
    assert!(step.contains("-22.6%") && step.contains("better"), "{step}");
    // Numbers for people: times in ms, volumes in kB, no exponents.
    assert!(
        step.contains("29.3 ms") && step.contains("22.7 ms") && step.contains("-6.62 ms"),
        "{step}"
    );
    a.update(Action::End);
    let mut end = text(draw(&a).buffer());
    while !end.contains("collective_vol_allreduce_gb") {
        a.update(Action::Up);
        end = text(draw(&a).buffer());
    }
    let vol = line(&end, "collective_vol_allreduce_gb");
    assert!(vol.contains("16.4 kB") && !vol.contains("e-"), "{vol}");
    a.update(Action::Home);
    assert!(line(&screen, "total_communication_time").contains("better"));
    assert!(
        screen.contains("A rank 0") && screen.contains("B rank 0"),
        "{screen}"
    );
    assert!(screen.contains("Step 1 of 3"), "{screen}");
    // f: only rows beyond the threshold; coll_call_num (unchanged) goes.
    assert!(screen.contains("coll_call_num"));
    a.update(Action::Filter);
    let changed = text(draw(&a).buffer());
    assert!(!changed.contains("coll_call_num"), "{changed}");
    assert!(changed.contains("avg_step_time"));
    a.update(Action::End);
    let end = text(draw(&a).buffer());
    assert!(line(&end, "straggler").contains("better"), "{end}");
    // The balanced run has no straggler to name.
    assert!(line(&end, "slowest_rank").contains("n/a"), "{end}");
    // r: the timeline starts at the next rank.
    a.update(Action::NextRank);
    let next = text(draw(&a).buffer());
    assert!(
        next.contains("A rank 1") && !next.contains("A rank 0"),
        "{next}"
    );
    // c: kernels; the reduce-scatter lost most time (rank 5 no longer late).
    a.update(Action::ToggleGrouping);
    let kernels = text(draw(&a).buffer());
    assert!(
        kernels.contains("A count") && kernels.contains("kernels"),
        "{kernels}"
    );
    for _ in 0..3 {
        a.update(Action::ToggleGrouping);
    }
    assert!(text(draw(&a).buffer()).contains("metrics"));
    // n/p: steps by position, clamped.
    for _ in 0..5 {
        a.update(Action::NextStep);
    }
    assert!(text(draw(&a).buffer()).contains("Step 3 of 3"));
    a.update(Action::PrevStep);
    assert!(text(draw(&a).buffer()).contains("Step 2 of 3"));
    // b: the single-run tabs show run B; again: A.
    assert_eq!(a.shown_run(), Some("A"));
    a.update(Action::SwitchRun);
    assert_eq!(a.shown_run(), Some("B"));
    a.update(Action::SelectTab(Tab::Stragglers));
    let strag = text(draw(&a).buffer());
    assert!(strag.contains("show run B"), "{strag}");
    a.update(Action::SwitchRun);
    assert_eq!(a.shown_run(), Some("A"));
    // Five tabs now, cycling through Compare.
    a.update(Action::NextTab);
    assert_eq!(a.tab, Tab::Compare);
    assert_eq!(tab_at(66, &a.tabs(), a.tab, a.size.0), Some(Tab::Compare));
}

#[test]
fn memory_tab_charts_the_snapshot() {
    let Some(dir) = crate::support::corpus("kineto/h100_gpt_eager") else {
        return;
    };
    let data = load(&dir);
    let mut a = app(data, (120, 36));
    assert!(a.tabs().contains(&Tab::Memory));
    a.update(Action::SelectTab(Tab::Memory));
    assert_eq!(a.tab, Tab::Memory);
    let screen = text(draw(&a).buffer());
    // Peak from a replay of the allocator history (checked against Python in corpus.rs).
    assert!(screen.contains("peak allocated 6.738 GB"), "{screen}");
    assert!(screen.contains("1680 allocations"), "{screen}");
    assert!(
        screen.contains("allocated") && screen.contains("reserved"),
        "{screen}"
    );
    // Only one rank has a snapshot: r stays on it.
    a.update(Action::NextRank);
    assert!(text(draw(&a).buffer()).contains("Rank 0"));
    // A snapshot on its own opens too, every tab drawable.
    let Some(only) = crate::support::corpus("memory/h100_tiny_transformer") else {
        return;
    };
    let data = load(&only);
    let mut a = app(data, (100, 30));
    for tab in a.tabs() {
        a.update(Action::SelectTab(tab));
        for act in [
            Action::ZoomIn,
            Action::NextStep,
            Action::Down,
            Action::NextRank,
            Action::End,
        ] {
            a.update(act);
        }
        draw(&a);
    }
    a.update(Action::SelectTab(Tab::Memory));
    assert!(text(draw(&a).buffer()).contains("peak allocated 0.135 GB"));
    // Named whatever it is called, it is read, and the Summary counts what
    // was read rather than "0 ranks · 0 B".
    let renamed = tempfile::tempdir().unwrap();
    for e in std::fs::read_dir(&only).unwrap() {
        std::fs::copy(e.unwrap().path(), renamed.path().join("after_oom.pickle")).unwrap();
    }
    let mut a = app(load(renamed.path()), (140, 30));
    // Snapshots alone open on their chart.
    assert_eq!(a.tab, Tab::Memory);
    a.update(Action::SelectTab(Tab::Summary));
    let screen = text(draw(&a).buffer());
    assert!(
        screen.contains("no device timeline · 1 memory snapshot · 1 file · 511 kB"),
        "{screen}"
    );
    assert!(
        screen.contains("straggler     n/a: no device timeline"),
        "{screen}"
    );
    assert!(!screen.contains("per-step values use"), "{screen}");
}

/// Loads one rank's trace text the way the UI does.
fn load_text(json: &str) -> Data {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("rank0_trace.json"), json).unwrap();
    load(dir.path())
}

/// Renders every tab after each size of a resize storm, with actions between.
fn storm(data: Data) -> Vec<String> {
    let sizes = [
        (80, 24),
        (1, 1),
        (300, 90),
        (2, 60),
        (160, 3),
        (0, 0),
        (41, 13),
        (80, 24),
    ];
    let mut app = App::new(Arc::new(data), Theme::mono(), (80, 24));
    let mut screens = Vec::new();
    for tab in Tab::available(Has::default()) {
        app.update(Action::SelectTab(tab));
        for (width, height) in sizes {
            app.update(Action::Resize { width, height });
            for act in [Action::ZoomIn, Action::Down, Action::PanRight, Action::End] {
                app.update(act);
            }
            let mut buf = Buffer::empty(Rect::new(0, 0, width, height));
            (&app).render(buf.area, &mut buf);
        }
        screens.push(text(draw(&app).buffer()));
    }
    screens
}

#[test]
fn empty_and_one_event_traces_survive_resize_storms() {
    // No GPU activity at all: one step on the CPU.
    let cpu_only = r#"{"traceEvents": [{"ph": "X", "cat": "user_annotation", "name": "ProfilerStep#1", "ts": 0, "dur": 10}]}"#;
    storm(load_text(cpu_only));
    let summary = text(draw(&app(load_text(cpu_only), (80, 24))).buffer());
    assert!(summary.contains("1 rank · 1 event · 1 file"), "{summary}");
    // Exactly one kernel, zero length, and an empty event list.
    storm(load_text(
        r#"{"traceEvents": [{"ph": "X", "cat": "kernel", "name": "k", "ts": 5, "dur": 0}]}"#,
    ));
    storm(load_text(r#"{"traceEvents": []}"#));
}

#[test]
fn very_long_and_unicode_names_are_cut_to_fit() {
    let long = format!(
        "void cutlass::Kernel<{}>",
        "Gemm<bf16, 128, 256>, ".repeat(300)
    );
    let json = serde_json::json!({"traceEvents": [
        {"ph": "X", "cat": "kernel", "name": long, "ts": 0, "dur": 10},
        {"ph": "X", "cat": "kernel", "name": "注意力_kernel_ü_🚀\u{0}\n\t", "ts": 10, "dur": 5},
        {"ph": "X", "cat": "kernel", "name": "ncclDevKernel_AllReduce_Sum_f32_RING_LL", "ts": 12, "dur": 8},
    ]});
    let screens = storm(load_text(&json.to_string()));
    // Cut by display width with a mark (wide characters fill two cells, so
    // the buffer holds them with a blank after each).
    let kernels = &screens[1];
    assert!(kernels.contains("void cu…"), "{kernels}");
    assert!(kernels.contains("注 意 力 _…"), "{kernels}");
    assert!(!kernels.contains('\t') && !kernels.contains('\0'));
}

/// `w` writes the screen as SVG and text beside the others saved, never over
/// them, and the status line says where.
#[test]
fn w_writes_the_screen_and_says_where() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let dir = tempfile::tempdir().unwrap();
    let mut a = app(sample(), (100, 30));
    a.save_dir = dir.path().to_owned();
    a.update(Action::SelectTab(Tab::Timeline));
    let w = KeyEvent::new(KeyCode::Char('w'), KeyModifiers::NONE);
    for n in 1..=2 {
        let action = keymap::key_action(&w, a.tab, a.mode()).expect("w is bound");
        a.update(action);
        let txt = dir.path().join(format!("ccl-bench-timeline-{n}.txt"));
        let svg = dir.path().join(format!("ccl-bench-timeline-{n}.svg"));
        let text = std::fs::read_to_string(&txt).unwrap();
        assert!(text.starts_with(" ccl-bench  1 Summary"), "{text}");
        assert!(text.contains("rank 0"), "{text}");
        assert!(std::fs::read_to_string(&svg).unwrap().starts_with("<svg"));
        let screen = text_of(&draw(&a));
        assert!(
            screen.contains(&format!("screen written to {}", dir.path().display())),
            "{screen}"
        );
    }
    // The next key clears the notice.
    a.update(Action::ZoomIn);
    assert!(!text_of(&draw(&a)).contains("screen written"));
    // The help screen lists the key.
    a.update(Action::ToggleHelp);
    assert!(text_of(&draw(&a)).contains("write the screen"));
}

fn text_of(t: &TestBackend) -> String {
    text(t.buffer())
}

/// `/` finds ops by name on every lane; `}` and `{` walk the hits in time
/// order, selecting the hit's lane and putting the cursor on it.
#[test]
fn search_finds_ops_on_every_rank_and_walks_them() {
    let mut a = app(two_ranks(), (120, 30));
    a.update(Action::SelectTab(Tab::Timeline));
    let find = |a: &mut App, text: &str| {
        a.update(Action::Search);
        assert!(a.mode() == keymap::Mode::Typing);
        for c in text.chars() {
            a.update(Action::Input(c));
        }
        a.update(Action::Submit);
    };
    find(&mut a, "ALLREDUCE");
    let s = a.state::<TimelineState>().unwrap();
    let hits = s.hits.as_ref().unwrap();
    // Rank 0's all-reduce starts at 30 µs, rank 1's at 100 µs.
    assert_eq!(hits.list.len(), 2);
    assert_eq!(hits.per_rank, [(0, 1), (1, 1)]);
    assert_eq!(s.lane, 0);
    let start = |a: &App, r: usize| {
        a.data.trace.ranks[r]
            .ops
            .iter()
            .find(|o| a.data.trace.ranks[r].name(o.name).contains("AllReduce"))
            .unwrap()
            .start
    };
    assert_eq!(s.cursor, start(&a, 0));
    assert!(text_of(&draw(&a)).contains("hit 1 of 2 for \"ALLREDUCE\" · r0 1, r1 1"));
    a.update(Action::NextHit);
    let s = a.state::<TimelineState>().unwrap();
    assert_eq!((s.lane, s.cursor), (1, start(&a, 1)));
    // Past the last hit comes the first again.
    a.update(Action::NextHit);
    assert_eq!(a.state::<TimelineState>().unwrap().lane, 0);
    a.update(Action::PrevHit);
    assert_eq!(a.state::<TimelineState>().unwrap().lane, 1);
    // Not a valid regex: searched as text (the NCCL names have parentheses).
    find(&mut a, "RING_LL(");
    let s = a.state::<TimelineState>().unwrap();
    assert_eq!(s.hits.as_ref().unwrap().list.len(), 3);
    find(&mut a, "no_such_kernel");
    assert!(text_of(&draw(&a)).contains("no op matches \"no_such_kernel\""));
}

/// `d` opens the details of the op under the cursor: at a matched
/// collective, how long it waited and for whom.
#[test]
fn details_name_the_wait_and_the_last_rank() {
    let mut a = app(two_ranks(), (120, 40));
    a.update(Action::SelectTab(Tab::Timeline));
    a.update(Action::Search);
    for c in "allreduce".chars() {
        a.update(Action::Input(c));
    }
    a.update(Action::Submit);
    a.update(Action::ToggleDetails);
    let screen = text_of(&draw(&a));
    // Rank 0's all-reduce: 30-60 µs, launched at 6 µs; rank 1's starts at 100 µs.
    for want in [
        "communication Kernel · rank 0 · device 0 · stream 20 · launched in step 1",
        "start 30 µs · duration 30.0 µs · end 60 µs",
        "launched by the CPU at 6 µs: 24.0 µs before it started",
        "collective all_reduce · 4.19 MB in · group of 2 \"0\" ranks [0, 1]",
        "matched on 2 ranks: waited 30.0 µs for rank 1 (the last to arrive), transfer 0 ns",
    ] {
        assert!(screen.contains(want), "{want}\n{screen}");
    }
    a.update(Action::NextHit);
    let screen = text_of(&draw(&a));
    assert!(
        screen.contains("matched on 2 ranks: this rank arrived last; transfer 100 µs"),
        "{screen}"
    );
    // `d` again closes it.
    a.update(Action::ToggleDetails);
    assert!(!text_of(&draw(&a)).contains("matched on 2 ranks"));
}

/// Enter on a Kernels row shows that kernel's longest op on the Timeline;
/// on a Stragglers row, the rank's worst step; Backspace goes back.
#[test]
fn enter_drills_down_to_the_timeline_and_backspace_returns() {
    use ratatui::crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
    let key = |a: &App, code| {
        keymap::key_action(&KeyEvent::new(code, KeyModifiers::NONE), a.tab, a.mode())
            .expect("bound")
    };
    let mut a = app(two_ranks(), (120, 30));
    a.update(Action::SelectTab(Tab::Kernels));
    // Rows by total time: the gemm (35 µs on rank 0, 100 µs on rank 1) first.
    let ks = a.state::<KernelsState>().unwrap();
    assert!(!ks.shown.is_empty());
    let before = a.state::<TimelineState>().unwrap().view;
    a.update(key(&a, KeyCode::Enter));
    assert_eq!(a.tab, Tab::Timeline);
    let t = a.state::<TimelineState>().unwrap();
    let gemm = a.data.trace.ranks[1]
        .ops
        .iter()
        .find(|o| o.dur == Ns(100_000) && o.is_compute())
        .unwrap();
    assert_eq!((t.lane, t.cursor), (1, gemm.start));
    assert!(t.view.start <= gemm.start && gemm.end() <= t.view.end);
    assert!(
        t.message
            .as_deref()
            .unwrap()
            .starts_with("longest sm90_xmma_gemm_bf16: 100 µs on rank 1"),
        "{:?}",
        t.message
    );
    a.update(key(&a, KeyCode::Backspace));
    assert_eq!(a.tab, Tab::Kernels);
    assert_eq!(a.state::<TimelineState>().unwrap().view, before);
    // Stragglers: the selected rank's step.
    a.update(Action::SelectTab(Tab::Stragglers));
    a.update(key(&a, KeyCode::Enter));
    assert_eq!(a.tab, Tab::Timeline);
    let msg = a.state::<TimelineState>().unwrap().message.clone().unwrap();
    assert!(msg.starts_with("rank "), "{msg}");
    a.update(key(&a, KeyCode::Backspace));
    assert_eq!(a.tab, Tab::Stragglers);
    // Nothing left to go back to: said, not a crash.
    a.update(key(&a, KeyCode::Backspace));
    assert!(text_of(&draw(&a)).contains("nothing to go back to"));
}

/// `m` at two cursor positions marks a range; every rank's totals in it and
/// the top kernels, computed by hand for the two-rank example's [0, 100 µs).
#[test]
fn a_marked_range_has_totals_per_rank() {
    use ccl_bench::tui::tabs::timeline::RangeTotals;
    let data = two_ranks();
    let t = RangeTotals::of(
        &data,
        ccl_bench::model::Interval::new(Ns::ZERO, Ns(100_000)),
    );
    // Rank 0: gemm 10-45, all-reduce 30-60 (waiting all along: rank 1 starts
    // its own at 100), copy 60-70. Rank 1: gemm 0-100.
    assert_eq!(
        t.ranks,
        [
            (0, [20_000, 15_000, 15_000, 15_000, 10_000, 40_000].map(Ns)),
            (1, [100_000, 0, 0, 0, 0, 0].map(Ns))
        ]
    );
    assert_eq!(
        t.top,
        [
            ("sm90_xmma_gemm_bf16".to_owned(), Ns(135_000)),
            (
                "ncclDevKernel_AllReduce_Sum_f32_RING_LL".to_owned(),
                Ns(30_000)
            )
        ]
    );
    // Through the keys: mark, move, mark; Esc clears.
    let mut a = app(data, (120, 40));
    a.update(Action::SelectTab(Tab::Timeline));
    a.update(Action::Mark);
    assert!(text_of(&draw(&a)).contains("m marks its other end"));
    for _ in 0..5 {
        a.update(Action::CursorRight);
    }
    a.update(Action::Mark);
    let screen = text_of(&draw(&a));
    assert!(screen.contains("exp. comm"), "{screen}");
    assert!(a
        .state::<TimelineState>()
        .unwrap()
        .range
        .as_ref()
        .unwrap()
        .totals
        .is_some());
    a.update(Action::Back);
    assert!(a.state::<TimelineState>().unwrap().range.is_none());
}

/// A click on the arrival heatmap shows that rank's step on the Timeline.
#[test]
fn a_heatmap_cell_drills_down_to_the_rank_and_step() {
    let mut a = app(two_ranks(), (120, 30));
    a.update(Action::SelectTab(Tab::Stragglers));
    let screen = text_of(&draw(&a));
    let lines: Vec<&str> = screen.lines().collect();
    let header = lines
        .iter()
        .position(|l| l.starts_with("step  "))
        .expect(&screen);
    let row = lines[header + 1..]
        .iter()
        .position(|l| l.starts_with("r1 "))
        .map(|k| header + 1 + k)
        .expect(&screen);
    // The first step column starts after `r1    `.
    a.update(Action::Click {
        col: 7,
        row: row as u16,
    });
    assert_eq!(a.tab, Tab::Timeline, "{screen}");
    let t = a.state::<TimelineState>().unwrap();
    let msg = t.message.clone().unwrap();
    assert!(msg.starts_with("rank 1, step "), "{msg}");
    assert_eq!(t.lane, 1);
}

/// The Collectives tab makes only the rows on screen: scrolled to the end
/// of the sample's 51 collectives, the last rows are drawn, the first are
/// not, and Enter opens the last one.
#[test]
fn collectives_tab_draws_the_rows_scrolled_to() {
    let mut a = app(sample(), (120, 20));
    a.update(Action::SelectTab(Tab::Collectives));
    let first_cell = |screen: &str| -> Vec<String> {
        screen
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .filter(|c| c.parse::<u32>().is_ok())
            .map(str::to_owned)
            .collect()
    };
    let top = first_cell(&text(draw(&a).buffer()));
    assert_eq!(top.first().map(String::as_str), Some("0"), "{top:?}");
    a.update(Action::End);
    let screen = text(draw(&a).buffer());
    let ids = first_cell(&screen);
    assert_eq!(ids.last().map(String::as_str), Some("50"), "{screen}");
    assert!(!ids.contains(&"0".to_owned()), "{screen}");
    // As many rows as fit, consecutive up to the last.
    let n: Vec<u32> = ids.iter().map(|i| i.parse().unwrap()).collect();
    assert!(
        n.len() > 5 && n.windows(2).all(|w| w[1] == w[0] + 1),
        "{n:?}"
    );
    a.update(Action::Open);
    assert_eq!(a.tab, Tab::Timeline);
    let t = a.state::<TimelineState>().unwrap();
    let msg = t.message.clone().unwrap();
    assert!(msg.contains("#50"), "{msg}");
}

/// Enter on a Collectives row shows the instance on the Timeline: every
/// member's op in view, the cursor where the last member started; `c`
/// groups the rows.
#[test]
fn collectives_tab_opens_an_instance_on_the_timeline() {
    use ccl_bench::tui::tabs::collectives::CollectivesState;
    let mut a = app(two_ranks(), (120, 30));
    a.update(Action::SelectTab(Tab::Collectives));
    let rows = a.data.collectives.clone();
    assert!(
        !rows.is_empty(),
        "the two-rank example has a matched all-reduce"
    );
    let screen = text(draw(&a).buffer());
    assert!(
        screen.contains("Collectives matched across ranks"),
        "{screen}"
    );
    assert!(screen.contains("all_reduce"), "{screen}");
    a.update(Action::Open);
    assert_eq!(a.tab, Tab::Timeline);
    let t = a.state::<TimelineState>().unwrap();
    let first = rows.get(0);
    let last_start = first
        .members(&a.data.trace, &a.data.instances)
        .map(|m| m.start)
        .max()
        .unwrap();
    assert_eq!(t.cursor, last_start);
    assert!(t.view.start <= first.start && first.end <= t.view.end);
    assert!(
        t.message.as_deref().unwrap().starts_with("all_reduce #0"),
        "{:?}",
        t.message
    );
    a.update(Action::GoBack);
    assert_eq!(a.tab, Tab::Collectives);
    a.update(Action::ToggleGrouping);
    assert!(a.state::<CollectivesState>().unwrap().grouped);
    let screen = text(draw(&a).buffer());
    assert!(screen.contains("most wait caused by"), "{screen}");
    // Enter on a group opens its instance with the most waiting (the
    // example's one all-reduce).
    a.update(Action::Open);
    assert_eq!(a.tab, Tab::Timeline);
    let msg = a.state::<TimelineState>().unwrap().message.clone().unwrap();
    assert!(
        msg.starts_with("all_reduce #0") && msg.contains("the most waiting of its 1"),
        "{msg}"
    );
}

/// `c` on the Timeline puts each rank's launching threads above its device
/// lane; the details of a kernel name the CPU stack that launched it, and on
/// a CPU lane the call stack under the cursor.
#[test]
fn cpu_lanes_show_what_launched_each_kernel() {
    let mut a = app(two_ranks(), (120, 40));
    a.update(Action::SelectTab(Tab::Timeline));
    a.update(Action::ToggleCpu);
    let screen = text_of(&draw(&a));
    // Two ranks, each with its launching thread (tid 1), its launch queue
    // and its device lane.
    assert!(screen.contains("· 6 lanes"), "{screen}");
    for lane in [
        "r0 cpu", "r0 queue", "rank 0", "r1 cpu", "r1 queue", "rank 1",
    ] {
        assert!(screen.contains(lane), "{lane}\n{screen}");
    }
    assert!(screen.contains("▒ CPU op  ▞ runtime call"), "{screen}");
    // A search still lands on device lanes: rank 0's all-reduce.
    a.update(Action::Search);
    for c in "allreduce".chars() {
        a.update(Action::Input(c));
    }
    a.update(Action::Submit);
    assert_eq!(a.state::<TimelineState>().unwrap().lane, 2);
    // Its launch (6 µs, on r0 cpu) and its start (30 µs) are marked `◆`,
    // the launch to the left: the CPU ran 24 µs ahead.
    let screen = text_of(&draw(&a));
    let mark = |label: &str| {
        let line = screen
            .lines()
            .find(|l| l.starts_with(label))
            .unwrap_or_else(|| {
                panic!(
                    "{label}
{screen}"
                )
            });
        line.chars().position(|c| c == '◆')
    };
    let (launch, start) = (mark("r0 cpu"), mark("rank 0"));
    assert!(
        matches!((launch, start), (Some(l), Some(s)) if l < s),
        "{launch:?} {start:?}
{screen}"
    );
    a.update(Action::ToggleDetails);
    let screen = text_of(&draw(&a));
    assert!(
        screen.contains("launched from thread 1: cudaLaunchKernel"),
        "{screen}"
    );
    // Up past the launch queue to rank 0's CPU lane, the cursor on the
    // launch at 6 µs.
    a.update(Action::Up);
    a.update(Action::Up);
    let s = a.state::<TimelineState>().unwrap();
    assert_eq!(s.lane, 0);
    let launch = a.data.trace.ranks[0].cpu[0]
        .ops
        .iter()
        .find(|o| o.start == s.cursor - Ns(24_000))
        .map(|o| o.start)
        .unwrap();
    a.state_mut::<TimelineState>().unwrap().cursor = launch;
    let screen = text_of(&draw(&a));
    assert!(
        screen.contains("r0 cpu · column") && screen.contains("thread 1: cudaLaunchKernel"),
        "{screen}"
    );
    assert!(screen.contains("call stack at the cursor"), "{screen}");
    // Off again: back to two lanes, the selection on rank 0.
    a.update(Action::ToggleCpu);
    let s = a.state::<TimelineState>().unwrap();
    assert_eq!((s.cpu, s.lane), (false, 0));
}

#[test]
fn sample_timeline_with_cpu_lanes() {
    let mut a = app(sample(), (120, 30));
    a.update(Action::SelectTab(Tab::Timeline));
    a.update(Action::ToggleCpu);
    insta::assert_snapshot!("sample_timeline_cpu_120x30", draw(&a));
}

#[test]
fn dlrm_cpu_lanes_name_the_collective_call() {
    let Some(p) = crate::support::corpus("kineto/dlrm_8rank_v100") else {
        return;
    };
    let mut a = app(load(&p), (160, 40));
    a.update(Action::SelectTab(Tab::Timeline));
    a.update(Action::ToggleCpu);
    // Each rank: its main thread and the autograd thread that launches the backward.
    assert_eq!(a.data.cpu_lanes.len(), 16);
    // And its launch queue, above its device lane.
    assert!(text_of(&draw(&a)).contains("· 32 lanes"));
    a.update(Action::Search);
    for c in "SendRecv".chars() {
        a.update(Action::Input(c));
    }
    a.update(Action::Submit);
    a.update(Action::ToggleDetails);
    let screen = text_of(&draw(&a));
    assert!(screen.contains("launched from thread"), "{screen}");
    assert!(screen.contains("c10d::alltoall"), "{screen}");
}

/// Dumps alone open on the Hang tab, which shows `ccl-bench hang`'s lines;
/// beside profiler traces a notice points to it.
#[test]
fn hang_tab_shows_the_flight_recorder_verdict() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("trace_collection/llama_fsdp_8gpu_hang");
    let run = ccl_bench::session::open(
        &dir,
        &LoadOptions::default(),
        ccl_bench::session::Need::Screen,
        &Progress::default(),
    )
    .unwrap();
    assert_eq!((run.trace.ranks.len(), run.trace.flight.len()), (0, 8));
    let data = Data::new(run.trace, run.report, None, Options::default());
    let a = app(data, (100, 30));
    assert_eq!(a.tab, Tab::Hang);
    assert!(a.tabs().contains(&Tab::Hang));
    let screen = text(draw(&a).buffer());
    assert!(
        screen.contains("HANG  rank(s) 5 never called _allgather_base #44"),
        "{screen}"
    );
    assert!(screen.contains("never scheduled it:    5"), "{screen}");
}

/// Steps × ranks on the sample: `p` puts the cursor on the last step, Enter
/// opens that rank's step with its figure against its median (rank 0's
/// steps, from its file: ProfilerStep#3 29,218.24 µs on the CPU, its device
/// work 29,037.64 µs; the median of 29,218 / 29,271 / 29,281 µs is 29,271);
/// `m` switches the measure (wait caused, step time, exposed comm).
#[test]
fn steps_by_ranks_walks_every_step_and_opens_one() {
    let mut a = app(sample(), (160, 45));
    a.update(Action::SelectTab(Tab::Stragglers));
    // With collectives matched, it opens on who holds the others up.
    let screen = text_of(&draw(&a));
    assert!(screen.contains("Steps × ranks: wait caused"), "{screen}");
    // Each rank's spread at the right: p50, p95, max.
    assert!(screen.contains("p50       p95       max"), "{screen}");
    a.update(Action::NextMeasure);
    assert!(text_of(&draw(&a)).contains("Steps × ranks: step time"));
    a.update(Action::PrevStep);
    assert_eq!(a.state::<StragglersState>().unwrap().step, Some(2));
    a.update(Action::Open);
    assert_eq!(a.tab, Tab::Timeline);
    let msg = a.state::<TimelineState>().unwrap().message.clone().unwrap();
    assert_eq!(
        msg,
        "rank 0, step 3: step time 29.2 ms (its median 29.3 ms) (Backspace: back)"
    );
    a.update(Action::GoBack);
    a.update(Action::NextMeasure);
    let screen = text_of(&draw(&a));
    assert!(screen.contains("Steps × ranks: exposed comm"), "{screen}");
}

/// A number key for a tab the run does not have says why.
#[test]
fn a_key_for_an_absent_tab_says_what_it_needs() {
    let mut a = app(sample(), (160, 45));
    a.update(Action::SelectTab(Tab::Memory));
    assert_eq!(a.tab, Tab::Summary);
    let screen = text_of(&draw(&a));
    assert!(
        screen.contains("no Memory tab: it needs a CUDA memory snapshot beside the traces"),
        "{screen}"
    );
}

/// Esc on a zoomed Timeline goes back one zoom, then to the whole trace.
#[test]
fn esc_walks_back_the_zooms() {
    let mut a = app(sample(), (160, 45));
    a.update(Action::SelectTab(Tab::Timeline));
    let whole = a.state::<TimelineState>().unwrap().view;
    a.update(Action::ZoomIn);
    let once = a.state::<TimelineState>().unwrap().view;
    a.update(Action::ZoomIn);
    assert!(a.state::<TimelineState>().unwrap().view.len() < once.len());
    a.update(Action::Back);
    assert_eq!(a.state::<TimelineState>().unwrap().view, once);
    a.update(Action::Back);
    assert_eq!(a.state::<TimelineState>().unwrap().view, whole);
}

/// End on the Summary reaches the warnings and inputs below the metrics.
#[test]
fn summary_end_shows_the_bottom_of_the_tab() {
    let mut a = app(sample(), (100, 24));
    a.update(Action::End);
    let screen = text_of(&draw(&a));
    assert!(screen.contains("Inputs: "), "{screen}");
}

/// A warning that puts a verdict in doubt is on the Summary under it: a
/// file cut short doubts every figure (under the step time), 2 of a world
/// of 4 ranks doubt the straggler.
#[test]
fn warnings_sit_under_the_verdicts_they_qualify() {
    let mut ranks = ccl_bench::synth::two_rank_example();
    for r in &mut ranks {
        r.world_size = Some(4);
    }
    let dir = write_ranks(&ranks);
    // Rank 1's file loses its last 40 bytes (the end of the event list).
    let f = dir.path().join("rank1_trace.json");
    let text = std::fs::read_to_string(&f).unwrap();
    std::fs::write(&f, &text[..text.len() - 40]).unwrap();
    let d = unaligned(dir.path());
    let screen = text_of(&draw(&app(d, (160, 45))));
    let lines: Vec<&str> = screen.lines().collect();
    let under = |verdict: &str| {
        let at = lines
            .iter()
            .position(|l| l.trim_start().starts_with(verdict))
            .unwrap_or_else(|| panic!("{verdict}\n{screen}"));
        lines[at + 1].trim_start().to_owned()
    };
    assert!(
        under("step time").starts_with("⚠ every figure: ")
            && under("step time").contains("rank1_trace.json"),
        "{screen}"
    );
    assert!(
        under("straggler").starts_with("⚠ 2 of 4 ranks in the trace"),
        "{screen}"
    );
}

/// Only a warning of a kind that doubts every figure (a file read in part)
/// is said under the step time: events of a device-looking category no
/// reader knows are left out of the metrics, which is said among the
/// warnings, not as a doubt on every figure; nor is one under the straggler
/// when every rank is there.
#[test]
fn a_warning_that_doubts_no_verdict_is_not_said_under_one() {
    let dir = write_ranks(&ccl_bench::synth::two_rank_example());
    let f = dir.path().join("rank1_trace.json");
    let text = std::fs::read_to_string(&f).unwrap();
    let at = text.find("\"traceEvents\"").unwrap();
    let open = at + text[at..].find('[').unwrap() + 1;
    let odd = r#"{"ph": "X", "cat": "hpu_op", "name": "x", "ts": 70, "dur": 1},"#;
    std::fs::write(&f, format!("{}{odd}{}", &text[..open], &text[open..])).unwrap();
    let d = unaligned(dir.path());
    let odd = d.warnings.iter().find(|w| w.text.contains("\"hpu_op\""));
    assert_eq!(
        odd.map(|w| w.kind),
        Some(ccl_bench::model::warning::Kind::Ignored),
        "{:?}",
        d.warnings
    );
    let screen = text_of(&draw(&app(d, (160, 45))));
    assert!(!screen.contains("⚠"), "{screen}");
    assert!(
        screen.contains("warning: ") && screen.contains("hpu_op"),
        "{screen}"
    );
}

/// Collectives `v`: transfer time against size with the series' Hockney
/// fit. On the tp × dp grid the dp all-reduces move 1 MiB in 30 µs and
/// 2 MiB in 50 µs: α = 10 µs, 1/β = 1 MiB / 20 µs = 52.4 GB/s, no residual
/// (so no outlier: Enter opens the slowest transfer, a 2 MiB one).
#[test]
fn collectives_size_plot_draws_the_fit() {
    let dir = write_ranks(&ccl_bench::synth::tp_dp_grid(false));
    let d = unaligned(dir.path());
    let mut a = app(d, (120, 30));
    a.update(Action::SelectTab(Tab::Collectives));
    a.update(Action::TogglePlot);
    let mut screen = text_of(&draw(&a));
    for _ in 0..4 {
        if screen.contains("all_reduce dp n2") {
            break;
        }
        a.update(Action::Down);
        screen = text_of(&draw(&a));
    }
    assert!(
        screen.contains("Transfer time × message size · all_reduce dp n2"),
        "{screen}"
    );
    assert!(
        screen.contains("α 10.0 µs · 1/β 52.4 GB/s · rms 0 ns · 0 beyond 3 rms"),
        "{screen}"
    );
    a.update(Action::Open);
    assert_eq!(a.tab, Tab::Timeline);
    let msg = a.state::<TimelineState>().unwrap().message.clone().unwrap();
    assert!(
        msg.contains("the slowest transfer of all_reduce dp n2"),
        "{msg}"
    );
    // Back on Collectives, `v` returns to the table.
    a.update(Action::GoBack);
    a.update(Action::TogglePlot);
    assert!(text_of(&draw(&a)).contains("Collectives matched across ranks"));
}

/// The size plot marks what its fit does not explain: two ranks all-reduce
/// 1 MiB 20 times in 30 µs and 2 MiB 20 times in 50 µs, and once 1 MiB in
/// 300 µs. The fit's mean at 1 MiB is (20 x 30 + 300) / 21 = 42.9 µs, so
/// the slow one is 257 µs off while the rms is sqrt((20 x 12.86² + 257.1²)
/// / 41) = 41.15 µs: beyond 3 rms, the only one, and Enter opens it.
#[test]
fn the_size_plot_marks_and_opens_what_the_fit_does_not_explain() {
    use ccl_bench::synth::{Coll, RankTrace};
    let (small, large) = (
        Coll::all_reduce_f32(262_144, 2),
        Coll::all_reduce_f32(524_288, 2),
    );
    let name = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
    let ranks: Vec<RankTrace> = (0..2)
        .map(|r| {
            let mut t = RankTrace::new(Some(r), 2, 132);
            for i in 0..20 {
                t.collective(name, 1_000.0 * f64::from(i), 30.0, 20, &small);
                t.collective(name, 1_000.0 * f64::from(i) + 500.0, 50.0, 20, &large);
            }
            t.collective(name, 30_000.0, 300.0, 20, &small);
            t
        })
        .collect();
    let dir = write_ranks(&ranks);
    let mut a = app(unaligned(dir.path()), (120, 30));
    a.update(Action::SelectTab(Tab::Collectives));
    a.update(Action::TogglePlot);
    let screen = text_of(&draw(&a));
    assert!(screen.contains("41 instances · 2 sizes"), "{screen}");
    assert!(
        screen.contains("rms 41.2 µs · 1 beyond 3 rms (!), Enter opens the worst"),
        "{screen}"
    );
    a.update(Action::Open);
    assert_eq!(a.tab, Tab::Timeline);
    let t = a.state::<TimelineState>().unwrap();
    assert!(t
        .message
        .clone()
        .unwrap()
        .contains("the worst fit of all_reduce"));
    // The op at the cursor is the slow one, at 30 ms.
    assert_eq!(t.cursor, Ns(30_000_000));
}

/// The Memory tab on h100_gpt_eager's trace clock: the Timeline's ruler
/// with its step marks, the trace's forward/backward ranges as a row in
/// their phases' colours, and the view and cursor shared with the Timeline
/// both ways; Enter opens the Timeline there. A snapshot with no trace is
/// on its own clock and says why.
#[test]
fn memory_shares_the_timelines_clock() {
    use ccl_bench::tui::tabs::memory::MemoryState;
    use ratatui::style::Color;
    let Some(dir) = crate::support::corpus("kineto/h100_gpt_eager") else {
        return;
    };
    let mut a = app(load(&dir), (160, 45));
    a.update(Action::SelectTab(Tab::Memory));
    let screen = text(draw(&a).buffer());
    assert!(screen.contains("on the Timeline's clock"), "{screen}");
    assert!(screen.contains("│step 2"), "{screen}");
    // At the peak (before the profiled window): 6.738 GB, by phase.
    assert!(
        screen.contains("allocated 6.738 GB (before history 1.463 GB, forward 2.130 GB, backward 2.097 GB, other 1.049 GB)"),
        "{screen}"
    );
    a.update(Action::NextStep);
    let m = a.state::<MemoryState>().unwrap().clone();
    let step2 = a.data.steps.iter().find(|s| s.number == 2).unwrap().span;
    assert_eq!(m.cursor, step2.start);
    let buf = draw(&a).buffer().clone();
    let screen = text(&buf);
    assert!(screen.contains("· step 2 · in forward"), "{screen}");
    // The phase row, under the ruler: forward and backward in their own
    // patterns without colour, in blue and magenta with it.
    let row = screen.lines().position(|l| l.starts_with("phase")).unwrap();
    let phases = screen.lines().nth(row).unwrap();
    assert!(phases.contains('█') && phases.contains('▒'), "{phases}");
    let mut coloured = App::new(Arc::new(load(&dir)), Theme::default(), (160, 45));
    coloured.update(Action::SelectTab(Tab::Memory));
    coloured.update(Action::NextStep);
    let cbuf = draw(&coloured).buffer().clone();
    let colours: Vec<Color> = (10..160).map(|x| cbuf[(x, row as u16)].fg).collect();
    assert!(colours.contains(&Color::Blue) && colours.contains(&Color::Magenta));
    // To the Timeline: the same cursor and zoom (the view moved inside the
    // trace: the Memory tab's starts before it, the history doing so).
    a.update(Action::SelectTab(Tab::Timeline));
    let t = a.state::<TimelineState>().unwrap();
    assert_eq!((t.view.len(), t.cursor), (m.view.len(), m.cursor));
    assert_eq!(t.view.start, a.data.span.start);
    // Moved there, back to Memory: it follows.
    for _ in 0..5 {
        a.update(Action::CursorRight);
    }
    let t = a.state::<TimelineState>().unwrap().clone();
    a.update(Action::SelectTab(Tab::Memory));
    let m = a.state::<MemoryState>().unwrap();
    assert_eq!((m.view, m.cursor), (t.view, t.cursor));
    assert!(m.cursor > step2.start);
    // Enter: the Timeline, there.
    a.update(Action::ZoomIn);
    let m = a.state::<MemoryState>().unwrap().clone();
    a.update(Action::Open);
    assert_eq!(a.tab, Tab::Timeline);
    let t = a.state::<TimelineState>().unwrap();
    assert_eq!((t.view, t.cursor), (m.view, m.cursor));

    // A snapshot alone: its own clock, and no steps to go to.
    let Some(only) = crate::support::corpus("memory/h100_tiny_transformer") else {
        return;
    };
    let mut a = app(load(&only), (140, 30));
    assert_eq!(a.tab, Tab::Memory);
    a.update(Action::NextStep);
    let screen = text(draw(&a).buffer());
    assert!(
        screen.contains("on the allocator's own clock: no trace of rank 0 to share its clock"),
        "{screen}"
    );
    assert!(
        screen.contains("no steps: the snapshot is not on the trace's clock"),
        "{screen}"
    );
    a.update(Action::Open);
    assert_eq!(a.tab, Tab::Memory);
}

/// An nsys-jax archive in the older layout keeps each range's CPU times:
/// `t` shows the launcher thread as a CPU lane above the device's, holding
/// the XLA module and its thunks as the CPU ran them.
#[test]
fn nsys_jax_launcher_threads_are_cpu_lanes() {
    use ccl_bench::synth::nsys_jax::{archive, thread_table, trace_table, Layout, ProjRange};
    let dir = tempfile::tempdir().unwrap();
    let r = |id, parent, name: &str, start: i64, end: i64| ProjRange {
        id,
        parent,
        name: name.into(),
        start,
        end,
        pid: 300,
        tid: 9,
        // The CPU ran each range 2 µs before its work reached the GPU.
        orig: Some((start - 2_000, start - 2_000 + (end - start) / 4)),
    };
    let ranges = [
        r(
            1,
            None,
            "XlaModule:#hlo_module=jit_train_step,program_id=3#",
            10_000,
            20_000,
        ),
        r(2, Some(1), "Thunk:#hlo_op=fusion.1#", 10_000, 13_000),
        r(
            3,
            Some(1),
            "Thunk:#hlo_op=all-gather-start.2#",
            13_000,
            17_000,
        ),
        r(4, Some(1), "Thunk:#hlo_op=cublas-gemm.3#", 17_000, 20_000),
    ];
    let threads = thread_table(&[(300, 9, "XlaLauncher:#global=0,local=0,process=0,slice=0#")]);
    std::fs::write(
        dir.path().join("p0.zip"),
        archive(
            "p0",
            &trace_table(&ranges, Layout::Projected),
            Some(&threads),
        ),
    )
    .unwrap();
    let data = load(dir.path());
    assert_eq!(data.cpu_lanes.len(), 1);
    let mut a = app(data, (120, 30));
    a.update(Action::SelectTab(Tab::Timeline));
    a.update(Action::ToggleCpu);
    let t = a.state::<TimelineState>().unwrap();
    assert!(t.cpu);
    let labels: Vec<String> = t.lanes(&a.data).iter().map(|l| l.label()).collect();
    assert_eq!(labels, ["r0 cpu", "r0 queue", "rank 0"]);
    let screen = text(draw(&a).buffer());
    assert!(!screen.contains("no CPU lanes"), "{screen}");
}

/// With CPU lanes on, each rank has a launch queue lane between its CPU
/// lanes and its device lane: per column, how long the ops starting there
/// waited after their launch. Kernel A starts 5 µs after its launch, kernel
/// B 150 µs after (the CPU ran 150 µs ahead); the info line on the queue
/// lane says so at each.
#[test]
fn launch_queue_lane_shows_how_far_the_cpu_ran_ahead() {
    use ccl_bench::synth::RankTrace;
    let mut r = RankTrace::new(Some(0), 1, 10);
    let a = r.kernel("sm90_gemm_a", 100.0, 50.0, 7, 1);
    r.launch(a, 95.0);
    let b = r.kernel("sm90_gemm_b", 1000.0, 50.0, 7, 1);
    r.launch(b, 850.0);
    let dir = write_ranks(&[r]);
    let mut app = app(load(dir.path()), (120, 30));
    app.update(Action::SelectTab(Tab::Timeline));
    // Off: no queue lane.
    let labels = |app: &App| -> Vec<String> {
        let t = app.state::<TimelineState>().unwrap();
        t.lanes(&app.data).iter().map(|l| l.label()).collect()
    };
    assert_eq!(labels(&app), ["rank 0"]);
    app.update(Action::ToggleCpu);
    assert_eq!(labels(&app), ["r0 cpu", "r0 queue", "rank 0"]);
    let starts: Vec<Ns> = app.data.trace.ranks[0]
        .ops
        .iter()
        .map(|o| o.start)
        .collect();
    for (start, said) in [
        (starts[0], "waited up to 5.00 µs"),
        (starts[1], "waited up to 150 µs"),
    ] {
        let t = app.state_mut::<TimelineState>().unwrap();
        t.lane = 1;
        t.cursor = start;
        let screen = text(draw(&app).buffer());
        assert!(
            screen.contains(&format!(
                "r0 queue: the ops starting in the cursor's column {said}"
            )),
            "{screen}"
        );
    }
    // Between the two, nothing starts.
    let t = app.state_mut::<TimelineState>().unwrap();
    t.cursor = starts[0] + Ns(400_000);
    let screen = text(draw(&app).buffer());
    assert!(
        screen.contains("r0 queue: no op with a known launch starts in the cursor's column"),
        "{screen}"
    );
}
