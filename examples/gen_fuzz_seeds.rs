//! Writes the seed inputs of the fuzz targets (deterministic):
//!
//!     cargo run --example gen_fuzz_seeds -- fuzz/corpus
//!
//! Small valid inputs of each kind, so the fuzzer starts from the shapes the
//! readers accept: synthetic PyTorch profiler traces, a hand-written
//! `nsys export --type json` file and a pickled CUDA memory snapshot.

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
