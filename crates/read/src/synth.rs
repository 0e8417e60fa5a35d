//! A deterministic writer of PyTorch profiler (Kineto) traces, for tests and
//! sample data. Times are given in microseconds, as Kineto writes them.

pub mod flight;
pub mod jit_pickle;
pub mod nsys_jax;
pub mod stream;

use serde_json::{json, Value};

/// One rank's trace under construction.
#[derive(Debug, Clone)]
pub struct RankTrace {
    pub rank: Option<u32>,
    pub world_size: Option<u32>,
    num_sms: u32,
    events: Vec<Value>,
    next_correlation: u64,
    /// `distributedInfo.pg_config` entries.
    pg_config: Vec<Value>,
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

impl Coll<'static> {
    /// An fp32 all-reduce of `nelems` elements over `group_size` ranks.
    pub fn all_reduce_f32(nelems: u64, group_size: u32) -> Self {
        Self {
            name: "allreduce",
            in_nelems: nelems,
            out_nelems: nelems,
            dtype: "Float",
            group_size,
        }
    }
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
            pg_config: Vec::new(),
        }
    }

    /// The same trace read on a clock `us` microseconds ahead (another
    /// host's): every event's `ts` moved.
    pub fn clock_ahead(&mut self, us: f64) {
        for e in &mut self.events {
            if let Some(ts) = e.get("ts").and_then(serde_json::Value::as_f64) {
                e["ts"] = json!(ts + us);
            }
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

    /// A NCCL kernel carrying collective arguments, in the default group.
    pub fn collective(&mut self, name: &str, ts: f64, dur: f64, stream: u32, c: &Coll) -> u64 {
        let ranks: Vec<u32> = (0..c.group_size).collect();
        self.collective_in(name, ts, dur, stream, c, ("0", &ranks))
    }

    /// A NCCL kernel carrying collective arguments, in the process group
    /// `(name, ranks)`.
    pub fn collective_in(
        &mut self,
        name: &str,
        ts: f64,
        dur: f64,
        stream: u32,
        c: &Coll,
        (pg, ranks): (&str, &[u32]),
    ) -> u64 {
        let args = json!({
            "grid": [8, 1, 1], "block": [512, 1, 1],
            "Collective name": c.name, "In msg nelems": c.in_nelems,
            "Out msg nelems": c.out_nelems, "dtype": c.dtype, "Group size": c.group_size,
            "Process Group Name": pg,
            "Process Group Ranks": format!("{ranks:?}")
        });
        self.device_op("kernel", name, ts, dur, stream, args)
    }

    /// A `send` to (`recv` from) global rank `peer` in group `0` of
    /// `group_size` ranks, as PyTorch 2.x records it on the SendRecv kernel
    /// (`Dst Rank` / `Src Rank`); `peer: None` leaves the peer out, as
    /// older versions do.
    pub fn p2p(
        &mut self,
        send: bool,
        peer: Option<u32>,
        ts: f64,
        dur: f64,
        group_size: u32,
    ) -> u64 {
        let ranks: Vec<u32> = (0..group_size).collect();
        let mut args = json!({
            "grid": [8, 1, 1], "block": [512, 1, 1],
            "Collective name": if send { "send" } else { "recv" },
            "In msg nelems": 1 << 20, "Out msg nelems": 1 << 20, "dtype": "Float",
            "Group size": group_size, "Process Group Name": "0",
            "Process Group Ranks": format!("{ranks:?}")
        });
        if let Some(p) = peer {
            args[if send { "Dst Rank" } else { "Src Rank" }] = json!(p);
        }
        self.device_op(
            "kernel",
            "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
            ts,
            dur,
            21,
            args,
        )
    }

    /// The same trace as an older PyTorch writes it: collectives name no
    /// process group.
    pub fn without_groups(&mut self) {
        for e in &mut self.events {
            if let Some(args) = e.get_mut("args").and_then(Value::as_object_mut) {
                args.remove("Process Group Name");
                args.remove("Process Group Ranks");
            }
        }
    }

    /// Sets argument `key` of the last event added (e.g. `Seq` on a
    /// collective kernel).
    pub fn last_arg(&mut self, key: &str, value: Value) {
        if let Some(e) = self.events.last_mut() {
            e["args"][key] = value;
        }
    }

    /// Puts the last event added (a collective or `p2p` kernel) in the
    /// process group named `pg`.
    pub fn last_in_group(&mut self, pg: &str) {
        self.last_arg("Process Group Name", json!(pg));
    }

    /// A process group in `distributedInfo.pg_config`.
    pub fn process_group(&mut self, name: &str, desc: &str, ranks: &[u32]) {
        self.pg_config.push(json!({
            "pg_name": name, "pg_desc": desc, "backend_config": "cuda:nccl",
            "pg_size": ranks.len(), "ranks": ranks
        }));
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

    /// The CPU-side launch of the op with `correlation`, at `ts`.
    pub fn launch(&mut self, correlation: u64, ts: f64) {
        self.events.push(json!({
            "ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
            "ts": ts, "dur": 1, "args": { "correlation": correlation, "External id": correlation }
        }));
    }

    /// A CPU operator, with the `flops` arg `with_flops=True` records.
    pub fn cpu_op(&mut self, name: &str, ts: f64, dur: f64, flops: Option<f64>) {
        let args = match flops {
            Some(f) => json!({ "flops": f }),
            None => json!({}),
        };
        self.events.push(json!({
            "ph": "X", "cat": "cpu_op", "name": name, "pid": 1, "tid": 1,
            "ts": ts, "dur": dur, "args": args
        }));
    }

    /// A `record_function` range: CPU (`user_annotation`) or its GPU mirror.
    pub fn annotation(&mut self, name: &str, ts: f64, dur: f64, on_gpu: bool) {
        let cat = if on_gpu {
            "gpu_user_annotation"
        } else {
            "user_annotation"
        };
        self.events.push(json!({
            "ph": "X", "cat": cat, "name": name, "pid": 1, "tid": 1,
            "ts": ts, "dur": dur, "args": {}
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
            if !self.pg_config.is_empty() {
                doc["distributedInfo"]["pg_config"] = json!(self.pg_config);
            }
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
    let ar = Coll::all_reduce_f32(1 << 20, 2);
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

/// Four ranks as a 2 × 2 grid, tensor parallel pairs {0, 1} and {2, 3}
/// (groups `1`, `2`), data parallel pairs {0, 2} and {1, 3} (groups `3`,
/// `4`), two steps of 100 µs. In step s (at 100·s µs), fp32 all-reduces:
/// ```text
/// tp, 1 MiB:        ranks 0, 2 [10, 30)   ranks 1, 3 [15, 30)   (0, 2 wait 5 µs)
/// dp, 1 MiB / 2 MiB: every rank [40, 70) in step 0, [40, 90) in step 1
/// ```
/// With `descs`, every rank's `pg_config` describes the groups as
/// `mesh_tp`/`mesh_dp`; without, only their layout tells the roles.
pub fn tp_dp_grid(descs: bool) -> Vec<RankTrace> {
    const AR: &str = "ncclDevKernel_AllReduce_Sum_f32_RING_LL";
    let groups: [(&str, &str, [u32; 2]); 4] = [
        ("1", "mesh_tp", [0, 1]),
        ("2", "mesh_tp", [2, 3]),
        ("3", "mesh_dp", [0, 2]),
        ("4", "mesh_dp", [1, 3]),
    ];
    (0..4u32)
        .map(|rank| {
            let mut r = RankTrace::new(Some(rank), 4, 10);
            if descs {
                for (name, desc, ranks) in &groups {
                    r.process_group(name, desc, ranks);
                }
            }
            let mine = |role: &str| {
                groups
                    .iter()
                    .find(|g| g.1 == role && g.2.contains(&rank))
                    .map(|g| (g.0, &g.2[..]))
                    .expect("every rank is in one group of each role")
            };
            for s in 0..2u32 {
                let at = 100.0 * f64::from(s);
                r.step(s + 1, at, 100.0);
                let late = if rank % 2 == 1 { 5.0 } else { 0.0 };
                let tp = Coll::all_reduce_f32(1 << 18, 2);
                r.collective_in(AR, at + 10.0 + late, 20.0 - late, 20, &tp, mine("mesh_tp"));
                let dp = Coll::all_reduce_f32(1 << (18 + s), 2);
                let dur = if s == 0 { 30.0 } else { 50.0 };
                r.collective_in(AR, at + 40.0, dur, 21, &dp, mine("mesh_dp"));
            }
            r
        })
        .collect()
}

/// Two ranks in one step `[0, 100)` µs and one all-reduce that rank 0 starts at
/// 10 µs and rank 1 at 40 µs; both end at 60. Rank 0 waits 30 µs for rank 1
/// and then both transfer for 20 µs.
pub fn late_pair() -> Vec<RankTrace> {
    let c = Coll::all_reduce_f32(1, 2);
    let mut ranks = vec![
        RankTrace::new(Some(0), 2, 10),
        RankTrace::new(Some(1), 2, 10),
    ];
    for r in &mut ranks {
        r.step(1, 0.0, 100.0);
    }
    ranks[0].collective(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        10.0,
        50.0,
        20,
        &c,
    );
    ranks[1].collective(
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
        40.0,
        20.0,
        20,
        &c,
    );
    ranks
}

/// Shape of a simulated data-parallel training run (see [`training_run`]).
#[derive(Debug, Clone)]
pub struct RunShape {
    pub ranks: u32,
    pub steps: u32,
    pub layers: u32,
    /// This rank computes `straggler_factor` times slower than the others.
    pub straggler: Option<u32>,
    pub straggler_factor: f64,
}

impl Default for RunShape {
    fn default() -> Self {
        Self {
            ranks: 8,
            steps: 3,
            layers: 8,
            straggler: Some(5),
            straggler_factor: 1.3,
        }
    }
}

/// The bundled samples in trace_collection/: the run with rank 5 straggling,
/// and the same run with the straggler fixed (to try `ccl-bench A B` on).
pub fn samples() -> Vec<(&'static str, RunShape)> {
    vec![
        ("llama_fsdp_8gpu", RunShape::default()),
        (
            "llama_fsdp_8gpu_balanced",
            RunShape {
                straggler: None,
                ..RunShape::default()
            },
        ),
    ]
}

/// A deterministic FSDP-style training run on `shape.ranks` GPUs (132 SMs each).
/// Per step and rank: an input copy; per layer a prefetched all-gather of weights
/// (comm stream) and forward kernels (attention, GEMMs, RMSNorm, elementwise);
/// backward in reverse with each layer's gradient reduce-scatter overlapping the
/// next layer's backward; a small all-reduce; the optimizer. Collectives end on
/// every rank when the last rank has arrived, so a slow rank makes the others wait
/// inside their communication kernels, as on real hardware.
pub fn training_run(shape: &RunShape) -> Vec<RankTrace> {
    const COMPUTE: u32 = 7;
    const COMM: u32 = 20;
    let n = shape.ranks as usize;
    let mut traces: Vec<RankTrace> = (0..shape.ranks)
        .map(|r| RankTrace::new(Some(r), shape.ranks, 132))
        .collect();
    // Slowdown of rank r, with a little deterministic per-kernel variation.
    let factor = |r: usize, salt: u32| {
        let base = if shape.straggler == Some(r as u32) {
            shape.straggler_factor
        } else {
            1.0
        };
        base * (1.0 + 0.01 * f64::from((r as u32 * 7 + salt * 3) % 5))
    };
    let group = shape.ranks;
    let gather = Coll {
        name: "_allgather_base",
        in_nelems: 1 << 21,
        out_nelems: (1 << 21) * u64::from(group),
        dtype: "BFloat16",
        group_size: group,
    };
    let scatter = Coll {
        name: "_reduce_scatter_base",
        in_nelems: (1 << 21) * u64::from(group),
        out_nelems: 1 << 21,
        dtype: "BFloat16",
        group_size: group,
    };
    let reduce = Coll::all_reduce_f32(1 << 12, group);
    let mut step_start = 0.0;
    for step in 0..shape.steps {
        let mut comp = vec![step_start + 100.0; n];
        let mut comm_free = vec![step_start + 100.0; n];
        let mut cpu = vec![step_start + 10.0; n];
        // Launch every op from the CPU shortly after the previous launch.
        let launch = |t: &mut RankTrace, cpu: &mut f64, corr: u64| {
            *cpu += 4.0;
            t.launch(corr, *cpu);
        };
        // A collective on every rank: starts when the rank is ready, ends for all
        // when the last rank is ready plus the transfer time.
        let collective = |traces: &mut [RankTrace],
                          cpu: &mut [f64],
                          ready: &[f64],
                          name: &str,
                          dur: f64,
                          c: &Coll| {
            let end = ready.iter().copied().fold(f64::MIN, f64::max) + dur;
            for (r, t) in traces.iter_mut().enumerate() {
                let corr = t.collective(name, ready[r], end - ready[r], COMM, c);
                cpu[r] += 4.0;
                t.launch(corr, cpu[r]);
            }
            end
        };
        for (r, t) in traces.iter_mut().enumerate() {
            let c = t.memcpy(
                "Memcpy HtoD (Pageable -> Device)",
                comp[r],
                50.0,
                COMPUTE,
                8 << 20,
            );
            launch(t, &mut cpu[r], c);
            comp[r] += 50.0;
        }
        // Forward: all-gather layer l while layer l-1 computes. The CPU side
        // records `forward`/`backward`/`optimizer` and FSDP2-style ranges.
        let fwd_cpu = cpu.clone();
        let mut layer_start = comp.clone();
        for layer in 0..shape.layers {
            let ready: Vec<f64> = (0..n).map(|r| comm_free[r].max(layer_start[r])).collect();
            let before = cpu.clone();
            let end = collective(
                &mut traces,
                &mut cpu,
                &ready,
                "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                150.0,
                &gather,
            );
            for (r, t) in traces.iter_mut().enumerate() {
                t.annotation("FSDP::all_gather_copy_in", before[r] + 0.5, 0.5, false);
                t.annotation(
                    "FSDP::all_gather",
                    before[r] + 1.0,
                    cpu[r] - before[r],
                    false,
                );
                t.annotation("FSDP::all_gather_copy_out", cpu[r] + 1.0, 1.0, false);
                cpu[r] += 2.0;
            }
            for (r, t) in traces.iter_mut().enumerate() {
                comm_free[r] = end;
                layer_start[r] = comp[r];
                comp[r] = comp[r].max(end);
                for (name, dur) in [
                    ("triton_red_fused_rms_norm_0", 40.0),
                    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64", 300.0),
                    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(flash::Flash_fwd_params)", 250.0),
                    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x256x64", 300.0),
                    ("void at::native::vectorized_elementwise_kernel<4, at::native::silu_kernel>(int)", 30.0),
                ] {
                    let d = dur * factor(r, layer + step);
                    let k = t.kernel(name, comp[r], d, COMPUTE, 264);
                    launch(t, &mut cpu[r], k);
                    comp[r] += d;
                }
            }
        }
        for (r, t) in traces.iter_mut().enumerate() {
            t.annotation("forward", fwd_cpu[r], cpu[r] + 1.0 - fwd_cpu[r], false);
        }
        let bwd_cpu: Vec<f64> = cpu.iter().map(|c| c + 1.0).collect();
        // Backward: compute layer l, then reduce-scatter its gradients while the
        // next layer's backward runs.
        for layer in (0..shape.layers).rev() {
            for (r, t) in traces.iter_mut().enumerate() {
                for (name, dur) in [
                    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x128x64", 600.0),
                    ("void flash::flash_bwd_dq_dk_dv_loop_seqk_parallel_kernel<Flash_bwd_kernel_traits>(flash::Flash_bwd_params)", 500.0),
                    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nn_n_tilesize128x256x64", 600.0),
                    ("triton_red_fused_rms_norm_backward_1", 60.0),
                ] {
                    let d = dur * factor(r, layer + 2 * step + 1);
                    let k = t.kernel(name, comp[r], d, COMPUTE, 264);
                    launch(t, &mut cpu[r], k);
                    comp[r] += d;
                }
            }
            let ready: Vec<f64> = (0..n).map(|r| comm_free[r].max(comp[r])).collect();
            let before = cpu.clone();
            let end = collective(
                &mut traces,
                &mut cpu,
                &ready,
                "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                200.0,
                &scatter,
            );
            for (r, t) in traces.iter_mut().enumerate() {
                t.annotation(
                    "FSDP::reduce_scatter",
                    before[r] + 1.0,
                    cpu[r] - before[r],
                    false,
                );
            }
            comm_free.iter_mut().for_each(|c| *c = end);
        }
        for (r, t) in traces.iter_mut().enumerate() {
            t.annotation("backward", bwd_cpu[r], cpu[r] + 1.0 - bwd_cpu[r], false);
        }
        let opt_cpu: Vec<f64> = cpu.iter().map(|c| c + 1.0).collect();
        // Gradient-norm all-reduce: compute waits for it.
        let ready: Vec<f64> = (0..n).map(|r| comm_free[r].max(comp[r])).collect();
        let end = collective(
            &mut traces,
            &mut cpu,
            &ready,
            "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
            40.0,
            &reduce,
        );
        let mut step_end = end;
        for (r, t) in traces.iter_mut().enumerate() {
            let d = 200.0 * factor(r, step);
            let k = t.kernel("void at::native::(anonymous namespace)::multi_tensor_apply_kernel<FusedAdamMathFunctor>(int)", end, d, COMPUTE, 528);
            launch(t, &mut cpu[r], k);
            t.annotation("optimizer", opt_cpu[r], cpu[r] + 1.0 - opt_cpu[r], false);
            step_end = step_end.max(end + d + 20.0);
        }
        for t in traces.iter_mut() {
            t.step(step + 1, step_start, step_end - step_start);
        }
        step_start = step_end;
    }
    traces
}

/// The workload card (CCL-Bench YAML) that describes [`training_run`]'s default shape.
pub const SAMPLE_CARD: &str = "\
# Workload card for the synthetic sample (CCL-Bench schema).
workload:
  model:
    phase: training
    moe: false
    model_family: llama
    precision: bf16
    model_arch:
      num_params: 1300000000
      num_layers: 8
      num_heads: 16
      head_dim: 128
  data:
    batch_size: 8
    seq_len: 1024
  hardware:
    network_topo:
      bandwidth_gbps: [400, 3600]
    xpu_spec:
      type: GPU
      model: H100-SXM
      total_count: 8
      count_per_node: 8
Model-executor:
  framework:
    name: torch
  model_plan_parallelization:
    dp_replicate: 1
    dp_shard: 8
    tp: 1
    pp: 1
    cp: 1
    ep: 1
  communication_library:
    name: NCCL
metric_source:
  traces: [json]
";
