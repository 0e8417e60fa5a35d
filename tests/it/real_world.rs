//! Inputs as other people's real runs write them: communication libraries
//! that bypass NCCL, per-rank folders of profiler windows, nsys-jax archives.

use std::sync::Arc;

use ccl_bench::synth::RankTrace;
use ccl_bench::tui::app::App;
use ccl_bench::tui::theme::Theme;

use crate::support::{assert_close, run, stdout, write_ranks};
use crate::tui::{draw, load, text};

/// DeepEP's layout kernel, in a fork's namespace as a DeepSeek-V3 trace
/// names it, counts tokens on the local GPU: MoE routing, not one of the
/// all-to-all kernels of its namespace. Per rank 10 µs of it and 30 µs of
/// dispatch: communication 30 / 40, MoE 10 / 40, and one communication
/// kernel per rank.
#[test]
fn deepep_layout_is_routing_not_communication() {
    let ranks: Vec<RankTrace> = (0..2)
        .map(|r| {
            let mut t = RankTrace::new(Some(r), 2, 10);
            t.step(1, 0.0, 100.0);
            t.kernel(
                "void dpsk::ep::cuda::get_dispatch_layout<256, 32, 8>(long const*, int*, int*, int*, bool*, int, int, int, int)",
                0.0,
                10.0,
                7,
                8,
            );
            t.kernel(
                "void dpsk::ep::internode::dispatch<true, 8, 2, 4, 8>(int4*, float*, int*)",
                10.0,
                30.0,
                20,
                24,
            );
            t
        })
        .collect();
    let dir = write_ranks(&ranks);
    assert_close(
        metric(dir.path(), "communication_fraction"),
        75.0,
        "communication_fraction",
    );
    assert_close(metric(dir.path(), "moe_fraction"), 25.0, "moe_fraction");
    assert_close(
        metric(dir.path(), "num_comm_kernels"),
        2.0,
        "num_comm_kernels",
    );
}

/// HTA's `ns_resolution_trace` writes epoch microseconds with nanosecond
/// fractions (`ts` ~1.7e15). Read as doubles, all of its device ops landed on
/// multiples of 250 ns; the file itself has 31 such starts among them.
#[test]
fn epoch_microseconds_keep_their_nanoseconds() {
    let Some(dir) = crate::support::corpus("kineto/hta/ns_resolution_trace") else {
        return;
    };
    let p = dir.to_str().unwrap();
    let out = run(&[
        "ops", p, "--rank", "0", "--limit", "100000", "--format", "json",
    ]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let ops = doc["ops"].as_array().unwrap();
    assert_eq!(doc["left_out"], 0);
    let on_grid = ops
        .iter()
        .filter(|o| o["start_ns"].as_i64().unwrap() % 250 == 0)
        .count();
    assert_eq!((ops.len(), on_grid), (6095, 31));
}

/// vLLM's `std::enable_if<(((8)>(0)))&&…, void>::type
/// vllm::fused_add_rms_norm_kernel<…>(…)` on tracelens/b200: a return type,
/// and a `>` inside parentheses in its template arguments. It is a norm;
/// read as unclassified it doubled the unclassified share (7.35 %). Its one
/// Inductor kernel, `triton_poi_fused_add_bitwise_…_0` (1.984 µs of
/// 11,665.76 µs of device time), is pointwise: 405.0 - 1.98 µs of
/// unrecognised time is 3.4546 %.
#[test]
fn a_return_type_does_not_hide_the_kernel() {
    let Some(dir) = crate::support::corpus("kineto/tracelens/b200") else {
        return;
    };
    let share = metric(&dir, "unclassified_fraction");
    assert!((share - 3.4546).abs() < 1e-3, "{share}");
}

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

/// One profiling window as `tensorboard_trace_handler` writes it in a loop:
/// three steps of `step_us` each, starting `at` µs, numbered from `first`.
fn window(rank: u32, at: f64, first: u32, step_us: f64) -> String {
    let mut t = RankTrace::new(Some(rank), 2, 10);
    for i in 0..3 {
        let start = at + f64::from(i) * step_us;
        t.step(first + i, start, step_us);
        t.kernel("sm90_xmma_gemm_bf16_bf16", start + 1.0, step_us / 2.0, 7, 8);
    }
    t.to_json()
}

/// `run/rank_N/<host>_<pid>.<ms>.pt.trace.json` for 2 ranks x 3 windows, the
/// middle step of the windows lasting 100, 200 and 300 µs in time order. The
/// timestamps differ in length, so name order is not time order.
fn rank_folders() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let stamps = ["999000000000", "1000000000000", "1000000000500"];
    for rank in 0..2u32 {
        let folder = dir.path().join(if rank == 0 { "rank_0" } else { "rank-1" });
        std::fs::create_dir(&folder).unwrap();
        for (w, stamp) in stamps.iter().enumerate() {
            let name = format!("node{rank}_4242.{stamp}.pt.trace.json");
            let step_us = 100.0 * (w + 1) as f64;
            let text = window(rank, w as f64 * 10_000.0, 3 * w as u32 + 1, step_us);
            std::fs::write(folder.join(name), text).unwrap();
        }
        std::fs::write(
            folder.join(format!("metadata_rank_{rank}.yml")),
            "host: node\n",
        )
        .unwrap();
    }
    dir
}

#[test]
fn per_rank_folders_read_the_newest_window_by_default() {
    let dir = rank_folders();
    let d = dir.path().to_str().unwrap();
    assert_close(metric(dir.path(), "avg_step_time"), 300e-6, "newest window");
    let out = run(&["--trace", d, "--metric", "avg_step_time", "--window", "1"]);
    assert_close(stdout(&out).trim().parse().unwrap(), 100e-6, "window 1");
    let out = run(&["--trace", d, "--inputs"]);
    let text = stdout(&out) + &crate::support::stderr(&out);
    assert!(
        text.contains("2 rank folders (rank_0 .. rank-1) with up to 3 profiler windows each; read the newest window of each rank"),
        "{text}"
    );
    assert!(text.contains("rank 1"), "{text}");
    // Only the newest window of each rank is listed: two files.
    assert_eq!(text.matches(".pt.trace.json").count(), 2, "{text}");
    assert!(text.contains("1000000000500"), "{text}");
    // No window 4: said, not a crash.
    let out = run(&["--trace", d, "--metrics", "--window", "4"]);
    assert!(!out.status.success());
    assert!(crate::support::stderr(&out).contains("no window 4 (it has 3)"));
}

#[test]
fn all_windows_join_into_one_timeline_per_rank() {
    let dir = rank_folders();
    let d = dir.path().to_str().unwrap();
    let out = run(&[
        "--trace",
        d,
        "--metrics",
        "--format",
        "json",
        "--windows",
        "all",
    ]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let got = json["metrics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["name"] == "avg_step_time")
        .unwrap()["value"]
        .as_f64()
        .unwrap();
    // Nine steps per rank; the first and last are left out. Steps 2-8: 100, 100 (window 1), 200 x 3, 300, 300 -> 1400 / 7 µs.
    assert_close(got, 1400e-6 / 7.0, "avg_step_time over joined windows");
}

/// Two nsys-jax archives, one per process, each driving one GPU: two ranks
/// read through the format table, thunks as ops, collectives as communication.
#[test]
fn nsys_jax_archives_are_one_rank_per_device() {
    use ccl_bench::synth::nsys_jax::{archive, thread_table, trace_table, Layout, ProjRange};
    let dir = tempfile::tempdir().unwrap();
    for p in 0..2i64 {
        let r = |id, parent, name: &str, start: i64, end: i64| ProjRange {
            id,
            parent,
            name: name.into(),
            start: start + 5_000 * p,
            end: end + 5_000 * p,
            pid: 300 + p,
            tid: 9,
            ..Default::default()
        };
        let ranges = [
            r(
                1,
                None,
                "XlaModule:#hlo_module=jit_train_step,program_id=3#",
                0,
                1000,
            ),
            r(2, Some(1), "Thunk:#hlo_op=fusion.1#", 0, 300),
            r(3, Some(1), "Thunk:#hlo_op=all-gather-start.2#", 300, 700),
            r(4, Some(1), "Thunk:#hlo_op=all-gather-done.2#", 700, 710),
            r(5, Some(3), "ncclAllGather", 320, 690),
            r(6, Some(1), "Thunk:#hlo_op=cublas-gemm.3#", 720, 880),
        ];
        let name = format!("XlaLauncher:#global={p},local=0,process={p},slice=0#");
        let threads = thread_table(&[(300 + p, 9, name.as_str())]);
        let layout = if p == 0 {
            Layout::Projected
        } else {
            Layout::StartEnd
        };
        let bytes = archive(
            &format!("pax_{p}"),
            &trace_table(&ranges, layout),
            Some(&threads),
        );
        std::fs::write(dir.path().join(format!("pax_fsdp_process{p}.zip")), bytes).unwrap();
    }
    // Per device: fusion 300 + all-gather 400 + gemm 160 ns; the done thunk
    // and the NCCL range inside the start are not ops of their own.
    assert_close(
        metric(dir.path(), "communication_fraction"),
        400.0 / 860.0 * 100.0,
        "communication_fraction",
    );
    assert_close(
        metric(dir.path(), "num_comm_kernels"),
        2.0,
        "num_comm_kernels",
    );
    let d = dir.path().to_str().unwrap();
    let out = run(&["--trace", d, "--inputs"]);
    let text = stdout(&out);
    assert_eq!(text.matches("nsys-jax archive").count(), 2, "{text}");
    let table = stdout(&run(&["--trace", d, "--metrics"]));
    assert!(table.contains("2 ranks (ranks 0-1)"), "{table}");
    let kinds = table
        .lines()
        .skip_while(|l| !l.starts_with("total_comm_time_s"))
        .nth(1)
        .unwrap();
    assert!(kinds.trim_start().starts_with("all_gather"), "{kinds}");
    // The terminal UI opens it too.
    let app = App::new(Arc::new(load(dir.path())), Theme::mono(), (120, 30));
    assert!(text_of(&app).contains("2 ranks"));
}

/// One process driving 4 GPUs, archived without thread names (an older
/// nsys-jax): each launcher thread is a rank, so the all-reduce is one
/// collective of 4 members, not 4 ops of one rank (see [`xla_process`]).
#[test]
fn one_process_driving_four_gpus_without_thread_names_is_four_ranks() {
    use ccl_bench::synth::nsys_jax::{archive, trace_table, Layout};
    let dir = tempfile::tempdir().unwrap();
    let ranges = xla_process(77, 0, 4, "jit_train_step");
    let bytes = archive("maxtext", &trace_table(&ranges, Layout::StartEnd), None);
    std::fs::write(dir.path().join("maxtext_fsdp4.zip"), bytes).unwrap();
    let d = dir.path().to_str().unwrap();
    let out = run(&["--trace", d, "--metrics"]);
    let table = stdout(&out);
    assert!(table.contains("4 ranks (ranks 0-3)"), "{table}");
    assert!(
        crate::support::stderr(&out).contains("read as 4 devices, numbered in thread order"),
        "{}",
        crate::support::stderr(&out)
    );
    let stderr = crate::support::stderr(&out);
    assert!(
        stderr.contains("no rank in distributedInfo or file name; using ranks 0-3"),
        "{stderr}"
    );
    let doc: serde_json::Value =
        serde_json::from_str(&stdout(&run(&["collectives", d, "--format", "json"]))).unwrap();
    let list = doc["instances"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{doc}");
    let waits: Vec<i64> = (list[0]["members"].as_array().unwrap().iter())
        .map(|m| m["wait_ns"].as_i64().unwrap())
        .collect();
    // Each waits from its arrival until rank 3's at 450 ns.
    assert_eq!(waits, [150, 100, 50, 0], "{doc}");
    assert_eq!(list[0]["last_rank"], 3);
    assert_eq!(list[0]["last_by_ns"], 50);
    // One all-reduce on each of the 4 ranks (it was 4 on one rank).
    assert_close(
        metric(dir.path(), "num_comm_kernels"),
        4.0,
        "num_comm_kernels",
    );
    assert_close(metric(dir.path(), "coll_call_num"), 1.0, "coll_call_num");
}

/// `n` devices of process `pid`, each on launcher thread `200 + i`, running
/// `program` once: a fusion, an all-reduce (its NCCL range inside) ending at
/// 700 ns, its done thunk and a GEMM. Device `first + i` arrives at
/// `300 + 50 (first + i)` ns.
fn xla_process(
    pid: i64,
    first: i64,
    n: i64,
    program: &str,
) -> Vec<ccl_bench::synth::nsys_jax::ProjRange> {
    let mut ranges = Vec::new();
    for i in 0..n {
        let late = 50 * (first + i);
        let r = |id: i64, parent: Option<i64>, name: &str, start: i64, end: i64| {
            ccl_bench::synth::nsys_jax::ProjRange {
                id: id + 10 * i,
                parent: parent.map(|p| p + 10 * i),
                name: name.into(),
                start,
                end,
                pid,
                tid: 200 + i,
                ..Default::default()
            }
        };
        let module = format!("XlaModule:#hlo_module={program},program_id=5#");
        ranges.extend([
            r(1, None, &module, 0, 1000),
            r(2, Some(1), "Thunk:#hlo_op=fusion.1#", 0, 300 + late),
            r(
                3,
                Some(1),
                "Thunk:#hlo_op=all-reduce-start.2#",
                300 + late,
                700,
            ),
            r(4, Some(3), "ncclAllReduce", 305 + late, 695),
            r(5, Some(1), "Thunk:#hlo_op=all-reduce-done.2#", 700, 705),
            r(6, Some(1), "Thunk:#hlo_op=cublas-gemm.3#", 705, 905),
        ]);
    }
    ranges
}

/// The 4 PAX archives and a MaxText archive in one folder are two runs,
/// told apart by the XLA programs they ran: the newest is read and the
/// other named, `--run K` reads either, and a run folder inside an
/// otherwise empty folder is read with a note.
#[test]
fn unrelated_runs_in_one_folder_are_not_one_run() {
    use ccl_bench::synth::nsys_jax::{archive, thread_table, trace_table, Layout};
    use std::time::{Duration, SystemTime};
    let top = tempfile::tempdir().unwrap();
    let dir = top.path().join("jobs");
    std::fs::create_dir(&dir).unwrap();
    let day = SystemTime::now() - Duration::from_secs(86_400);
    for p in 0..4i64 {
        let name = format!("XlaLauncher:#global={p},local=0,process={p},slice=0#");
        let threads = thread_table(&[(300 + p, 200, name.as_str())]);
        let ranges = xla_process(300 + p, p, 1, "pjit__wrapped_step_fn");
        let bytes = archive(
            "pax",
            &trace_table(&ranges, Layout::StartEnd),
            Some(&threads),
        );
        let path = dir.join(format!("pax_fsdp_process{p}.zip"));
        std::fs::write(&path, bytes).unwrap();
        let f = std::fs::File::options().write(true).open(&path).unwrap();
        f.set_modified(day).unwrap();
    }
    let ranges = xla_process(77, 0, 4, "jit_train_step");
    let bytes = archive("maxtext", &trace_table(&ranges, Layout::StartEnd), None);
    std::fs::write(dir.join("maxtext_fsdp4.zip"), bytes).unwrap();
    let d = dir.to_str().unwrap();
    let out = run(&["--trace", d, "--metrics"]);
    assert!(out.status.success());
    let (table, err) = (stdout(&out), crate::support::stderr(&out));
    assert!(table.contains("4 ranks (ranks 0-3)"), "{table}");
    assert!(
        err.contains(
            "2 unrelated runs in one folder (different XLA programs); reading run 1: \
             maxtext_fsdp4.zip (4 ranks), the newest; not read: run 2: 4 files, \
             pax_fsdp_process0.zip … pax_fsdp_process3.zip (4 ranks); choose another with --run K"
        ),
        "{err}"
    );
    // PAX alone: its all-reduce has 4 members, rank 3 last by 50 ns.
    let out = run(&["collectives", d, "--run", "2", "--format", "json"]);
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let list = doc["instances"].as_array().unwrap();
    assert_eq!(list.len(), 1, "{doc}");
    assert_eq!(list[0]["members"].as_array().unwrap().len(), 4);
    assert_eq!(list[0]["last_rank"], 3);
    assert!(crate::support::stderr(&out).contains("reading run 2: 4 files"));
    let out = run(&["--trace", d, "--run", "3", "--metric", "avg_step_time"]);
    assert_eq!(out.status.code(), Some(1));
    let err = crate::support::stderr(&out);
    assert!(
        err.contains(
            "run 3 not found; the runs there: run 1: maxtext_fsdp4.zip (4 ranks); run 2: 4 files"
        ),
        "{err}"
    );
    // The folder above holds only this one: it is read, and said.
    let up = top.path().to_str().unwrap();
    let out = run(&["--trace", up, "--run", "2", "--metrics"]);
    assert!(out.status.success());
    let err = crate::support::stderr(&out);
    assert!(err.contains("jobs, the only folder in"), "{err}");
}

/// Without step markers, the runs of the program run repeatedly (PAX's
/// `pjit__wrapped_step_fn`) make the steps, from one run to the next, the
/// first and last left out as for ProfilerStep: runs at 0, 1500 and 3000 ns
/// give a measured step of 1500 ns (1200 running, 300 idle).
#[test]
fn xla_program_runs_are_steps() {
    use ccl_bench::synth::nsys_jax::{archive, trace_table, Layout, ProjRange};
    let dir = tempfile::tempdir().unwrap();
    let mut ranges = Vec::new();
    for (k, (start, end)) in [(0i64, 1000i64), (1500, 2700), (3000, 4000)]
        .into_iter()
        .enumerate()
    {
        let id = 10 * k as i64;
        let r = |id: i64, parent: Option<i64>, name: &str, start: i64, end: i64| ProjRange {
            id,
            parent,
            name: name.into(),
            start,
            end,
            pid: 5,
            tid: 6,
            ..Default::default()
        };
        ranges.extend([
            r(
                id + 1,
                None,
                "XlaModule:#hlo_module=pjit__wrapped_step_fn,program_id=2#",
                start,
                end,
            ),
            r(
                id + 2,
                Some(id + 1),
                "Thunk:#hlo_op=fusion.1#",
                start,
                start + 600,
            ),
        ]);
    }
    let bytes = archive("pax", &trace_table(&ranges, Layout::StartEnd), None);
    std::fs::write(dir.path().join("pax.zip"), bytes).unwrap();
    assert_close(metric(dir.path(), "avg_step_time"), 1.5e-6, "avg_step_time");
    let table = stdout(&run(&[
        "--trace",
        dir.path().to_str().unwrap(),
        "--metrics",
    ]));
    assert!(
        table.contains(
            "runs of the XLA program pjit__wrapped_step_fn: no step markers in the trace"
        ),
        "{table}"
    );

    // The older layout with CPU times, the launcher running 800 ns ahead
    // (each run's fusion launched during the run before): each fusion is
    // still in the run it ran in.
    let ahead: Vec<ProjRange> = ranges
        .iter()
        .map(|r| ProjRange {
            orig: Some((r.start - 800, r.start - 700)),
            ..r.clone()
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    let bytes = archive("pax", &trace_table(&ahead, Layout::Projected), None);
    std::fs::write(dir.path().join("pax.zip"), bytes).unwrap();
    let data = crate::tui::load(dir.path());
    let t = &data.trace.ranks[0];
    let steps: Vec<Option<u32>> = t.ops.iter().map(|o| o.step.get()).collect();
    assert_eq!(steps, [Some(0), Some(1), Some(2)]);
    assert!(t.ops.iter().all(|o| (o.start - o.launch).get() == 800));
    assert_close(metric(dir.path(), "avg_step_time"), 1.5e-6, "avg_step_time");
}

fn text_of(app: &App) -> String {
    text(draw(app).buffer())
}

/// A folder of execution traces alone (no timelines) answers for the rank
/// asked: its own trace describes it; a rank it lacks is named with the
/// ranks it has (it said "ranks: " before).
#[test]
fn execution_traces_alone_answer_for_a_rank() {
    let Some(dir) = crate::support::corpus("et/dlrm_8rank_v100") else {
        return;
    };
    let p = dir.to_str().unwrap();
    let out = run(&["--trace", p, "--rank", "3", "--metrics", "--format", "json"]);
    assert!(out.status.success(), "{}", crate::support::stderr(&out));
    let doc: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    let calls = (doc["metrics"].as_array().unwrap().iter())
        .find(|m| m["name"] == "coll_call_num")
        .unwrap();
    let note = calls["note"].as_str().unwrap();
    assert!(
        note.contains("rank 3") && note.contains("dlrm_eg_3.json"),
        "{note}"
    );
    let out = run(&["--trace", p, "--rank", "9", "--metric", "coll_call_num"]);
    assert!(!out.status.success());
    assert!(
        crate::support::stderr(&out)
            .contains("rank 9 is not in the trace (ranks: 0, 1, 2, 3, 4, 5, 6, 7)"),
        "{}",
        crate::support::stderr(&out)
    );
}

/// torch.compile's Inductor kernels on tracelens/torch_compile_triton:
/// `triton_poi_*` (668.23 µs) and `triton_red_*` (167.73 µs) were the whole
/// unclassified share, 836 of 12,549 µs = 6.66 %; read by their kind
/// (pointwise, reduction), none is left.
#[test]
fn inductor_kernels_are_classified_by_their_kind() {
    let Some(dir) = crate::support::corpus("kineto/tracelens/torch_compile_triton") else {
        return;
    };
    assert_eq!(metric(&dir, "unclassified_fraction"), 0.0);
}

/// CPU lanes from an Nsight Systems export (nsys/h100_tiny_transformer, one
/// process, one GPU), counted in its SQLite: thread 832 made 987 CUDA API
/// calls, 470 of them launches; thread 769 6,632 calls (274 launches) and
/// the 128 NVTX ranges; thread 806 launched nothing and has no lane.
#[test]
fn nsight_threads_that_launch_are_cpu_lanes() {
    let Some(dir) = crate::support::corpus("nsys/h100_tiny_transformer") else {
        return;
    };
    let data = crate::tui::load(&dir);
    let threads: Vec<(u64, u64, usize)> = data.trace.ranks[0]
        .cpu
        .iter()
        .map(|t| (t.tid, t.launches, t.ops.len()))
        .collect();
    assert_eq!(threads, [(832, 470, 987), (769, 274, 6_632 + 128)]);
    // Its times count from the session's start, which the export states
    // in Unix ns (TARGET_INFO_SESSION_START_TIME: 2026-11-22T16:34:49).
    let epoch = data.trace.ranks[0].epoch.map(|e| e.get());
    assert_eq!(epoch, Some(1_795_365_289_688_864_902));
}

/// What is live at the allocation peak of memory/h100_tiny_transformer, by
/// where it was allocated, replayed independently from the pickle's
/// `device_traces` (peak after its 519th allocator event): 72,146,952 B
/// from `g.py:12 step`, 12,636,160 B from `g.py:14 step`, 42,994,696 B with
/// no Python frame (the autograd engine's), 33,554,432 of it cuBLAS's
/// workspace.
#[test]
fn memory_peak_names_where_its_bytes_were_allocated() {
    let Some(dir) = crate::support::corpus("memory/h100_tiny_transformer") else {
        return;
    };
    let data = crate::tui::load(&dir);
    let sites = &data.trace.memory[0].peak_sites;
    let bytes = |at: &str| sites.iter().find(|s| s.0 == at).map(|s| s.1);
    assert_eq!(
        sites[0],
        ("g.py:12 step".to_owned(), 72_146_952),
        "{sites:?}"
    );
    assert_eq!(bytes("g.py:14 step"), Some(12_636_160));
    assert_eq!(
        bytes("C++ at::cuda::setWorkspaceForHandle"),
        Some(33_554_432)
    );
}

/// h100_gpt_eager's memory snapshot on its trace's clock: the allocator's
/// Unix µs less the trace's `baseTimeNanoseconds`. Checked against the
/// trace's own `forward`/`backward`/`optimizer` ranges, as a Python read of
/// both files also finds: every allocation whose stack is a module's
/// forward and falls in the profiled window (297) lies in a `forward`
/// range, every autograd one (426) in `backward`, every optimizer or
/// gradient-clipping one (102) in `optimizer`. The history covers six
/// steps, the trace three; the rest fall outside it.
#[test]
fn memory_history_lands_in_the_phases_its_stacks_name() {
    use ccl_bench::model::memory::Phase;
    let Some(dir) = crate::support::corpus("kineto/h100_gpt_eager") else {
        return;
    };
    let data = crate::tui::load(&dir);
    let t = &data.trace.ranks[0];
    assert_eq!(t.epoch.map(|e| e.get()), Some(1_790_857_026_000_000_000));
    let m = &data.trace.memory[0];
    let ranges: Vec<(i64, i64, Phase)> = t
        .annotations
        .iter()
        .filter(|a| !a.on_gpu)
        .filter_map(|a| {
            let p = match t.name(a.name) {
                "forward" => Phase::Forward,
                "backward" => Phase::Backward,
                "optimizer" => Phase::Optimizer,
                _ => return None,
            };
            Some((a.start.get(), a.end.get(), p))
        })
        .collect();
    let mut found = std::collections::BTreeMap::new();
    for (before, s) in m.samples.iter().zip(m.samples.iter().skip(1)) {
        if s.allocated <= before.allocated {
            continue;
        }
        let at = s.time_us * 1000 - t.epoch.unwrap().get();
        let inside = ranges.iter().find(|r| r.0 <= at && at < r.1).map(|r| r.2);
        if let Some(p) = inside {
            *found
                .entry((format!("{:?}", s.phase), format!("{p:?}")))
                .or_insert(0) += 1;
        }
    }
    let n = |a: &str, b: &str| {
        found
            .get(&(a.to_owned(), b.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(n("Forward", "Forward"), 297, "{found:?}");
    assert_eq!(n("Backward", "Backward"), 426, "{found:?}");
    assert_eq!(n("Optimizer", "Optimizer"), 102, "{found:?}");
    for (a, b) in [
        ("Forward", "Backward"),
        ("Backward", "Forward"),
        ("Optimizer", "Forward"),
    ] {
        assert_eq!(n(a, b), 0, "{found:?}");
    }
}
