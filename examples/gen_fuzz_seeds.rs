//! Writes the seed inputs of the fuzz targets (deterministic):
//!
//!     cargo run --example gen_fuzz_seeds -- fuzz/corpus
//!
//! Small valid inputs of each kind, so the fuzzer starts from the shapes the
//! readers accept: synthetic PyTorch profiler traces, a hand-written
//! `nsys export --type json` file, a pickled CUDA memory snapshot, an XLA
//! trace JSON, an XSpace, an Nsight Systems SQLite export, an nsys-jax archive, an execution
//! trace, a workload card, a class rules file, and a summary's ops table and
//! stats file.

use std::collections::BTreeMap;
use std::path::PathBuf;

use ccl_bench::synth::{late_pair, two_rank_example};
use serde_pickle::{HashableValue as K, Value as V};

/// Kernel, memcpy, runtime call and NVTX range lines, as nsys 2025 writes them.
const NSYS_JSON: &str = r#"{"data":["","ncclDevKernel_AllReduce_Sum_f32_RING_LL","void gemm_kernel<float>(float*)","gemm_kernel","cudaLaunchKernel","forward"]}
{"Type":48,"TraceProcessEvent":{"startNs":"100","endNs":"140","eventClass":0,"globalTid":"281487878389760","correlationId":7,"name":4}}
{"Type":127,"CudaEvent":{"startNs":"200","endNs":"900","correlationId":7,"deviceId":0,"streamId":"7","globalPid":"281487878389760","kernel":{"demangledName":2,"shortName":3,"gridX":8,"gridY":1,"gridZ":1}}}
{"Type":127,"CudaEvent":{"startNs":"500","endNs":"1500","correlationId":8,"deviceId":0,"streamId":"13","globalPid":"281487878389760","kernel":{"demangledName":1,"shortName":1,"gridX":2,"gridY":1,"gridZ":1}}}
{"Type":127,"CudaEvent":{"startNs":"1600","endNs":"1700","correlationId":9,"deviceId":0,"streamId":"7","globalPid":"281487878389760","memcpy":{"sizebytes":"1048576","copyKind":1}}}
{"Type":59,"NvtxEvent":{"Type":59,"Timestamp":"50","EndTimestamp":"2000","Text":"forward","GlobalTid":"281487878389760"}}
"#;

/// Two TPU devices: a fusion, an all-reduce and an async all-gather.
const XLA_JSON: &str = r#"{"displayTimeUnit":"ns","traceEvents":[
{"ph":"M","pid":1,"name":"process_name","args":{"name":"/device:TPU:0"}},
{"ph":"M","pid":2,"name":"process_name","args":{"name":"/device:TPU:1"}},
{"ph":"M","pid":1,"tid":3,"name":"thread_name","args":{"name":"XLA Ops"}},
{"ph":"M","pid":2,"tid":3,"name":"thread_name","args":{"name":"XLA Ops"}},
{"ph":"X","pid":1,"tid":3,"name":"fusion.1","ts":1,"dur":10,"args":{"long_name":"%fusion.1 = f32[8] fusion(f32[8] %p), kind=kLoop"}},
{"ph":"X","pid":1,"tid":3,"name":"all-reduce.2","ts":11,"dur":4,"args":{"long_name":"%all-reduce.2 = f32[8] all-reduce(f32[8] %fusion.1), to_apply=%add"}},
{"ph":"X","pid":2,"tid":3,"name":"all-gather-start","ts":2,"dur":0.5,"args":{"long_name":"%all-gather-start = (f32[2], f32[8]) all-gather-start(f32[2] %p)"}},
{"ph":"X","pid":2,"tid":3,"name":"all-gather-done","ts":9,"dur":1,"args":{"long_name":"%all-gather-done = f32[8] all-gather-done((f32[2], f32[8]) %all-gather-start)"}}
]}"#;

/// A GPU plane with a kernel and an NCCL kernel, and a host plane.
fn xspace() -> Vec<u8> {
    use ccl_bench::read::xplane::{XEvent, XEventMetadata, XLine, XPlane, XSpace};
    use prost::Message;
    let meta = |id: i64, name: &str| {
        (
            id,
            XEventMetadata {
                id,
                name: name.into(),
                ..Default::default()
            },
        )
    };
    let event = |metadata_id, offset_ps, duration_ps| XEvent {
        metadata_id,
        offset_ps,
        duration_ps,
    };
    XSpace {
        planes: vec![
            XPlane {
                id: 1,
                name: "/device:GPU:0".into(),
                lines: vec![XLine {
                    id: 1,
                    name: "Stream #13(Compute)".into(),
                    timestamp_ns: 1_000,
                    events: vec![event(1, 0, 5_000_000), event(2, 6_000_000, 2_000_000)],
                }],
                event_metadata: [
                    meta(1, "sm90_xmma_gemm"),
                    meta(2, "ncclDevKernel_AllReduce_Sum_f32_RING_LL"),
                ]
                .into_iter()
                .collect(),
            },
            XPlane {
                id: 2,
                name: "/host:CPU".into(),
                ..Default::default()
            },
        ],
        hostnames: vec!["host0".into()],
    }
    .encode_to_vec()
}

/// The tables and columns the Nsight Systems reader queries, with a kernel,
/// an NCCL kernel, a copy, a launch call and an NVTX step.
fn nsys_sqlite(dir: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let path = dir.join("seed.sqlite");
    let _ = std::fs::remove_file(&path);
    let c = rusqlite::Connection::open(&path).map_err(std::io::Error::other)?;
    c.execute_batch(
        "CREATE TABLE StringIds (id INTEGER PRIMARY KEY, value TEXT);
         INSERT INTO StringIds VALUES (1, 'sm90_xmma_gemm'), (2, 'ncclDevKernel_AllReduce_Sum_f32_RING_LL'), (3, 'cudaLaunchKernel');
         CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (deviceId INTEGER, globalPid INTEGER, correlationId INTEGER, start INTEGER, end INTEGER, demangledName INTEGER, shortName INTEGER, streamId INTEGER, gridX INTEGER, gridY INTEGER, gridZ INTEGER);
         INSERT INTO CUPTI_ACTIVITY_KIND_KERNEL VALUES (0, 7, 1, 100, 600, 1, 1, 7, 8, 1, 1), (0, 7, 2, 500, 900, 2, 2, 13, 2, 1, 1);
         CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (deviceId INTEGER, globalPid INTEGER, correlationId INTEGER, start INTEGER, end INTEGER, copyKind INTEGER, streamId INTEGER, bytes INTEGER);
         INSERT INTO CUPTI_ACTIVITY_KIND_MEMCPY VALUES (0, 7, 3, 950, 990, 1, 7, 1048576);
         CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (globalTid INTEGER, correlationId INTEGER, start INTEGER, end INTEGER, nameId INTEGER);
         INSERT INTO CUPTI_ACTIVITY_KIND_RUNTIME VALUES (7, 1, 50, 60, 3);
         CREATE TABLE NVTX_EVENTS (globalTid INTEGER, start INTEGER, end INTEGER, text TEXT, textId INTEGER, eventType INTEGER, domainId INTEGER);
         INSERT INTO NVTX_EVENTS VALUES (7, 0, 1000, 'ProfilerStep#1', NULL, 59, 0);
         CREATE TABLE TARGET_INFO_GPU (id INTEGER, name TEXT, smCount INTEGER);
         INSERT INTO TARGET_INFO_GPU VALUES (0, 'NVIDIA H100', 132);",
    )
    .map_err(std::io::Error::other)?;
    drop(c);
    let bytes = std::fs::read(&path)?;
    std::fs::remove_file(&path)?;
    Ok(bytes)
}

const EXEC_TRACE: &str = r#"{"schema": "1.0.1", "nodes": [
{"id": 1, "name": "c10d::allreduce_", "inputs": [[1, 2, 0, 100, 4, "cuda:0"]]},
{"id": 2, "name": "nccl:all_reduce", "inputs": [[1, 2, 0, 100, 4, "cuda:0"]]},
{"id": 3, "name": "nccl:all_to_all", "inputs": {"values": [[[3, 4, 0, 10, 2, "cuda:0"], [5, 6, 0, 5, 8, "cuda:0"]]]}},
{"id": 4, "name": "aten::mm", "inputs": [[7, 8, 0, 9, 4, "cuda:0"]]}
]}"#;

const CLASS_RULES: &str = "[[rule]]\nclass = \"communication\"\npattern = \"^my_a2a\"\n\n[[rule]]\nclass = \"gemm\"\npattern = \"(fancy|tiled)_mm\"\n";

fn dict(items: &[(&str, V)]) -> V {
    V::Dict(
        items
            .iter()
            .map(|(k, v)| (K::String((*k).into()), v.clone()))
            .collect::<BTreeMap<_, _>>(),
    )
}

/// A 2 MiB segment, allocations of 1024 and 512 bytes, the 512 freed.
fn snapshot() -> V {
    let event = |action: &str, size: i64, t: i64| {
        dict(&[
            ("action", V::String(action.into())),
            ("size", V::I64(size)),
            ("time_us", V::I64(t)),
        ])
    };
    dict(&[
        (
            "segments",
            V::List(vec![dict(&[
                ("device", V::I64(0)),
                ("total_size", V::I64(2 << 20)),
                ("allocated_size", V::I64(1024)),
                ("active_size", V::I64(1024)),
                ("requested_size", V::I64(1000)),
            ])]),
        ),
        (
            "device_traces",
            V::List(vec![V::List(vec![
                event("segment_alloc", 2 << 20, 1),
                event("alloc", 1024, 2),
                event("alloc", 512, 3),
                event("free_completed", 512, 4),
            ])]),
        ),
    ])
}

fn main() -> std::io::Result<()> {
    let root = PathBuf::from(
        std::env::args()
            .nth(1)
            .unwrap_or_else(|| "fuzz/corpus".into()),
    );
    let mut kineto: Vec<String> = two_rank_example()
        .iter()
        .chain(&late_pair())
        .map(|t| {
            // Compact: the fuzzer mutates fewer bytes of layout.
            let v: serde_json::Value = serde_json::from_str(&t.to_json()).expect("valid JSON");
            v.to_string()
        })
        .collect();
    kineto.push(r#"[{"ph":"X","cat":"kernel","name":"k","ts":"1.5","dur":2,"args":{"stream":7,"grid":[2,1,1]}}]"#.into());
    let seeds: Vec<(&str, Vec<Vec<u8>>)> = vec![
        (
            "kineto",
            kineto.into_iter().map(String::into_bytes).collect(),
        ),
        ("nsys_json", vec![NSYS_JSON.as_bytes().to_vec()]),
        ("xla_json", vec![XLA_JSON.as_bytes().to_vec()]),
        ("xplane", vec![xspace()]),
        ("nsys_sqlite", vec![nsys_sqlite(&root)?]),
        ("nsys_jax", vec![ccl_bench::synth::nsys_jax::example()]),
        ("exec_trace", vec![EXEC_TRACE.as_bytes().to_vec()]),
        (
            "workload_card",
            vec![include_bytes!("../trace_collection/llama_fsdp_8gpu/workload_card.yaml").to_vec()],
        ),
        ("class_rules", vec![CLASS_RULES.as_bytes().to_vec()]),
        ("summary_ops", vec![ccl_bench::fuzz::summary_ops_seed()]),
        ("summary_stats", vec![ccl_bench::fuzz::summary_stats_seed()]),
        (
            "memory_snapshot",
            vec![
                serde_pickle::value_to_vec(&snapshot(), serde_pickle::SerOptions::new())
                    .expect("pickles"),
            ],
        ),
    ];
    for (target, inputs) in seeds {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir)?;
        for (i, bytes) in inputs.iter().enumerate() {
            std::fs::write(dir.join(format!("seed_{i}")), bytes)?;
        }
        eprintln!("wrote {} seeds to {}", inputs.len(), dir.display());
    }
    Ok(())
}
