//! A deterministic writer of PyTorch profiler (Kineto) traces, for tests and
//! sample data. Times are given in microseconds, as Kineto writes them.

use serde_json::{json, Value};

/// One rank's trace under construction.
#[derive(Debug, Clone)]
pub struct RankTrace {
    rank: Option<u32>,
    world_size: Option<u32>,
    num_sms: u32,
    events: Vec<Value>,
    next_correlation: u64,
}

/// Collective arguments as PyTorch records them on NCCL kernels.
#[derive(Debug, Clone)]
pub struct Coll<'a> {
    pub name: &'a str,
    pub in_nelems: u64,
    pub out_nelems: u64,
    pub dtype: &'a str,
    pub group_size: u32,
}

impl RankTrace {
    /// A rank with `distributedInfo` (pass `None` to leave it out) on a GPU with `num_sms` SMs.
    pub fn new(rank: Option<u32>, world_size: u32, num_sms: u32) -> Self {
        Self {
            rank,
            world_size: Some(world_size),
            num_sms,
            events: Vec::new(),
            next_correlation: 1,
        }
    }

    fn device_op(
        &mut self,
        cat: &str,
        name: &str,
        ts: f64,
        dur: f64,
        stream: u32,
        mut args: Value,
    ) -> u64 {
        let correlation = self.next_correlation;
        self.next_correlation += 1;
        args["device"] = json!(0);
        args["stream"] = json!(stream);
        args["correlation"] = json!(correlation);
        args["External id"] = json!(correlation);
        self.events.push(json!({
            "ph": "X", "cat": cat, "name": name, "pid": 0, "tid": stream,
            "ts": ts, "dur": dur, "args": args
        }));
        correlation
    }

    /// A kernel launched with `grid` blocks; returns its correlation id.
    pub fn kernel(&mut self, name: &str, ts: f64, dur: f64, stream: u32, grid: u32) -> u64 {
        self.device_op(
            "kernel",
            name,
            ts,
            dur,
            stream,
            json!({ "grid": [grid, 1, 1], "block": [256, 1, 1] }),
        )
    }

    /// A NCCL kernel carrying collective arguments.
    pub fn collective(&mut self, name: &str, ts: f64, dur: f64, stream: u32, c: &Coll) -> u64 {
        let args = json!({
            "grid": [8, 1, 1], "block": [512, 1, 1],
            "Collective name": c.name, "In msg nelems": c.in_nelems,
            "Out msg nelems": c.out_nelems, "dtype": c.dtype, "Group size": c.group_size,
            "Process Group Name": "0", "Process Group Ranks": "[0, 1]"
        });
        self.device_op("kernel", name, ts, dur, stream, args)
    }

    pub fn memcpy(&mut self, name: &str, ts: f64, dur: f64, stream: u32, bytes: u64) -> u64 {
        self.device_op(
            "gpu_memcpy",
            name,
            ts,
            dur,
            stream,
            json!({ "bytes": bytes }),
        )
    }

    pub fn memset(&mut self, ts: f64, dur: f64, stream: u32, bytes: u64) -> u64 {
        self.device_op(
            "gpu_memset",
            "Memset (Device)",
            ts,
            dur,
            stream,
            json!({ "bytes": bytes }),
        )
    }

    /// The CPU-side launch of the op with `correlation`, at `ts`.
    pub fn launch(&mut self, correlation: u64, ts: f64) {
        self.events.push(json!({
            "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": ts, "dur": 1, "args": { "correlation": correlation, "External id": correlation }
        }));
    }

    /// A `ProfilerStep#n` annotation.
    pub fn step(&mut self, n: u32, ts: f64, dur: f64) {
        self.events.push(json!({
            "ph": "X", "cat": "user_annotation", "name": format!("ProfilerStep#{n}"),
            "pid": 1, "tid": 1, "ts": ts, "dur": dur, "args": {}
        }));
    }

    /// The trace as Kineto JSON text.
    pub fn to_json(&self) -> String {
        let mut doc = json!({
            "schemaVersion": 1,
            "deviceProperties": [{ "id": 0, "name": "Synthetic GPU", "numSms": self.num_sms }],
            "traceEvents": self.events,
        });
        if let Some(rank) = self.rank {
            doc["distributedInfo"] =
                json!({ "backend": "nccl", "rank": rank, "world_size": self.world_size });
        }
        serde_json::to_string_pretty(&doc).expect("JSON values serialize")
    }
}

/// A two-rank trace small enough to compute every metric by hand (times in µs,
/// 10 SMs per GPU). The expected values are worked out in the metric tests.
///
/// Rank 0, steps #1 = [0, 100) and #2 = [100, 200) on the CPU:
/// ```text
/// op  name                                   device time   grid  launched
/// K1  sm90_xmma_gemm_bf16                    [10, 45)      20    5   (step 1)
/// C1  ncclDevKernel_AllReduce_Sum_f32_RING   [30, 60)       8    6   (step 1)
/// M1  Memcpy HtoD, 1e6 bytes                 [60, 70)       -    7   (step 1)
/// K2  flash_fwd_kernel                       [110, 150)     4    105 (step 2)
/// C2  ncclDevKernel_AllGather_RING_LL        [140, 170)     8    106 (step 2)
/// K3  fused_moe_kernel                       [170, 180)     6    107 (step 2)
/// ```
/// Rank 1, step #1 = [0, 200): K1 gemm [0, 100) grid 10, C1 all-reduce [100, 200) grid 8.
pub fn two_rank_example() -> Vec<RankTrace> {
    let ar = Coll {
        name: "allreduce",
        in_nelems: 1 << 20,
        out_nelems: 1 << 20,
        dtype: "Float",
        group_size: 2,
    };
    let ag = Coll {
        name: "_allgather_base",
        in_nelems: 1 << 18,
        out_nelems: 1 << 19,
        dtype: "BFloat16",
        group_size: 2,
    };
    let mut r0 = RankTrace::new(Some(0), 2, 10);
    r0.step(1, 0.0, 100.0);
    r0.step(2, 100.0, 100.0);
    let ops = [
        r0.kernel("sm90_xmma_gemm_bf16", 10.0, 35.0, 7, 20),
        r0.collective(
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            30.0,
            30.0,
            20,
            &ar,
        ),
        r0.memcpy("Memcpy HtoD (Pageable -> Device)", 60.0, 10.0, 7, 1_000_000),
        r0.kernel("flash_fwd_kernel", 110.0, 40.0, 7, 4),
        r0.collective(
            "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            140.0,
            30.0,
            20,
            &ag,
        ),
        r0.kernel("fused_moe_kernel", 170.0, 10.0, 7, 6),
    ];
    for (corr, at) in ops.into_iter().zip([5.0, 6.0, 7.0, 105.0, 106.0, 107.0]) {
        r0.launch(corr, at);
    }
    let mut r1 = RankTrace::new(Some(1), 2, 10);
    r1.step(1, 0.0, 200.0);
    let k = r1.kernel("sm90_xmma_gemm_bf16", 0.0, 100.0, 7, 10);
    let c = r1.collective(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
        100.0,
        100.0,
        20,
        &ar,
    );
    r1.launch(k, 1.0);
    r1.launch(c, 2.0);
    vec![r0, r1]
}
