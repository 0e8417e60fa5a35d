//! Agreement with real traces. Expected values come from an independent Python
//! implementation over json.load (no shared code), run once and pasted here
//! (per-step values over the measured steps: first and last left out with 3+):
//!
//!     python3 scripts/reference_metrics.py ../shared/corpus/kineto/dlrm_8rank_v100/*.json
//!     python3 scripts/reference_metrics.py ../shared/corpus/kineto/hta/nccl_parser_config/*.gz
//!     python3 scripts/reference_metrics.py ../shared/corpus/kineto/tracelens/b200/*.gz
//!     python3 scripts/reference_metrics.py ../shared/corpus/kineto/legacy_2021/*.gz
//!     python3 scripts/reference_metrics.py ../shared/corpus/kineto/h100_gpt_eager/profile_traces/iteration_5/*.json
//!
//! `None` means the reference found the metric not applicable.

use ccl_bench::headless::load;
use ccl_bench::load::LoadOptions;
use ccl_bench::metrics::{self, Ctx, Outcome};
use ccl_bench::model::Ns;
use std::path::Path;

use crate::support::{assert_close, corpus, metrics_doc, run, stderr, stdout};

fn check(rel: &str, expected: &[(&str, Option<f64>)]) {
    let Some(dir) = corpus(rel) else { return };
    let trace = load(&dir, &LoadOptions::default()).expect("corpus trace loads");
    let ctx = Ctx::new(&trace, None).unwrap();
    for (name, want) in expected {
        let got = metrics::find(name).expect("metric exists").eval(&ctx);
        match (want, &got) {
            (Some(w), Outcome::Value(m)) => assert_close(m.value, *w, &format!("{rel} {name}")),
            (None, Outcome::NotApplicable(_)) => {}
            _ => panic!("{rel} {name}: got {got:?}, want {want:?}"),
        }
    }
}

const DLRM: &[(&str, Option<f64>)] = &[
    ("aggregate_gpu_utilization", Some(45.540615910869)),
    ("average_memory_bandwidth", Some(4.1044210526315785)),
    ("avg_step_time", Some(0.01600775)),
    ("break_down_steps", Some(18.564916488080126)),
    ("coll_call_num", Some(8.0)),
    ("communication_fraction", Some(81.0837109280298)),
    ("communication_overlap_ratio", Some(0.04553887813074647)),
    // CCL-Bench's own tools/compute_comm_overlap on these files.
    ("compute_comm_overlap", Some(4.553887813074646)),
    ("communication_ratio", Some(81.35637280308184)),
    ("dominant_kernel_concentration", Some(62.46427789870828)),
    ("load_imbalance_ratio", Some(4.633696878525762)),
    ("mean_sm_coverage", Some(12.825636089570672)),
    ("memory_transfer_overhead", Some(0.14810453329780446)),
    ("moe_fraction", Some(0.0)),
    ("total_communication_time", Some(0.00606775)),
    ("total_kernel_time", Some(0.05740700000000001)),
    // Whole-trace list, phases (`## forward ##` ranges), straggler.
    ("wall_time_s", Some(0.016223750000000002)),
    ("total_compute_time_s", Some(0.00112925)),
    ("total_comm_time_s", Some(0.00606775)),
    ("avg_comm_kernel_time_s", Some(0.00075846875)),
    ("num_comm_kernels", Some(64.0)),
    ("exposed_comm_time_s", Some(0.00586125)),
    ("forward_time_s", Some(0.0035881249999999997)),
    ("backward_time_s", Some(0.002064125)),
    ("optimizer_time_s", Some(0.000205625)),
    // The 2021 trace records no collective sizes.
    ("bandwidth_utilization_allreduce_group_6", None),
    ("collective_vol_total_gb", None),
];

const NCCL_PARSER: &[(&str, Option<f64>)] = &[
    ("aggregate_gpu_utilization", Some(23.843732400346585)),
    ("average_memory_bandwidth", Some(135.81654433195257)),
    ("avg_step_time", Some(0.219726905)),
    ("break_down_steps", Some(74.4801476895903)),
    ("coll_call_num", Some(7.0)),
    ("communication_fraction", Some(28.378033836048342)),
    ("communication_overlap_ratio", Some(0.15609156171303173)),
    // CCL-Bench's tools/compute_comm_overlap, its `ts`/`dur` read as exact
    // decimals (as floats it gives 14.312315: doubles hold these epoch µs
    // to 0.25 µs). Over the whole trace it was 15.609.
    ("compute_comm_overlap", Some(14.312323979073547)),
    ("communication_ratio", Some(28.841332746455258)),
    ("dominant_kernel_concentration", Some(28.770987361653688)),
    ("load_imbalance_ratio", None),
    ("mean_sm_coverage", Some(69.52623775036388)),
    ("wall_time_s", Some(0.713092254)),
    ("total_compute_time_s", Some(0.118309345)),
    ("total_comm_time_s", Some(0.046876493)),
    ("avg_comm_kernel_time_s", Some(0.0022322139523809526)),
    ("num_comm_kernels", Some(21.0)),
    ("exposed_comm_time_s", Some(0.010539609)),
    (
        "bandwidth_utilization_allreduce_group_6",
        Some(6.558388033366894),
    ),
    ("collective_vol_allreduce_gb", Some(0.102228128)),
    ("collective_vol_total_gb", Some(0.102441032)),
    ("forward_time_s", Some(0.0129166)),
    ("backward_time_s", Some(0.036120337)),
    ("optimizer_time_s", Some(0.000691989)),
    ("memory_transfer_overhead", Some(0.4062210597671786)),
    ("moe_fraction", Some(0.0)),
    ("total_communication_time", Some(0.012300029)),
    ("total_kernel_time", Some(0.16253234)),
];

const B200: &[(&str, Option<f64>)] = &[
    ("aggregate_gpu_utilization", Some(13.725730074686599)),
    ("average_memory_bandwidth", Some(960.7806908938722)),
    // One vLLM engine step (no ProfilerStep); CCL-Bench: 0.0874 s.
    ("avg_step_time", Some(0.087412863)),
    ("break_down_steps", Some(74.76079569612267)),
    ("coll_call_num", Some(74.0)),
    ("communication_fraction", Some(18.35714946990166)),
    ("communication_overlap_ratio", Some(0.0)),
    ("communication_ratio", Some(19.713868725487703)),
    ("dominant_kernel_concentration", Some(29.29033972093681)),
    ("load_imbalance_ratio", None),
    ("mean_sm_coverage", Some(73.51019711838879)),
    ("memory_transfer_overhead", Some(0.9502554340257405)),
    ("moe_fraction", Some(6.407736191645043)),
    ("total_communication_time", Some(0.002141501)),
    ("total_kernel_time", Some(0.010862916)),
];

const LEGACY: &[(&str, Option<f64>)] = &[
    ("aggregate_gpu_utilization", Some(60.56918523959911)),
    ("average_memory_bandwidth", Some(10.059784197702749)),
    ("avg_step_time", Some(0.17715925)),
    ("break_down_steps", Some(97.9848509699256)),
    ("coll_call_num", Some(0.0)),
    ("communication_fraction", Some(0.0)),
    ("communication_overlap_ratio", None),
    ("communication_ratio", Some(0.0)),
    ("dominant_kernel_concentration", Some(13.652008682539575)),
    ("load_imbalance_ratio", None),
    ("mean_sm_coverage", Some(98.4957977759445)),
    ("memory_transfer_overhead", Some(1.7076540131659304)),
    ("moe_fraction", Some(0.0)),
    ("total_communication_time", Some(0.0)),
    ("total_kernel_time", Some(0.591532)),
];

const GPT_EAGER: &[(&str, Option<f64>)] = &[
    ("aggregate_gpu_utilization", Some(93.80689500488404)),
    ("average_memory_bandwidth", None),
    ("avg_step_time", Some(0.015246334)),
    ("break_down_steps", Some(99.82945321282138)),
    ("coll_call_num", Some(0.0)),
    ("communication_fraction", Some(0.0)),
    ("communication_overlap_ratio", None),
    ("communication_ratio", Some(0.0)),
    ("dominant_kernel_concentration", Some(11.523510221072144)),
    ("load_imbalance_ratio", None),
    ("mean_sm_coverage", Some(97.97137480777097)),
    ("memory_transfer_overhead", Some(0.1672014298629889)),
    ("moe_fraction", Some(0.0)),
    ("total_communication_time", Some(0.0)),
    ("total_kernel_time", Some(0.074495365)),
    // `forward` / `backward` / `optimizer` ranges; backward kernels are launched
    // by the autograd thread while the main thread is in `backward`.
    ("forward_time_s", Some(0.007277534)),
    ("backward_time_s", Some(0.012703887)),
    ("optimizer_time_s", Some(0.001783281)),
    ("wall_time_s", Some(0.07986315)),
    ("total_compute_time_s", Some(0.074630019)),
    ("total_comm_time_s", Some(0.0)),
    ("avg_comm_kernel_time_s", None),
    ("num_comm_kernels", Some(0.0)),
    ("exposed_comm_time_s", None),
    ("bandwidth_utilization_allreduce_group_6", None),
];

#[test]
fn dlrm_8rank_v100() {
    check("kineto/dlrm_8rank_v100", DLRM);
}

#[test]
fn hta_nccl_parser_config() {
    check("kineto/hta/nccl_parser_config", NCCL_PARSER);
}

#[test]
fn tracelens_b200_new_nccl_names() {
    check("kineto/tracelens/b200", B200);
}

#[test]
fn legacy_2021_categories() {
    check("kineto/legacy_2021", LEGACY);
}

#[test]
fn h100_gpt_eager_ccl_bench_layout() {
    check("kineto/h100_gpt_eager", GPT_EAGER);
}

/// Every view names the rank the others wait for: rank 7 on DLRM, which has
/// the least GPU work and waits least (comm_wait_time 1.5 ms against rank
/// 1's 11.1 ms) because it is late on the CPU side.
#[test]
fn dlrm_straggler_is_the_rank_everyone_waits_for() {
    let Some(dir) = corpus("kineto/dlrm_8rank_v100") else {
        return;
    };
    let trace = load(&dir, &LoadOptions::default()).expect("corpus trace loads");
    let ctx = Ctx::new(&trace, None).unwrap();
    let get = |name: &str| metrics::find(name).unwrap().eval(&ctx);
    assert_eq!(get("slowest_rank").as_value(), Some(7.0));
    let ratio = get("straggler_wait_share").as_value().unwrap();
    assert!((1.1..1.2).contains(&ratio), "{ratio}");
    // Every rank's wait inside matched collectives is charged to the ranks
    // that arrived after it: at least 90 % of the waiting is attributed.
    let waits = ctx.waits();
    let (caused, wait) = waits.iter().fold((0.0, 0.0), |a, w| {
        (a.0 + w.caused.as_f64(), a.1 + w.wait.as_f64())
    });
    assert!(caused >= 0.9 * wait, "{caused} of {wait}");
    // Rank 7 waits least itself.
    let Outcome::Value(wait) = get("comm_wait_time_s") else {
        panic!("comm_wait_time_s applies")
    };
    let least = wait
        .per_rank
        .iter()
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .unwrap();
    assert_eq!(least.0, 7);
    // The Stragglers tab and its heatmap say the same.
    let data = crate::tui::load(&dir);
    let v = &data.verdict;
    assert!(v.sentence().starts_with("rank 7:"), "{}", v.sentence());
    let late = &data.arrivals.late;
    let r7 = data.trace.ranks.iter().position(|t| t.rank == 7).unwrap();
    let total = |r: usize| late[r].iter().flatten().sum::<Ns>();
    assert!((0..late.len()).all(|r| total(r) <= total(r7)));
}

#[test]
fn dlrm_structure() {
    let Some(dir) = corpus("kineto/dlrm_8rank_v100") else {
        return;
    };
    let trace = load(&dir, &LoadOptions::default()).unwrap();
    assert_eq!(
        trace.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    // Per rank: 5 SendRecv (all_to_all) + 3 AllReduce NCCL kernels (corpus README).
    for r in &trace.ranks {
        let kinds: Vec<_> = r.kernels().filter_map(|k| k.coll).collect();
        let a2a = kinds
            .iter()
            .filter(|k| **k == ccl_bench::model::CollKind::AllToAll)
            .count();
        let ar = kinds
            .iter()
            .filter(|k| **k == ccl_bench::model::CollKind::AllReduce)
            .count();
        assert_eq!((a2a, ar), (5, 3), "rank {}", r.rank);
    }
}

#[test]
fn collective_sizes_from_kernel_args() {
    let Some(dir) = corpus("kineto/hta/nccl_parser_config") else {
        return;
    };
    let trace = load(&dir, &LoadOptions::default()).unwrap();
    let r = &trace.ranks[0];
    // The kernel at ts 4458677009853.422 µs carries "In msg nelems": 6637568,
    // "dtype": "Float", "Group size": 2 (read with json.load).
    let k = r
        .kernels()
        .find(|k| k.start == Ns(4_458_677_009_853_422))
        .expect("kernel at that ts");
    assert_eq!(k.coll, Some(ccl_bench::model::CollKind::AllReduce));
    let m = r.coll_meta(k).expect("args carry collective metadata");
    assert_eq!(r.name(m.name), "allreduce");
    assert_eq!(m.group_size, Some(2));
    assert_eq!(m.in_bytes(), Some(6_637_568 * 4));
}

#[test]
fn every_kineto_corpus_trace_loads() {
    for rel in [
        "kineto/h100_tiny_transformer",
        "kineto/hta/amd_trace",
        "kineto/hta/cpu_only",
        "kineto/hta/critical_path/alexnet",
        "kineto/hta/cupti_profiler",
        "kineto/hta/distributed_info_unavailable",
        "kineto/hta/mtia_trace_single_rank",
        "kineto/hta/ns_resolution_trace",
        "kineto/hta/rank_unavailable",
        "kineto/hta/trace_file_list",
        "kineto/hta/trace_filter",
        "kineto/hta/triton_example",
        "kineto/hta/with_gpu_user_annotation",
        "kineto/tracelens/h100",
        "kineto/tracelens/mi300",
        "kineto/tracelens/mi210/gpu_only_trace",
        "kineto/tracelens/inference/sglang_decode",
        "kineto/tracelens/inference/vllm_decode_full",
        "kineto/tracelens/torch_compile_triton",
    ] {
        let Some(dir) = corpus(rel) else { return };
        let doc = metrics_doc(&dir, rel);
        assert!(!doc["ranks"].as_array().unwrap().is_empty(), "{rel}");
    }
}

#[test]
fn rank_from_distributed_info_and_file_name() {
    // distributedInfo says rank 34 (file name agrees); sampled_rank-{0,1} by both.
    let Some(cpu) = corpus("kineto/hta/cpu_only") else {
        return;
    };
    assert_eq!(
        load(&cpu, &LoadOptions::default()).unwrap().ranks[0].rank,
        34
    );
    let Some(two) = corpus("kineto/hta/trace_filter") else {
        return;
    };
    let t = load(&two, &LoadOptions::default()).unwrap();
    assert_eq!(
        t.ranks.iter().map(|r| r.rank).collect::<Vec<_>>(),
        vec![0, 1]
    );
}

#[test]
fn gpu_metrics_on_cpu_only_trace_are_not_applicable() {
    let Some(dir) = corpus("kineto/hta/cpu_only") else {
        return;
    };
    let o = run(&[
        "--trace",
        dir.to_str().unwrap(),
        "--metric",
        "total_kernel_time",
    ]);
    assert_eq!(o.status.code(), Some(3));
    assert!(stderr(&o).contains("no GPU kernels"), "{}", stderr(&o));
}

/// HTA's MTIA trace keeps its device ops in `mtia_ccp_events`: 3,453 ops
/// (7.309063 s, json.load sum) and 22,361 `dma_request` copies moving
/// 6,555,763,456 bytes in 425,455.92 µs (15.409 GB/s).
#[test]
fn mtia_device_ops() {
    check(
        "kineto/hta/mtia_trace_single_rank",
        &[
            ("total_kernel_time", Some(7.309063135999988)),
            (
                "average_memory_bandwidth",
                Some(6555763456.0 / 425455.92000000336 / 1e3),
            ),
        ],
    );
}

/// SM coverage from the profiler's `blocks per SM` without deviceProperties
/// (CCL-Bench pools both ranks' kernels: 46.617 %; we average the ranks'
/// 43.472 % and 49.547 %), and from the grid on a GPU the properties call
/// device 0 while its kernels say device 9 (SGLang).
#[test]
fn sm_coverage_without_matching_device_properties() {
    check(
        "kineto/hta/trace_filter",
        &[("mean_sm_coverage", Some(46.50957202840052))],
    );
    check(
        "kineto/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
        &[("mean_sm_coverage", Some(5.92044924110373))],
    );
}

#[test]
fn inference_engine_steps() {
    // vLLM decode capture: one decode step of 2,408.598 µs, no prefill.
    check(
        "kineto/tracelens/inference/vllm_decode_full",
        &[("tpot", Some(0.002408598)), ("ttft", None)],
    );
    // SGLang: `step[DECODE bs=32]` nested in an `execute_…` range counts once.
    check(
        "kineto/tracelens/inference/sglang_decode/sglang_Qwen3-8B_decode.json.gz",
        &[("tpot", Some(0.465716634)), ("ttft", None)],
    );
    // No ProfilerStep: the engine steps are the steps. vLLM on B200: one
    // 87,412.863 µs prefill (CCL-Bench: 0.0874 s).
    check(
        "kineto/tracelens/b200",
        &[
            ("avg_step_time", Some(0.087412863)),
            ("ttft", Some(0.087412863)),
        ],
    );
    check(
        "kineto/tracelens/inference/vllm_decode_full",
        &[("avg_step_time", Some(0.002408598))],
    );
    let Some(b200) = corpus("kineto/tracelens/b200") else {
        return;
    };
    let o = run(&["--trace", b200.to_str().unwrap(), "--metrics"]);
    assert!(
        stdout(&o).contains("inference engine steps"),
        "{}",
        stdout(&o)
    );
}

/// Every metric gives a number on some corpus trace (or the bundled sample with
/// its workload card), except those whose input no corpus trace has; for those
/// the reason must say what is missing.
#[test]
fn every_metric_applies_somewhere_or_says_why_not() {
    let dirs = [
        "kineto/dlrm_8rank_v100",
        "kineto/hta/nccl_parser_config",
        "kineto/h100_gpt_eager",
        "kineto/tracelens/b200",
        "kineto/tracelens/inference/vllm_decode_full",
    ];
    let mut traces = Vec::new();
    for d in dirs {
        let Some(p) = corpus(d) else { return };
        traces.push(load(&p, &LoadOptions::default()).expect("corpus trace loads"));
    }
    let sample =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("trace_collection/llama_fsdp_8gpu");
    traces.push(load(&sample, &LoadOptions::default()).expect("sample loads"));
    // No corpus trace was profiled with_flops or records sizes for all-to-all or
    // point-to-point, and no trace can feed a network simulator. (FSDP ranges
    // come from the sample.)
    let never = [
        "achieved_flops_from_trace_json",
        "total_model_flops_from_args",
        "estimated_total_tokens",
        "estimated_throughput_tokens_per_s",
        "throughput",
        "bandwidth_utilization_alltoall_group_6",
        "bandwidth_utilization_peertopeer_group_6",
        "scale_up_bw_utility",
        // CCL-Bench reads these from a benchmark's output or XLA byte
        // counts, not a trace; no XLA trace is in this list.
        "ttft_group_6",
        "tpot_group_6",
        "throughput_group_6",
        "estimated_bandwidth",
        "comm_kernel_breakdown_tpu",
        // No multi-rank corpus trace has one collective kind in two sizes
        // (checked on synthetic runs in `metrics::roles`).
        "hockney_alpha_by_role_s",
        "hockney_beta_by_role_s_per_byte",
        "hockney_residual_by_role_s",
    ];
    for m in metrics::METRICS {
        let outcomes: Vec<Outcome> = traces
            .iter()
            .map(|t| m.eval(&Ctx::new(t, None).unwrap()))
            .collect();
        let applies = outcomes.iter().any(|o| matches!(o, Outcome::Value(_)));
        assert_eq!(
            applies,
            !never.contains(&m.name),
            "{}: {outcomes:?}",
            m.name
        );
        for o in &outcomes {
            if let Outcome::NotApplicable(why) = o {
                assert!(why.len() > 15, "{}: unclear reason {why:?}", m.name);
            }
        }
    }
}

/// Nsight Systems SQLite exports of three schema generations. Expected values
/// come from nsys's own `cuda_gpu_kern_sum` report (h100_tiny_transformer) and
/// from SQL over the export's tables.
#[test]
fn nsys_sqlite_exports() {
    // 2025.3, schema 3.20: 744 kernels, 4,769,921 ns (nsys stats agrees);
    // the top kernel 514,697 ns; five NVTX `step_N` ranges, 498,503,879 ns.
    check(
        "nsys/h100_tiny_transformer/h100_tiny_transformer_nsys.sqlite",
        &[
            ("total_kernel_time", Some(0.004769921)),
            (
                "dominant_kernel_concentration",
                Some(514_697.0 / 4_769_921.0 * 100.0),
            ),
            // NVTX_EVENTS holds five ProfilerStep ranges; the first (461 ms of
            // warm-up) and the last are left out: the mean of the middle three
            // (sqlite3 on the export). All five average 0.0997007758 s.
            ("avg_step_time", Some(0.00961965)),
            ("coll_call_num", Some(0.0)),
        ],
    );
    // 2024.5, schema 3.13, 4 GPUs listed, kernels on one; memcpy bytes / time.
    check(
        "nsys/cloverleaf-nsys",
        &[
            ("total_kernel_time", Some(0.29440454)),
            (
                "average_memory_bandwidth",
                Some(225_116_952.0 / 9_390_923.0),
            ),
        ],
    );
    // 2022.2, schema 2.9 (older column layout).
    check(
        "nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite",
        &[
            ("total_kernel_time", Some(0.08857348)),
            (
                "average_memory_bandwidth",
                Some(3_932_160_000.0 / 284_699_600.0),
            ),
        ],
    );
}

/// The JSON export of the same report gives every metric the SQLite one does,
/// except those that need the GPU's SM count (the JSON carries no GPU info); its
/// kernels are nsys's own `cuda_gpu_kern_sum` (instances and total time).
#[test]
fn nsys_json_export_equals_the_sqlite_one() {
    let base = "nsys/h100_tiny_transformer/h100_tiny_transformer_nsys";
    let (Some(json), Some(sqlite), Some(csv)) = (
        corpus(&format!("{base}.json")),
        corpus(&format!("{base}.sqlite")),
        corpus(&format!("{base}_cuda_gpu_kern_sum.csv")),
    ) else {
        return;
    };
    let (tj, ts) = (
        load(&json, &LoadOptions::default()).expect("json export loads"),
        load(&sqlite, &LoadOptions::default()).expect("sqlite export loads"),
    );
    let mut rows = csv::Reader::from_path(&csv).unwrap();
    let (mut instances, mut total) = (0usize, 0i64);
    for r in rows.records() {
        let r = r.unwrap();
        total += r[1].parse::<i64>().unwrap();
        instances += r[2].parse::<usize>().unwrap();
    }
    let kernels: Vec<_> = tj.ranks[0]
        .ops
        .iter()
        .filter(|o| o.activity == ccl_bench::model::Activity::Kernel)
        .collect();
    assert_eq!((kernels.len(), instances), (744, 744));
    assert_eq!(kernels.iter().map(|o| o.dur).sum::<Ns>(), Ns(total));
    let (cj, cs) = (Ctx::new(&tj, None).unwrap(), Ctx::new(&ts, None).unwrap());
    let needs_sms = [
        "mean_sm_coverage",
        "compute_bound_fraction",
        "memory_bound_fraction",
    ];
    for m in metrics::METRICS {
        let (a, b) = (m.eval(&cj).as_value(), m.eval(&cs).as_value());
        if needs_sms.contains(&m.name) {
            assert!(a.is_none() && b.is_some(), "{}", m.name);
        } else {
            assert_eq!(a, b, "{}", m.name);
        }
    }
    // Beside each other, the SQLite export is read and the JSON one named.
    let o = run(&[
        "--trace",
        json.parent().unwrap().to_str().unwrap(),
        "--metric",
        "total_kernel_time",
    ]);
    assert_eq!(stdout(&o).trim(), "0.004769921");
    assert!(
        stderr(&o)
            .contains("JSON export(s) beside the Nsight Systems SQLite exports were not read"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn truncated_nsys_json_loads_up_to_the_damage() {
    let Some(json) = corpus("nsys/h100_tiny_transformer/h100_tiny_transformer_nsys.json") else {
        return;
    };
    let text = std::fs::read_to_string(&json).unwrap();
    // Cut in the middle of a line two thirds in.
    let cut = text.len() * 2 / 3;
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("cut_nsys.json");
    std::fs::write(&f, &text[..cut]).unwrap();
    let o = run(&[
        "--trace",
        f.to_str().unwrap(),
        "--metric",
        "total_kernel_time",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("is not a complete JSON object"),
        "{}",
        stderr(&o)
    );
    let partial: f64 = stdout(&o).trim().parse().unwrap();
    assert!(partial > 0.0 && partial < 0.004769921, "{partial}");
}

#[test]
fn nsys_export_is_opened_without_writing_beside_it() {
    let Some(src) = corpus("nsys/h100_tiny_transformer/h100_tiny_transformer_nsys.sqlite") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("rank3.sqlite");
    std::fs::copy(&src, &f).unwrap();
    let o = run(&[
        "--trace",
        dir.path().to_str().unwrap(),
        "--metric",
        "total_kernel_time",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), "0.004769921");
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        names,
        vec![std::ffi::OsString::from("rank3.sqlite")],
        "no -wal/-shm/journal files"
    );
}

/// The same model on two vendors compares without error; kernels are matched by
/// normalized name, so the shared PyTorch kernels line up.
#[test]
fn compare_h100_with_mi300() {
    let (Some(a), Some(b)) = (
        corpus("kineto/tracelens/h100"),
        corpus("kineto/tracelens/mi300"),
    ) else {
        return;
    };
    let (ta, tb) = (
        load(&a, &LoadOptions::default()).unwrap(),
        load(&b, &LoadOptions::default()).unwrap(),
    );
    let (ca, cb) = (Ctx::new(&ta, None).unwrap(), Ctx::new(&tb, None).unwrap());
    let cmp = ccl_bench::compare::compare(&ca, &cb, 0.05);
    let both = cmp
        .kernels
        .iter()
        .find(|k| k.name == "at::native::vectorized_elementwise_kernel")
        .expect("a kernel both runs have");
    assert!(both.a_count > 0 && both.b_count > 0);
    let step = cmp
        .metrics
        .iter()
        .find(|d| d.metric.name == "avg_step_time")
        .unwrap();
    assert!(step.delta().is_some());
    let o = run(&["compare", a.to_str().unwrap(), b.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
}

/// DLRM's eight ranks ran on one node: the clocks agree to a few µs, so
/// they are kept raw (no offset applied, none doubted), and wait plus
/// transfer is each rank's whole collective time (all its collectives match).
#[test]
fn dlrm_clock_offsets_and_wait_split() {
    let Some(dir) = corpus("kineto/dlrm_8rank_v100") else {
        return;
    };
    let t = load(&dir, &LoadOptions::default()).unwrap();
    assert!(t.offsets.is_none(), "{:?}", t.offsets);
    assert!(t.clock_doubt.is_none(), "{:?}", t.clock_doubt);
    let inst = ccl_bench::model::collectives::instances(&t);
    for o in ccl_bench::model::clock::estimate_offsets(&t, &inst) {
        assert!(o.offset.abs() < Ns(5_000), "{o:?}");
        assert_eq!(o.samples, 8, "{o:?}");
    }
    let ctx = Ctx::new(&t, None).unwrap();
    for (r, w) in t.ranks.iter().zip(ctx.waits()) {
        let comm: Ns = r.ops.iter().filter(|o| o.is_comm()).map(|o| o.dur).sum();
        assert_eq!(w.wait + w.transfer, comm, "rank {}", r.rank);
    }
}

/// The clock check on real runs: one node's ranks (DLRM) share a clock and get
/// no finding; HTA's sampled ranks 0-1 of 128 match SendRecv calls whose ends
/// scatter by milliseconds, which is reported as an uncertain alignment, and
/// the 126 ranks not sampled are not reported as lost.
#[test]
fn clock_findings_on_real_runs() {
    let load_warnings = |rel: &str| {
        let dir = corpus(rel)?;
        let report = ccl_bench::session::inputs(
            &dir,
            &LoadOptions::default(),
            &ccl_bench::load::Progress::default(),
        )
        .unwrap();
        Some(report.warnings)
    };
    if let Some(w) = load_warnings("kineto/dlrm_8rank_v100") {
        assert!(
            w.iter()
                .all(|w| !w.text.contains("clock") && !w.text.contains("collectives matched")),
            "{w:?}"
        );
    }
    if let Some(w) = load_warnings("kineto/hta/trace_filter") {
        assert!(
            w.iter().any(|w| w
                .text
                .starts_with("rank 1: the collectives matched with rank 0's end ±21.3 ms apart")),
            "{w:?}"
        );
        assert!(w.iter().all(|w| !w.text.contains("missing")), "{w:?}");
    }
}

/// Memory snapshots: peaks from replaying the allocator history backwards from
/// the snapshot's state, checked against a plain Python replay over
/// pickle.load (alloc +size, free_completed -size, segment_alloc/free ±size;
/// the state before the history = the end state minus the history's net).
#[test]
fn memory_snapshots() {
    check(
        "memory/h100_tiny_transformer",
        &[
            ("peak_memory_allocated_gb", Some(0.135144464)),
            ("peak_memory_reserved_gb", Some(0.153092096)),
            ("memory_fragmentation", Some(11.723421697747216)),
            ("memory_allocation_efficiency", Some(100.0)),
            ("memory_alloc_count", Some(763.0)),
            // No timeline beside it.
            ("total_kernel_time", None),
        ],
    );
    check(
        "kineto/h100_gpt_eager",
        &[
            ("peak_memory_allocated_gb", Some(6.738257992)),
            ("peak_memory_reserved_gb", Some(6.895435776)),
            ("memory_fragmentation", Some(2.279446710925326)),
            ("memory_allocation_efficiency", Some(99.65849021774974)),
            ("memory_alloc_count", Some(1680.0)),
        ],
    );
}

/// The DLRM run's Kineto traces and execution traces (two corpus folders) read
/// together: every rank's profiler and ET agree on the collectives of the
/// profiled iteration (5 all-to-all + 3 all-reduce), and the volumes the
/// Kineto traces lack come from the ET (bytes summed in Python over the nodes'
/// tensor inputs: numel x element size), each node linked to its kernel.
#[test]
fn kineto_and_execution_traces_of_one_run() {
    let (Some(kineto), Some(et)) = (
        corpus("kineto/dlrm_8rank_v100"),
        corpus("et/dlrm_8rank_v100"),
    ) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    for src in [&kineto, &et] {
        for f in std::fs::read_dir(src).unwrap() {
            let f = f.unwrap().path();
            std::os::unix::fs::symlink(&f, dir.path().join(f.file_name().unwrap())).unwrap();
        }
    }
    let trace = load(dir.path(), &LoadOptions::default()).expect("loads");
    assert_eq!(trace.et.len(), 8);
    for r in 0..8 {
        let ctx = Ctx::new(&trace, Some(r)).unwrap();
        let Outcome::Value(m) = metrics::find("coll_call_num").unwrap().eval(&ctx) else {
            panic!("coll_call_num applies")
        };
        assert_eq!(m.value, 8.0, "rank {r}");
        assert!(
            m.note
                .as_deref()
                .unwrap_or("")
                .contains("execution trace agrees (8"),
            "rank {r}: {:?}",
            m.note
        );
    }
    let ctx = Ctx::new(&trace, None).unwrap();
    let v = |n: &str| metrics::find(n).unwrap().eval(&ctx).as_value().unwrap();
    assert_close(
        v("collective_vol_alltoall_gb"),
        64_448.0 / 1e9,
        "all-to-all",
    );
    assert_close(
        v("collective_vol_allreduce_gb"),
        2_485_252.0 / 1e9,
        "all-reduce",
    );
    assert_close(v("collective_vol_total_gb"), 2_549_700.0 / 1e9, "total");
    // Each ET node linked to its kernel, in order (8 of 8 on every rank):
    // the volumes above now come from the kernels' own sizes, and bus
    // bandwidth applies.
    for t in &trace.ranks {
        let sized = t
            .kernels()
            .filter(|o| o.is_comm() && t.coll_meta(o).and_then(|m| m.in_bytes()).is_some())
            .count();
        assert_eq!(sized, 8, "rank {}", t.rank);
    }
    assert!(v("avg_comm_bandwidth_GBps") > 0.0);
    // The nodes' element sizes, sequence numbers and groups come along:
    // rank 0's calls are seq 147-154 (its record_param_comms), float (4 B)
    // but for the second all-to-all of int64 indices (8 B: 24 x 8 = 192 B);
    // the all-to-all-v's 8 split sizes give its group of 8.
    let t = trace.rank(0).unwrap();
    let linked: Vec<_> = t
        .kernels()
        .filter(|o| o.is_comm())
        .filter_map(|o| t.coll_meta(o))
        .map(|m| (m.seq, m.dtype_size, m.in_nelems, m.group_size))
        .collect();
    assert_eq!(
        linked.iter().map(|l| l.0).collect::<Vec<_>>(),
        (147..=154).map(Some).collect::<Vec<_>>()
    );
    assert_eq!(linked[1], (Some(148), Some(8), Some(24), None));
    assert_eq!(linked[0], (Some(147), Some(4), Some(6144), Some(8)));
    // The ET alone gives the same count.
    check(
        "et/dlrm_8rank_v100",
        &[("coll_call_num", Some(8.0)), ("total_kernel_time", None)],
    );
    check("et/h100_tiny_transformer", &[("coll_call_num", Some(48.0))]);
}

/// XSpace protobufs: per device plane, the ops on `XLA Ops` / `Stream #N` lines
/// and the collectives among them, equal to scripts/xplane_reference.py (a
/// plain wire-format walker in Python) on each file. Durations are ps in the
/// file and whole ns here, so sums agree to < 1 ns per op.
#[test]
fn xla_xspace_protobufs() {
    let per_rank = |rel: &str, metric: &str| -> Option<Vec<(u32, f64)>> {
        let dir = corpus(rel)?;
        let trace = load(&dir, &LoadOptions::default()).expect("xplane loads");
        let ctx = Ctx::new(&trace, None).unwrap();
        match metrics::find(metric).unwrap().eval(&ctx) {
            Outcome::Value(m) if m.per_rank.is_empty() => Some(vec![(0, m.value)]),
            Outcome::Value(m) => Some(m.per_rank),
            o => panic!("{rel} {metric}: {o:?}"),
        }
    };
    let close = |got: &[(u32, f64)], want: &[(u32, f64)], ops: usize| {
        assert_eq!(got.len(), want.len(), "{got:?}");
        for ((gr, g), (wr, w)) in got.iter().zip(want) {
            assert_eq!(gr, wr);
            assert!((g - w).abs() <= ops as f64 * 1e-9, "rank {gr}: {g} vs {w}");
        }
    };
    // 4 TPUs, one all-reduce per device 3 times (HLO `all-reduce`); the
    // `broadcast` HLO ops are not collectives.
    if let Some(got) = per_rank("xla/xprof_tpu", "total_kernel_time") {
        let want = [
            78784927635502.0,
            78789509321754.0,
            78781986874072.0,
            78766281688068.0,
        ];
        let want: Vec<_> = want
            .iter()
            .enumerate()
            .map(|(r, ps)| (r as u32, ps / 1e12))
            .collect();
        close(&got, &want, 1504);
        let comm = per_rank("xla/xprof_tpu", "num_comm_kernels").unwrap();
        assert_eq!(comm, vec![(0, 3.0), (1, 3.0), (2, 3.0), (3, 3.0)]);
    }
    // TensorFlow on GPUs: kernels on the Compute streams of GPUs 4 and 6;
    // GPU 1 only copied memory.
    if let Some(got) = per_rank("xla/tf_profiler_gpu_multi_worker", "total_kernel_time") {
        close(&got, &[(1, 0.0), (4, 0.014825385), (6, 0.014865363)], 665);
    }
    // JAX on MI300X: two kernel streams, 3,415,244,000 + 60,240,000 ps.
    if let Some(got) = per_rank("xla/tracelens_jax_rocm/jax08_gemm", "total_kernel_time") {
        close(&got, &[(0, 0.003475484)], 54);
    }
    // Eight GPUs (GPU 0 on four streams), and one GPU with a bare `Stream #2`.
    if let Some(got) = per_rank(
        "xla/tracelens_jax_rocm/jax_conv_minimal_08",
        "total_kernel_time",
    ) {
        let ps = [
            146_240_000.0 + 145_320_000.0 + 3_578_725_000.0 + 129_880_000.0,
            3_345_845_000.0,
            3_524_285_000.0,
            3_403_364_000.0,
            3_493_365_000.0,
            3_464_884_000.0,
            3_403_004_000.0,
            3_502_165_000.0,
        ];
        let want: Vec<_> = ps
            .iter()
            .enumerate()
            .map(|(r, p)| (r as u32, p / 1e12))
            .collect();
        close(&got, &want, 60);
    }
    if let Some(got) = per_rank(
        "xla/tracelens_jax_rocm/jax_te_fused_attn",
        "total_kernel_time",
    ) {
        close(&got, &[(0, 0.012133585)], 150);
    }
}

/// `--inputs`: what a ccl-bench run folder holds and what was read.
#[test]
fn inputs_lists_what_was_found_and_read() {
    let Some(dir) = corpus("kineto/h100_gpt_eager") else {
        return;
    };
    let o = run(&["--trace", dir.to_str().unwrap(), "--inputs"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "PyTorch profiler trace rank 0: ",
        "CUDA memory snapshot rank 0: ",
        "PyTorch execution trace: ",
    ] {
        let line = out
            .lines()
            .find(|l| l.starts_with(want))
            .unwrap_or_else(|| panic!("{want} in {out}"));
        assert!(line.ends_with("— read"), "{line}");
    }
    let Some(nsys) = corpus("nsys/h100_tiny_transformer") else {
        return;
    };
    let out = stdout(&run(&["--trace", nsys.to_str().unwrap(), "--inputs"]));
    assert!(
        out.contains("Nsight Systems JSON export: ") && out.contains("not read"),
        "{out}"
    );
    assert!(
        out.contains("warning: 1 Nsight Systems JSON export(s) beside"),
        "{out}"
    );
}

/// Every execution trace in the corpus, on its own: its communication nodes
/// counted as a plain Python count over json.load does (schemas 1.0.1 to
/// 1.1.1-chakra; the HTA and PARAM ones have none).
#[test]
fn every_corpus_execution_trace_reads() {
    for (rel, want) in [
        ("et/chakra/1.0.2-chakra.0.0.4.json", 10.0),
        ("et/dlrm_8rank_v100/dlrm_eg_5.json", 8.0),
        (
            "et/h100_tiny_transformer/h100_tiny_transformer_et.json",
            48.0,
        ),
        (
            "et/hta_execution_trace/benchmark_simple_add_et.json.gz",
            0.0,
        ),
        ("et/param/linear_et.json.gz", 0.0),
        ("et/param/pt2_et.json", 0.0),
        ("et/param/resnet_2gpu_et.json.gz", 21.0),
    ] {
        check(rel, &[("coll_call_num", Some(want))]);
    }
}

#[test]
fn what_if_steps_lie_between_full_overlap_and_the_measured_step() {
    let mut checked = 0;
    for rel in [
        "kineto/dlrm_8rank_v100",
        "kineto/h100_gpt_eager",
        "kineto/h100_tiny_transformer",
        "kineto/hta/nccl_parser_config",
        "kineto/hta/trace_filter",
        "kineto/tracelens/h100",
        "kineto/tracelens/mi300",
        "kineto/tracelens/b200",
        "nsys/h100_tiny_transformer/h100_tiny_transformer_nsys.sqlite",
    ] {
        let Some(dir) = corpus(rel) else { return };
        let doc = metrics_doc(&dir, rel);
        let v = |name: &str| {
            doc["metrics"]
                .as_array()
                .unwrap()
                .iter()
                .find(|m| m["name"] == name)
                .and_then(|m| m["value"].as_f64())
        };
        let (Some(step), Some(floor)) = (v("avg_step_time"), v("whatif_full_overlap_step_s"))
        else {
            continue;
        };
        assert!(floor <= step + 1e-12, "{rel}: {floor} > {step}");
        for what in ["whatif_no_straggler_step_s", "whatif_link_bandwidth_step_s"] {
            if let Some(w) = v(what) {
                assert!(
                    floor - 1e-12 <= w && w <= step + 1e-12,
                    "{rel}: {what} {w} not in [{floor}, {step}]"
                );
            }
        }
        checked += 1;
    }
    assert!(
        checked >= 3,
        "only {checked} corpus runs had steps and communication"
    );
}

/// Every metric of a lean load (each rank reduced to its stats and its
/// collectives as soon as it is read) and of a full load, as text: exact.
fn lean_and_full(
    path: &Path,
    opts: &LoadOptions,
    rank: Option<u32>,
) -> [Result<Vec<String>, String>; 2] {
    use ccl_bench::load::Progress;
    use ccl_bench::metrics::breakdown::{kernel_table, Grouping};
    use ccl_bench::report::rows;
    use ccl_bench::session::{open, Need};
    let text = |ctx: Result<Ctx, String>| -> Result<Vec<String>, String> {
        let ctx = ctx?;
        let about = ccl_bench::report::About::of(&ctx);
        let mut out: Vec<String> = rows(&ctx)
            .iter()
            .map(|r| format!("{} {:?}", r.metric.name, r.outcome))
            .collect();
        out.push(format!("{about:?}"));
        for g in [Grouping::Kernel, Grouping::Class] {
            out.push(format!("{:?}", kernel_table(&ctx, g)));
        }
        Ok(out)
    };
    let full = open(path, opts, Need::EveryOp, &Progress::default())
        .unwrap()
        .trace;
    let lean = open(path, opts, Need::Figures, &Progress::default()).unwrap();
    assert!(lean
        .trace
        .ranks
        .iter()
        .all(|t| t.comm_only && t.ops.iter().all(|o| o.is_comm())));
    [
        text(Ctx::with_stats(&lean.trace, rank, lean.stats)),
        text(Ctx::new(&full, rank)),
    ]
}

#[test]
fn a_lean_load_gives_every_metric_of_a_full_one() {
    let rules = tempfile::NamedTempFile::new().unwrap();
    // Moves compute kernels into communication and NCCL kernels out of it.
    std::fs::write(
        rules.path(),
        "[[rule]]\nclass = \"communication\"\npattern = \"(?i)gemm\"\n\n[[rule]]\nclass = \"gemm\"\npattern = \"AllReduce\"\n",
    )
    .unwrap();
    let variants = |rank: Option<u32>| {
        [
            (LoadOptions::default(), None),
            (
                LoadOptions {
                    all_steps: true,
                    align: false,
                    ..LoadOptions::default()
                },
                rank,
            ),
            (
                LoadOptions {
                    classes: Some(rules.path().to_owned()),
                    ..LoadOptions::default()
                },
                rank,
            ),
        ]
    };
    for (rel, rank) in [
        ("kineto/dlrm_8rank_v100", Some(3)),
        ("kineto/h100_gpt_eager", Some(1)),
        ("kineto/h100_tiny_transformer", None),
        ("kineto/hta/critical_path/alexnet", None),
        ("kineto/hta/with_gpu_user_annotation", None),
        ("kineto/hta/cpu_only", None),
        ("kineto/tracelens/mi300", None),
        ("kineto/tracelens/inference/vllm_decode_full", None),
        ("nsys/h100_tiny_transformer", None),
        ("nsys/saxpy-mpi-cuda_nsys_perlmutter0.sqlite", None),
        ("xla/xprof_tpu", None),
        ("xla/tf_profiler_gpu_multi_worker", Some(1)),
    ] {
        let Some(path) = corpus(rel) else { return };
        for (opts, rank) in variants(rank) {
            let [lean, full] = lean_and_full(&path, &opts, rank);
            assert_eq!(lean, full, "{rel} with {opts:?}, rank {rank:?}");
        }
    }
    // A synthetic run with a straggler, steps and copies, on every rank.
    let dir = crate::support::write_ranks(&ccl_bench::synth::training_run(&Default::default()));
    for (opts, rank) in variants(Some(5)) {
        let [lean, full] = lean_and_full(dir.path(), &opts, rank);
        assert_eq!(lean, full, "synthetic run with {opts:?}, rank {rank:?}");
    }
}

/// A lean load that spills its collectives (`--pages always`) spills with
/// them what else it keeps per communication op: each rank's exposed
/// communication (an interval per exposed collective, kept until the waits
/// across ranks are known) and the run's collective sequences (an op index
/// each, in sequences of a page or more). Every metric is the full load's.
#[test]
fn a_spilled_load_keeps_its_exposed_communication_and_sequences_on_disk() {
    use ccl_bench::load::{Pages, Progress};
    use ccl_bench::model::collectives::instances;
    // 4 ranks, 4 steps of 128 layers: 2 collectives a layer and one a step
    // (257 a step, 1,028 a rank), in one group.
    let shape = ccl_bench::synth::RunShape {
        ranks: 4,
        steps: 4,
        layers: 128,
        ..Default::default()
    };
    let dir = crate::support::write_ranks(&ccl_bench::synth::training_run(&shape));
    let lean = |pages| {
        let opts = LoadOptions {
            pages,
            ..LoadOptions::default()
        };
        ccl_bench::session::open(
            dir.path(),
            &opts,
            ccl_bench::session::Need::Figures,
            &Progress::default(),
        )
        .unwrap()
    };
    let (held, spilled) = (lean(Pages::Never), lean(Pages::Always));
    assert!(spilled.trace.ranks.iter().all(|t| t.ops.is_spilled()));
    let exposed = |x: &ccl_bench::session::Run| -> Vec<(bool, Vec<ccl_bench::model::Interval>)> {
        x.stats
            .iter()
            .flatten()
            .map(|s| (s.exposed.is_spilled(), s.exposed.intervals().to_vec()))
            .collect()
    };
    let (e_held, e_spilled) = (exposed(&held), exposed(&spilled));
    assert!(e_held.iter().all(|(s, iv)| !s && !iv.is_empty()));
    assert!(e_spilled.iter().all(|(s, _)| *s));
    let intervals = |e: &[(bool, Vec<_>)]| e.iter().map(|x| x.1.clone()).collect::<Vec<_>>();
    assert_eq!(intervals(&e_held), intervals(&e_spilled));
    // Every rank's 1,028 all-reduces matched: one sequence of each per rank.
    assert_eq!(instances(&held.trace).held_spilled(), (4 * 1028, 0));
    assert_eq!(instances(&spilled.trace).held_spilled(), (0, 4 * 1028));
    assert_eq!(instances(&held.trace), instances(&spilled.trace));
    for pages in [Pages::Always, Pages::Never] {
        let opts = LoadOptions {
            pages,
            ..LoadOptions::default()
        };
        for rank in [None, Some(2)] {
            let [lean, full] = lean_and_full(dir.path(), &opts, rank);
            assert_eq!(lean, full, "{pages:?}, rank {rank:?}");
        }
    }
}

/// A summary's ranks as the reduce reads them (their collectives and the
/// figures the map step made) give every metric a full read of its tables
/// gives; a rules file or `--all-steps` reads every op instead, with the
/// same outcome as the traces.
#[test]
fn a_summarys_stored_stats_give_every_metric_of_a_full_load() {
    use ccl_bench::derive::RankStats;
    use ccl_bench::summary::{self, stats::to_stored};
    let stored = |s: &RankStats| serde_json::to_string(&to_stored(s)).unwrap();
    let check = |name: &str, traces: &Path, rank: Option<u32>| {
        let out = tempfile::tempdir().unwrap();
        let sum = out.path().join("run.sum");
        summarize_into(traces, &sum);
        // Every timeline entry holds stats equal to those of its whole
        // timeline, made as a lean load makes them, and so does the index
        // the reduce reads them from.
        let entries = sum.join(summary::manifest::ENTRIES);
        let opened =
            summary::open::discover(&sum, Default::default(), ccl_bench::formats::FORMATS, None)
                .unwrap();
        assert!(
            opened.reduce.is_some(),
            "{name}: a whole summary has an index"
        );
        let mut parts = 0;
        for (e, reduce) in std::fs::read_dir(&entries)
            .unwrap()
            .flatten()
            .flat_map(|e| [(e.path(), None), (e.path(), opened.reduce.as_deref())])
        {
            let counter = Default::default();
            let file = ccl_bench::source::FileIn {
                path: &e,
                rank: None,
                counter: &counter,
                cpu_ranges: false,
            };
            let read = (
                summary::read::lean_timelines(&file, reduce),
                all_timelines(&file),
            );
            let (Ok(lean), Ok(whole)) = read else {
                continue;
            };
            for (((_, l), s), (_, w)) in lean.iter().zip(&whole) {
                let s = s.as_ref().expect("stats stored for the reduce");
                assert_eq!(stored(s), stored(&RankStats::of(&w.timeline)), "{name}");
                assert!(l.timeline.comm_only && !w.timeline.comm_only);
                // What a lean load of the traces keeps of the rank.
                let mut slim = w.timeline.clone();
                slim.slim();
                assert!(l.timeline.ops == slim.ops, "{name}: its collectives");
                assert!(l.timeline.colls == slim.colls, "{name}: their metadata");
                parts += 1;
            }
        }
        assert!(parts > 0, "{name}: no timeline read");
        let rules = out.path().join("rules.toml");
        std::fs::write(
            &rules,
            "[[rule]]\nclass = \"communication\"\npattern = \"(?i)gemm\"\n",
        )
        .unwrap();
        for opts in [
            LoadOptions::default(),
            LoadOptions {
                all_steps: true,
                align: false,
                ..LoadOptions::default()
            },
            LoadOptions {
                classes: Some(rules.clone()),
                ..LoadOptions::default()
            },
        ] {
            for rank in [None, rank] {
                let [lean, full] = lean_and_full(&sum, &opts, rank);
                assert_eq!(lean, full, "{name} with {opts:?}, rank {rank:?}");
            }
        }
    };
    for (rel, rank) in [
        ("kineto/dlrm_8rank_v100", Some(3)),
        ("kineto/h100_gpt_eager", Some(1)),
        ("kineto/hta/with_gpu_user_annotation", None),
        ("nsys/h100_tiny_transformer", None),
        ("xla/xprof_tpu", None),
        ("xla/tf_profiler_gpu_multi_worker", Some(1)),
    ] {
        let Some(path) = corpus(rel) else { return };
        check(rel, &path, rank);
    }
    let dir = crate::support::write_ranks(&ccl_bench::synth::training_run(&Default::default()));
    check("synthetic run", dir.path(), Some(5));
}

/// `summarize traces --out sum`, every input in one task.
pub fn summarize_into(traces: &Path, sum: &Path) {
    use ccl_bench::summary;
    summary::summarize(
        traces,
        &summary::Options {
            out: sum.to_owned(),
            shard: Default::default(),
            only: Vec::new(),
            pick: Default::default(),
            formats: ccl_bench::formats::FORMATS,
        },
    )
    .unwrap();
}

/// A summary's `coverage` table: on every level, each lane's bins add up
/// to its ops and to the time its ops cover by kind (the Timeline's lane
/// sets); bins tile the rank's window without overlapping, each at most its
/// length covered.
#[test]
fn a_summarys_coverage_bins_add_up_to_each_lanes_ops() {
    use arrow_array::cast::AsArray;
    use arrow_array::types::{Int64Type, UInt32Type, UInt64Type};
    use arrow_array::Array;
    use ccl_bench::derive::lanes::{LaneSets, FACTOR, TOP_BINS};
    use ccl_bench::summary::{self, columns};
    use std::collections::BTreeMap;
    for rel in [
        "kineto/dlrm_8rank_v100",
        "nsys/h100_tiny_transformer",
        "xla/tf_profiler_gpu_multi_worker",
    ] {
        let Some(traces) = corpus(rel) else { return };
        let out = tempfile::tempdir().unwrap();
        let sum = out.path().join("run.sum");
        summarize_into(&traces, &sum);
        let mut parts = 0;
        for e in std::fs::read_dir(sum.join(summary::manifest::ENTRIES))
            .unwrap()
            .flatten()
        {
            let counter = Default::default();
            let Ok(read) = all_timelines(&ccl_bench::source::FileIn {
                path: &e.path(),
                rank: None,
                counter: &counter,
                cpu_ranges: false,
            }) else {
                continue;
            };
            let entry: summary::manifest::Entry =
                serde_json::from_slice(&std::fs::read(e.path()).unwrap()).unwrap();
            for (p, (_, f)) in entry.parts.iter().zip(&read) {
                let t = &f.timeline;
                let path = sum
                    .join(columns::COVERAGE)
                    .join(format!("{}.parquet", p.pack));
                let file = std::fs::File::open(&path).unwrap();
                let size = file.metadata().unwrap().len();
                let batches = columns::decode(file, size, columns::COVERAGE).unwrap();
                // The part's rows of the pack's file.
                let (_, a, z) = p.rows.iter().find(|r| r.0 == columns::COVERAGE).unwrap();
                let mut at = 0;
                let mine: Vec<_> = (batches.iter())
                    .filter_map(|b| {
                        let (s, e) = (at, at + b.num_rows() as u64);
                        at = e;
                        let (lo, hi) = (s.max(*a), e.min(*z));
                        (lo < hi).then(|| b.slice((lo - s) as usize, (hi - lo) as usize))
                    })
                    .collect();
                // (level, stream) -> [(start, len, ops, cover)]
                type Row = (i64, i64, u64, [i64; 5]);
                let mut lanes: BTreeMap<(u32, Option<u32>), Vec<Row>> = BTreeMap::new();
                for b in &mine {
                    let part = b.column_by_name("part").unwrap();
                    let part = part.as_dictionary::<arrow_array::types::Int32Type>();
                    let names = part.values().as_string::<i32>();
                    assert!(
                        (part.keys().iter()).all(|k| names.value(k.unwrap() as usize) == p.stem),
                        "{rel}: rows of {} only",
                        p.stem
                    );
                    let c = |name: &str| b.column_by_name(name).unwrap();
                    let u32s = |k: &str| c(k).as_primitive::<UInt32Type>().clone();
                    let i64s = |k: &str| c(k).as_primitive::<Int64Type>().values().to_vec();
                    let (level, stream) = (u32s("level"), u32s("stream"));
                    let ops = c("ops").as_primitive::<UInt64Type>().values().to_vec();
                    let (start, len) = (i64s("start"), i64s("len"));
                    let cover: Vec<Vec<i64>> = ["compute", "comm", "overlap", "memory", "busy"]
                        .into_iter()
                        .map(i64s)
                        .collect();
                    for i in 0..b.num_rows() {
                        let key = (level.value(i), stream.is_valid(i).then(|| stream.value(i)));
                        let c = std::array::from_fn(|k| cover[k][i]);
                        lanes
                            .entry(key)
                            .or_default()
                            .push((start[i], len[i], ops[i], c));
                    }
                }
                let Some(window) = t.device_window() else {
                    assert!(lanes.is_empty(), "{rel}: bins without ops");
                    continue;
                };
                let levels = lanes.keys().map(|k| k.0).max().unwrap() + 1;
                let fine = lanes[&(0, None)][0].1;
                let top = fine * FACTOR.pow(levels - 1);
                assert!(
                    (window.len().0 as u64).div_ceil(top as u64) <= TOP_BINS as u64,
                    "{rel}"
                );
                let mut streams: BTreeMap<Option<u32>, Vec<&ccl_bench::model::DeviceOp>> =
                    BTreeMap::new();
                for o in &t.ops {
                    streams.entry(None).or_default().push(o);
                    streams.entry(Some(o.stream)).or_default().push(o);
                }
                for level in 0..levels {
                    for (stream, ops) in &streams {
                        let bins = &lanes[&(level, *stream)];
                        let s = LaneSets::of(ops.iter().copied());
                        let want = [&s.compute, &s.comm, &s.overlap, &s.memory, &s.busy]
                            .map(|x| x.total().0);
                        let mut got = [0i64; 5];
                        for (i, (start, len, _, c)) in bins.iter().enumerate() {
                            assert_eq!(*len, fine * FACTOR.pow(level), "{rel}");
                            assert_eq!((start - window.start.0) % len, 0, "{rel}: on the grid");
                            assert!(i == 0 || bins[i - 1].0 < *start, "{rel}: in order");
                            assert!(c.iter().all(|x| (0..=*len).contains(x)), "{rel}");
                            for k in 0..5 {
                                got[k] += c[k];
                            }
                        }
                        assert_eq!(got, want, "{rel} level {level} stream {stream:?}");
                        let n: u64 = bins.iter().map(|b| b.2).sum();
                        assert_eq!(n, ops.len() as u64, "{rel}");
                    }
                }
                parts += 1;
            }
        }
        assert!(parts > 0, "{rel}: no timeline read");
    }
}

/// `compare` loads both runs lean: every metric, kernel, class, collective
/// and rank row is what full loads give.
#[test]
fn compare_of_lean_loads_is_compare_of_full_ones() {
    use ccl_bench::load::Progress;
    let pairs = [
        ("kineto/h100_tiny_transformer", "nsys/h100_tiny_transformer"),
        ("kineto/dlrm_8rank_v100", "kineto/dlrm_8rank_v100"),
        ("kineto/h100_gpt_eager", "kineto/h100_tiny_transformer"),
    ];
    for (a, b) in pairs {
        let (Some(a), Some(b)) = (corpus(a), corpus(b)) else {
            return;
        };
        let opts = LoadOptions::default();
        let lean = |p: &Path| {
            let x = ccl_bench::session::open(
                p,
                &opts,
                ccl_bench::session::Need::Figures,
                &Progress::default(),
            )
            .unwrap();
            (x.trace, x.stats.unwrap())
        };
        let ((ta, sa), (tb, sb)) = (lean(&a), lean(&b));
        let (fa, fb) = (load(&a, &opts).unwrap(), load(&b, &opts).unwrap());
        let text = |x: &Ctx, y: &Ctx| {
            let c = ccl_bench::compare::compare(x, y, 0.05);
            let m: Vec<String> = c
                .metrics
                .iter()
                .map(|d| format!("{} {:?} {:?} {:?}", d.metric.name, d.a, d.b, d.verdict))
                .collect();
            format!(
                "{m:?} {:?} {:?} {:?} {:?}",
                c.kernels, c.classes, c.collectives, c.ranks
            )
        };
        assert_eq!(
            text(
                &Ctx::with_stats(&ta, None, Some(sa)).unwrap(),
                &Ctx::with_stats(&tb, None, Some(sb)).unwrap()
            ),
            text(&Ctx::new(&fa, None).unwrap(), &Ctx::new(&fb, None).unwrap()),
            "{} vs {}",
            a.display(),
            b.display()
        );
    }
}

/// `straggler` is CCL-Bench's straggler delay on every multi-rank corpus set:
/// (max - min) / max of each file's summed NCCL kernel `dur`, computed here
/// from the raw JSON as its `straggler_metrics.py` does (every NCCL kernel
/// name, where it sees only `ncclDevKernel_*`).
#[test]
fn straggler_is_ccl_benchs_formula_on_multi_rank_sets() {
    for rel in ["kineto/dlrm_8rank_v100", "kineto/hta/trace_filter"] {
        let Some(dir) = corpus(rel) else { return };
        let mut sums = Vec::new();
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        files.sort();
        for f in files {
            let bytes = std::fs::read(&f).unwrap();
            let text = if f.extension().is_some_and(|e| e == "gz") {
                let mut s = String::new();
                std::io::Read::read_to_string(
                    &mut flate2::read::GzDecoder::new(&bytes[..]),
                    &mut s,
                )
                .unwrap();
                s
            } else {
                String::from_utf8(bytes).unwrap()
            };
            let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
            let sum: f64 = doc["traceEvents"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|e| {
                    e["cat"]
                        .as_str()
                        .is_some_and(|c| c.eq_ignore_ascii_case("kernel"))
                })
                .filter(|e| {
                    e["name"]
                        .as_str()
                        .is_some_and(|n| n.to_lowercase().starts_with("nccl"))
                })
                .filter_map(|e| e["dur"].as_f64())
                .sum();
            sums.push(sum);
        }
        let max = sums.iter().copied().fold(f64::MIN, f64::max);
        let min = sums.iter().copied().fold(f64::MAX, f64::min);
        let want = (max - min) / max;
        let out = run(&["--trace", dir.to_str().unwrap(), "--metric", "straggler"]);
        let got: f64 = stdout(&out).trim().parse().unwrap();
        assert_close(got, want, rel);
        let out = run(&[
            "--trace",
            dir.to_str().unwrap(),
            "--metric",
            "straggler_metrics",
        ]);
        let text = stdout(&out);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines[0], format!("Straggler Delay:  {got}"), "{text}");
        let slowdown: f64 = lines[1]
            .strip_prefix("Straggler Slowdown:  ")
            .unwrap()
            .parse()
            .unwrap();
        assert_close(slowdown, max / min, rel);
    }
}

/// Every timeline of a summary's entry, as its reader gives them.
fn all_timelines(
    f: &ccl_bench::source::FileIn,
) -> ccl_bench::error::Result<Vec<ccl_bench::formats::Ranked>> {
    let mut out = Vec::new();
    ccl_bench::summary::read::timelines(f, &mut |r| out.push(r))?;
    Ok(out)
}
