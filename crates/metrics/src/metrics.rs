//! The metric registry: every metric is a name, a unit, a one-line meaning, the
//! inputs it needs and a compute function. The CLI table, `--list-metrics`, the
//! README table and the JSON/CSV outputs are all generated from [`METRICS`].

pub mod balance;
pub mod breakdown;
pub mod ccl_names;
pub mod collectives;
pub mod comm;
pub mod ctx;
pub mod flops;
pub mod hang;
pub mod kernel;
pub mod memory;
pub mod outcome;
pub mod pace;
pub mod phases;
pub mod plausible;
pub mod ranks;
pub mod reasons;
pub mod roles;
pub mod steps;
pub mod whatif;
pub mod window;

use rayon::prelude::*;

pub use ctx::{Ctx, Options};
pub use outcome::{Lack, Measured, Outcome, Unit, Why};

/// What a metric needs from the trace to apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    Kernels,
    CommKernels,
    Steps,
    GridInfo,
    Memcpy,
    TwoRanks,
    CollSizes,
    Card,
    ModelParams,
    Flops,
    Annotations,
    EngineSteps,
    Simulator,
    MemorySnapshot,
}

impl Need {
    pub fn describe(self) -> &'static str {
        match self {
            Self::Kernels => "GPU kernels",
            Self::CommKernels => "communication kernels",
            Self::Steps => "ProfilerStep annotations or inference engine steps",
            Self::GridInfo => "kernel `blocks per SM`, or launch grids + deviceProperties",
            Self::Memcpy => "memcpy events with bytes",
            Self::TwoRanks => "≥ 2 ranks",
            Self::CollSizes => "collective sizes (Kineto collective args)",
            Self::Card => "workload card",
            Self::ModelParams => "model size (card or --model-params)",
            Self::Flops => "`flops` args (with_flops=True)",
            Self::Annotations => "record_function ranges",
            Self::EngineSteps => "vLLM/SGLang engine-step ranges",
            Self::MemorySnapshot => "CUDA memory snapshot (torch.cuda.memory._dump_snapshot)",
            Self::Simulator => "a network simulator",
        }
    }
}

/// Where a metric is listed in the Summary tab.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    Time,
    Throughput,
    Phases,
    Communication,
    Bandwidth,
    Compute,
    Memory,
    Balance,
}

impl Group {
    pub const ALL: [Group; 8] = [
        Self::Time,
        Self::Throughput,
        Self::Phases,
        Self::Communication,
        Self::Bandwidth,
        Self::Compute,
        Self::Memory,
        Self::Balance,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Self::Time => "time",
            Self::Throughput => "throughput",
            Self::Phases => "phases",
            Self::Communication => "communication",
            Self::Bandwidth => "bandwidth",
            Self::Compute => "compute",
            Self::Memory => "memory",
            Self::Balance => "balance",
        }
    }
}

/// Which direction of change is an improvement, for comparisons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Better {
    Higher,
    Lower,
    /// A description of the workload (counts, volumes, shares) rather than a
    /// quality: a change is reported, never called a regression.
    Neither,
}

pub struct Metric {
    pub name: &'static str,
    pub unit: Unit,
    pub group: Group,
    pub better: Better,
    /// One line: what the number means and how it is computed.
    pub about: &'static str,
    pub needs: &'static [Need],
    pub compute: fn(&Ctx) -> Outcome,
}

impl Metric {
    pub fn eval(&self, ctx: &Ctx) -> Outcome {
        let out = plausible::check(self, (self.compute)(ctx));
        match ctx.focus {
            Some(t) => reasons::for_format(out, t.format),
            None => out,
        }
    }
}

use Need::*;

pub static METRICS: &[Metric] = &[
    Metric {
        name: "avg_step_time",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Lower,
        about: "mean step duration (ProfilerStep ranges; in a serving trace without them, vLLM/SGLang engine steps; in an XLA trace, the device runs of the program run repeatedly that takes most of the time, such as jit_train_step) per rank over the measured steps (with 3 or more steps the first, warm-up, and the last, which runs until the profiler stops, are left out, as CCL-Bench does; --all-steps keeps them), averaged over ranks",
        needs: &[Steps],
        compute: steps::avg_step_time,
    },
    Metric {
        name: "iteration_time_s",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Lower,
        about: "the step time the run sustains: per rank the longer of its mean CPU step (avg_step_time) and its mean device step (device_step_time_s), averaged over ranks; above avg_step_time when the device lags and the CPU runs ahead (the note says which side sets the pace)",
        needs: &[Steps, Kernels],
        compute: pace::iteration_time,
    },
    Metric {
        name: "device_step_time_s",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Lower,
        about: "device-side step: first start to last end of the device ops launched in each measured step, per rank, averaged",
        needs: &[Steps, Kernels],
        compute: pace::device_step_time,
    },
    Metric {
        name: "cpu_ahead_s",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Neither,
        about: "how far the CPU runs ahead of the device: end of the last device op launched in a step - end of the step's CPU range, over the measured steps, per rank, averaged (negative: the device finished first and waits for the CPU)",
        needs: &[Steps, Kernels],
        compute: pace::cpu_ahead,
    },
    Metric {
        name: "coll_call_num",
        unit: Unit::Count,
        group: Group::Communication,
        better: Better::Neither,
        about: "communication kernels (ncclKernel_*, ncclDevKernel_*, RCCL, ...) launched in the last step of rank 0 (or --rank); without kernels, the communication nodes (nccl:*) of the rank's execution trace",
        needs: &[Kernels],
        compute: comm::coll_call_num,
    },
    Metric {
        name: "total_kernel_time",
        unit: Unit::Seconds,
        group: Group::Compute,
        better: Better::Neither,
        about: "summed kernel durations over all ranks (memcpy/memset excluded)",
        needs: &[Kernels],
        compute: kernel::total_kernel_time,
    },
    Metric {
        name: "total_communication_time",
        unit: Unit::Seconds,
        group: Group::Communication,
        better: Better::Lower,
        about: "summed communication kernel time per step (kernels launched in steps / number of steps), averaged over ranks",
        needs: &[Kernels],
        compute: comm::total_communication_time,
    },
    Metric {
        name: "communication_ratio",
        unit: Unit::Percent,
        group: Group::Communication,
        better: Better::Lower,
        about: "summed communication kernel time / summed kernel time x 100, per rank, averaged",
        needs: &[Kernels],
        compute: comm::communication_ratio,
    },
    Metric {
        name: "communication_fraction",
        unit: Unit::Percent,
        group: Group::Communication,
        better: Better::Lower,
        about: "summed communication time / summed GPU time incl. memcpy/memset x 100, per rank, averaged",
        needs: &[Kernels],
        compute: comm::communication_fraction,
    },
    Metric {
        name: "communication_overlap_ratio",
        unit: Unit::Ratio,
        group: Group::Communication,
        better: Better::Higher,
        about: "|union(comm) ∩ union(compute)| / |union(comm)| per rank, averaged over ranks with communication",
        needs: &[CommKernels],
        compute: comm::communication_overlap_ratio,
    },
    Metric {
        name: "break_down_steps",
        unit: Unit::Percent,
        group: Group::Compute,
        better: Better::Neither,
        about: "GPU time of ops launched in steps by class (communication, attention, moe, gemm, other compute, memory) as % of it; headline = compute share",
        needs: &[Kernels],
        compute: kernel::break_down_steps,
    },
    Metric {
        name: "moe_fraction",
        unit: Unit::Percent,
        group: Group::Compute,
        better: Better::Neither,
        about: "summed MoE-class kernel time / summed kernel time x 100, per rank, averaged",
        needs: &[Kernels],
        compute: kernel::moe_fraction,
    },
    Metric {
        name: "unclassified_fraction",
        unit: Unit::Percent,
        group: Group::Compute,
        better: Better::Lower,
        about: "device time of ops no class rule recognises / all device op time (kernels + memcpy/memset) x 100, per rank, averaged; a large share means class metrics miss something: add a rule with --classes",
        needs: &[Kernels],
        compute: kernel::unclassified_fraction,
    },
    Metric {
        name: "dominant_kernel_concentration",
        unit: Unit::Percent,
        group: Group::Compute,
        better: Better::Neither,
        about: "summed time of the kernel name with the most time / summed kernel time x 100, per rank, averaged",
        needs: &[Kernels],
        compute: kernel::dominant_kernel_concentration,
    },
    Metric {
        name: "aggregate_gpu_utilization",
        unit: Unit::Percent,
        group: Group::Compute,
        better: Better::Higher,
        about: "union of GPU activity (kernels + memcpy/memset) / device window (first GPU op start to last GPU op end) x 100, per rank, averaged",
        needs: &[Kernels],
        compute: balance::aggregate_gpu_utilization,
    },
    Metric {
        name: "mean_sm_coverage",
        unit: Unit::Percent,
        group: Group::Compute,
        better: Better::Higher,
        about: "duration-weighted mean over kernels of min(1, blocks per SM) x 100, per rank, averaged over ranks (CCL-Bench pools all ranks' kernels instead); blocks per SM from the profiler's `blocks per SM`, else grid blocks / the device's SMs",
        needs: &[GridInfo],
        compute: kernel::mean_sm_coverage,
    },
    Metric {
        name: "compute_bound_fraction",
        unit: Unit::Percent,
        group: Group::Compute,
        better: Better::Higher,
        about: "time in kernels with SM coverage > 70% and duration above the median kernel / kernel time (kernels with grid info) x 100",
        needs: &[GridInfo],
        compute: kernel::compute_bound_fraction,
    },
    Metric {
        name: "memory_bound_fraction",
        unit: Unit::Percent,
        group: Group::Compute,
        better: Better::Lower,
        about: "time in kernels with SM coverage < 50% / kernel time (kernels with grid info) x 100",
        needs: &[GridInfo],
        compute: kernel::memory_bound_fraction,
    },
    Metric {
        name: "memory_transfer_overhead",
        unit: Unit::Percent,
        group: Group::Memory,
        better: Better::Lower,
        about: "memcpy/memset time not covered by compute kernels / device-side step time (first to last op of each step) x 100, per rank, averaged",
        needs: &[Kernels],
        compute: memory::memory_transfer_overhead,
    },
    Metric {
        name: "average_memory_bandwidth",
        unit: Unit::GBps,
        group: Group::Memory,
        better: Better::Higher,
        about: "sum of bytes / sum of durations over memcpy events with a byte count, all ranks pooled",
        needs: &[Memcpy],
        compute: memory::average_memory_bandwidth,
    },
    Metric {
        name: "peak_memory_allocated_gb",
        unit: Unit::GB,
        group: Group::Memory,
        better: Better::Lower,
        about: "most bytes in blocks handed to tensors at any point of the allocator history (replayed from the snapshot's state, so allocations older than the history count), max over ranks (the rank nearest to OOM), 1 GB = 1e9 B",
        needs: &[MemorySnapshot],
        compute: memory::peak_memory_allocated_gb,
    },
    Metric {
        name: "peak_memory_reserved_gb",
        unit: Unit::GB,
        group: Group::Memory,
        better: Better::Lower,
        about: "most bytes the caching allocator held from the driver (segments) at any point of the history, max over ranks, 1 GB = 1e9 B",
        needs: &[MemorySnapshot],
        compute: memory::peak_memory_reserved_gb,
    },
    Metric {
        name: "memory_fragmentation",
        unit: Unit::Percent,
        group: Group::Memory,
        better: Better::Lower,
        about: "(1 - allocated / reserved) x 100 at the moment of peak allocation (reserved memory not usable when it was needed most), per rank, averaged",
        needs: &[MemorySnapshot],
        compute: memory::memory_fragmentation,
    },
    Metric {
        name: "memory_allocation_efficiency",
        unit: Unit::Percent,
        group: Group::Memory,
        better: Better::Higher,
        about: "bytes requested / bytes allocated over the blocks live at snapshot time x 100 (the rest is the allocator's rounding), per rank, averaged",
        needs: &[MemorySnapshot],
        compute: memory::memory_allocation_efficiency,
    },
    Metric {
        name: "memory_alloc_count",
        unit: Unit::Count,
        group: Group::Memory,
        better: Better::Neither,
        about: "tensor allocations in the allocator history of the snapshot (frees in --metrics detail), per rank, averaged",
        needs: &[MemorySnapshot],
        compute: memory::memory_alloc_count,
    },
    Metric {
        name: "load_imbalance_ratio",
        unit: Unit::Ratio,
        group: Group::Balance,
        better: Better::Lower,
        about: "max over ranks of GPU busy time (union of device activity) / min over ranks",
        needs: &[Kernels, TwoRanks],
        compute: balance::load_imbalance_ratio,
    },
    // CCL-Bench's TPU/XLA-era list: whole-trace window per rank.
    Metric {
        name: "wall_time_s",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Lower,
        about: "last event end - first event start (CPU and GPU events), per rank, averaged",
        needs: &[],
        compute: window::wall_time_s,
    },
    Metric {
        name: "total_compute_time_s",
        unit: Unit::Seconds,
        group: Group::Compute,
        better: Better::Neither,
        about: "union of non-communication device ops (compute kernels, memcpy/memset) over the whole trace, per rank, averaged",
        needs: &[Kernels],
        compute: window::total_compute_time_s,
    },
    Metric {
        name: "total_comm_time_s",
        unit: Unit::Seconds,
        group: Group::Communication,
        better: Better::Lower,
        about: "union of communication ops over the whole trace, per rank, averaged",
        needs: &[Kernels],
        compute: window::total_comm_time_s,
    },
    Metric {
        name: "avg_comm_kernel_time_s",
        unit: Unit::Seconds,
        group: Group::Communication,
        better: Better::Lower,
        about: "mean duration of one communication op, all ranks pooled",
        needs: &[CommKernels],
        compute: window::avg_comm_kernel_time_s,
    },
    Metric {
        name: "compute_utilization_proxy",
        unit: Unit::Ratio,
        group: Group::Compute,
        better: Better::Higher,
        about: "total_compute_time_s / wall_time_s, per rank, averaged",
        needs: &[Kernels],
        compute: window::compute_utilization_proxy,
    },
    Metric {
        name: "num_comm_kernels",
        unit: Unit::Count,
        group: Group::Communication,
        better: Better::Neither,
        about: "communication ops over all ranks in scope (the note gives the count per chip for --n-chips)",
        needs: &[Kernels],
        compute: window::num_comm_kernels,
    },
    Metric {
        name: "num_comm_kernels_w_size_and_time",
        unit: Unit::Count,
        group: Group::Communication,
        better: Better::Neither,
        about: "communication ops with a known message size and a positive duration, all ranks",
        needs: &[CommKernels],
        compute: window::num_comm_kernels_w_size_and_time,
    },
    Metric {
        name: "avg_comm_bandwidth_GBps",
        unit: Unit::GBps,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "mean over sized communication ops of message bytes (In msg nelems x dtype size) / duration",
        needs: &[CollSizes],
        compute: window::avg_comm_bandwidth_gbps,
    },
    Metric {
        name: "allreduce_comm_time_s",
        unit: Unit::Seconds,
        group: Group::Communication,
        better: Better::Lower,
        about: "summed all-reduce op time over the whole trace, per rank, averaged",
        needs: &[CommKernels],
        compute: window::allreduce_comm_time_s,
    },
    Metric {
        name: "hockney_alpha_s",
        unit: Unit::Seconds,
        group: Group::Bandwidth,
        better: Better::Lower,
        about: "latency α of a least-squares fit t = α + β·bytes over all-reduce ops with a size (needs ≥ 2 distinct sizes)",
        needs: &[CollSizes],
        compute: collectives::hockney_alpha,
    },
    Metric {
        name: "hockney_beta_s_per_byte",
        unit: Unit::SecondsPerByte,
        group: Group::Bandwidth,
        better: Better::Lower,
        about: "inverse bandwidth β of the same fit",
        needs: &[CollSizes],
        compute: collectives::hockney_beta,
    },
    Metric {
        name: "hockney_inverse_beta_Bps",
        unit: Unit::BytesPerS,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "1/β of the same fit: the asymptotic all-reduce bandwidth",
        needs: &[CollSizes],
        compute: collectives::hockney_inverse_beta,
    },
    Metric {
        name: "hockney_alpha_by_role_s",
        unit: Unit::Seconds,
        group: Group::Bandwidth,
        better: Better::Lower,
        about: "latency α of t = α + β·S fitted per collective kind and group role (tp, dp, ...) over the transfer of matched collectives (wait for late members left out; ≥ 2 distinct sizes); parts: each fit; value: the fit over the most instances",
        needs: &[CollSizes, TwoRanks],
        compute: roles::hockney_alpha_by_role,
    },
    Metric {
        name: "hockney_beta_by_role_s_per_byte",
        unit: Unit::SecondsPerByte,
        group: Group::Bandwidth,
        better: Better::Lower,
        about: "inverse bandwidth β of the same fits per collective kind and group role",
        needs: &[CollSizes, TwoRanks],
        compute: roles::hockney_beta_by_role,
    },
    Metric {
        name: "hockney_residual_by_role_s",
        unit: Unit::Seconds,
        group: Group::Bandwidth,
        better: Better::Neither,
        about: "root mean square residual of the same fits: how far single transfers stray from the line",
        needs: &[CollSizes, TwoRanks],
        compute: roles::hockney_residual_by_role,
    },
    Metric {
        name: "achieved_flops_from_trace_json",
        unit: Unit::FlopPerS,
        group: Group::Throughput,
        better: Better::Higher,
        about: "sum over ranks of the rank's `flops` args / its wall time (aggregate FLOP/s)",
        needs: &[Flops],
        compute: flops::achieved_flops_from_trace_json,
    },
    Metric {
        name: "total_model_flops_from_args",
        unit: Unit::Flop,
        group: Group::Throughput,
        better: Better::Neither,
        about: "sum of `flops` args of CPU ops over all ranks",
        needs: &[Flops],
        compute: flops::total_model_flops_from_args,
    },
    Metric {
        name: "flops_per_token_used",
        unit: Unit::FlopPerToken,
        group: Group::Throughput,
        better: Better::Neither,
        about: "6 x model parameters for training, 2 x for inference (card phase)",
        needs: &[ModelParams],
        compute: flops::flops_per_token_used,
    },
    Metric {
        name: "estimated_total_tokens",
        unit: Unit::Tokens,
        group: Group::Throughput,
        better: Better::Neither,
        about: "total_model_flops_from_args / flops_per_token_used",
        needs: &[Flops, ModelParams],
        compute: flops::estimated_total_tokens,
    },
    Metric {
        name: "estimated_throughput_tokens_per_s",
        unit: Unit::TokensPerS,
        group: Group::Throughput,
        better: Better::Higher,
        about: "estimated_total_tokens / wall_time_s",
        needs: &[Flops, ModelParams],
        compute: flops::estimated_throughput,
    },
    Metric {
        name: "throughput",
        unit: Unit::TokensPerS,
        group: Group::Throughput,
        better: Better::Higher,
        about: "same as estimated_throughput_tokens_per_s (CCL-Bench's short name)",
        needs: &[Flops, ModelParams],
        compute: flops::estimated_throughput,
    },
    // Leaderboard set.
    Metric {
        name: "mfu",
        unit: Unit::Percent,
        group: Group::Throughput,
        better: Better::Higher,
        about: "model FLOPs per step (6 or 2 x params x card batch x seq) / mean step time / (peak FLOP/s of the GPU model at the card's precision x devices) x 100",
        needs: &[Steps, Card, ModelParams],
        compute: flops::mfu,
    },
    Metric {
        name: "tokens_per_s",
        unit: Unit::TokensPerS,
        group: Group::Throughput,
        better: Better::Higher,
        about: "card batch_size x seq_len (the job's tokens per step) / mean step time",
        needs: &[Steps, Card],
        compute: flops::tokens_per_s,
    },
    Metric {
        name: "ttft",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Lower,
        about: "time to first token: the first prefill engine step (vLLM execute_context_N>0, SGLang step[PREFILL]) on rank 0",
        needs: &[EngineSteps],
        compute: phases::ttft,
    },
    Metric {
        name: "tpot",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Lower,
        about: "time per output token: mean decode engine step after the first prefill, rank 0",
        needs: &[EngineSteps],
        compute: phases::tpot,
    },
    Metric {
        name: "bandwidth_utilization_allgather_group_6",
        unit: Unit::GBps,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "all-gather bus bandwidth: sum of S x (n-1)/n / sum of time, S = gathered output bytes, n = group size (nccl-tests busbw)",
        needs: &[CollSizes],
        compute: collectives::bw_allgather,
    },
    Metric {
        name: "bandwidth_utilization_allreduce_group_6",
        unit: Unit::GBps,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "all-reduce bus bandwidth: sum of S x 2(n-1)/n / sum of time, S = message bytes",
        needs: &[CollSizes],
        compute: collectives::bw_allreduce,
    },
    Metric {
        name: "bandwidth_utilization_alltoall_group_6",
        unit: Unit::GBps,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "all-to-all bus bandwidth: sum of S x (n-1)/n / sum of time, S = message bytes",
        needs: &[CollSizes],
        compute: collectives::bw_alltoall,
    },
    Metric {
        name: "bandwidth_utilization_reducescatter_group_6",
        unit: Unit::GBps,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "reduce-scatter bus bandwidth: sum of S x (n-1)/n / sum of time, S = input bytes",
        needs: &[CollSizes],
        compute: collectives::bw_reducescatter,
    },
    Metric {
        name: "bandwidth_utilization_peertopeer_group_6",
        unit: Unit::Percent,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "send/recv bytes / time as % of the card's link bandwidth (scale-up within a node, else scale-out)",
        needs: &[CollSizes, Card],
        compute: collectives::bw_peertopeer,
    },
    Metric {
        name: "collective_vol_allgather_gb",
        unit: Unit::GB,
        group: Group::Communication,
        better: Better::Neither,
        about: "all-gather message bytes sent per step on rank 0 (or --rank), ops launched in steps / steps; without sizes in the profiler trace, from the execution trace (one iteration)",
        needs: &[CollSizes],
        compute: collectives::vol_allgather,
    },
    Metric {
        name: "collective_vol_allreduce_gb",
        unit: Unit::GB,
        group: Group::Communication,
        better: Better::Neither,
        about: "all-reduce message bytes per step on rank 0 (or --rank); without sizes in the profiler trace, from the execution trace (one iteration)",
        needs: &[CollSizes],
        compute: collectives::vol_allreduce,
    },
    Metric {
        name: "collective_vol_alltoall_gb",
        unit: Unit::GB,
        group: Group::Communication,
        better: Better::Neither,
        about: "all-to-all message bytes per step on rank 0 (or --rank); without sizes in the profiler trace, from the execution trace (one iteration)",
        needs: &[CollSizes],
        compute: collectives::vol_alltoall,
    },
    Metric {
        name: "collective_vol_reducescatter_gb",
        unit: Unit::GB,
        group: Group::Communication,
        better: Better::Neither,
        about: "reduce-scatter message bytes per step on rank 0 (or --rank); without sizes in the profiler trace, from the execution trace (one iteration)",
        needs: &[CollSizes],
        compute: collectives::vol_reducescatter,
    },
    Metric {
        name: "collective_vol_total_gb",
        unit: Unit::GB,
        group: Group::Communication,
        better: Better::Neither,
        about: "message bytes of every collective per step on rank 0 (or --rank); without sizes in the profiler trace, from the execution trace (one iteration)",
        needs: &[CollSizes],
        compute: collectives::vol_total,
    },
    Metric {
        name: "compute_comm_overlap",
        unit: Unit::Percent,
        group: Group::Communication,
        better: Better::Higher,
        about: "communication kernels under compute kernels / communication kernels x 100, within the measured steps' CPU ranges (ProfilerStep; with 3 or more steps the first and last left out, as CCL-Bench does; each kernel clipped to them), the whole trace without steps; per rank, averaged over ranks with communication. communication_overlap_ratio is the same over the whole trace, copies included",
        needs: &[CommKernels],
        compute: comm::compute_comm_overlap,
    },
    Metric {
        name: "exposed_comm_time_s",
        unit: Unit::Seconds,
        group: Group::Communication,
        better: Better::Lower,
        about: "communication not overlapped by compute (comm - comm ∩ compute) per step, per rank, averaged",
        needs: &[CommKernels],
        compute: balance::exposed_comm_time,
    },
    Metric {
        name: "straggler",
        unit: Unit::Ratio,
        group: Group::Balance,
        better: Better::Lower,
        about: "CCL-Bench's straggler delay: (max - min) / max of the ranks' summed NCCL kernel time (ncclDevKernel_*, ncclKernel_*) over the whole trace, over the ranks that have any; 0 when all spend the same time in NCCL. A coarse imbalance figure: who the others wait for is straggler_wait_share / slowest_rank",
        needs: &[CommKernels, TwoRanks],
        compute: ccl_names::straggler,
    },
    Metric {
        name: "straggler_metrics",
        unit: Unit::Ratio,
        group: Group::Balance,
        better: Better::Lower,
        about: "CCL-Bench's straggler figures: the delay (as straggler) and, as part `slowdown`, max / min of the ranks' NCCL kernel time; --metric prints both lines as CCL-Bench does",
        needs: &[CommKernels, TwoRanks],
        compute: ccl_names::straggler_metrics,
    },
    Metric {
        name: "straggler_wait_share",
        unit: Unit::Ratio,
        group: Group::Balance,
        better: Better::Lower,
        about: "1 + the waiting the straggler (or the ranks late together) causes per step per other rank at collectives matched across ranks / the step time. Each member's wait at a collective (until the last member starts, at most its op) is shared by the members still absent over each stretch of it (Shapley split), so ranks late together share the blame; the late set is the ranks charged at least half what the most-charged one is. Without matched collectives: the busiest rank's work (busy - exposed comm) / the median's. 1 when the ranks' mean wait is within noise (2 % of the step and 10 us) or the blame is spread over most ranks; not applicable (unknown) with fewer ranks than the world size or clocks too uncertain to apply",
        needs: &[Kernels, TwoRanks],
        compute: balance::straggler,
    },
    Metric {
        name: "slowest_rank",
        unit: Unit::Rank,
        group: Group::Balance,
        better: Better::Neither,
        about: "the straggler's rank number (see straggler_wait_share: the rank charged most of the others' waiting at collectives, first of its late set; without matched collectives the busiest); not applicable when no rank stands out or the verdict is unknown (the reason then gives the work-based comparison)",
        needs: &[Kernels, TwoRanks],
        compute: balance::slowest_rank,
    },
    Metric {
        name: "step_time_std_s",
        unit: Unit::Seconds,
        group: Group::Balance,
        better: Better::Lower,
        about: "population standard deviation of ProfilerStep durations over the measured steps of all ranks",
        needs: &[Steps],
        compute: balance::step_time_std,
    },
    Metric {
        name: "sync_wait_time_s",
        unit: Unit::Seconds,
        group: Group::Balance,
        better: Better::Lower,
        about: "max - min over ranks of exposed communication per step: time the fastest rank waits for the others",
        needs: &[CommKernels, TwoRanks],
        compute: balance::sync_wait_time,
    },
    Metric {
        name: "bubble_time_s",
        unit: Unit::Seconds,
        group: Group::Balance,
        better: Better::Lower,
        about: "step time with no device activity (mean step time - busy per step), per rank, averaged",
        needs: &[Steps, Kernels],
        compute: balance::bubble_time,
    },
    Metric {
        name: "cpu_launch_overhead_s",
        unit: Unit::Seconds,
        group: Group::Compute,
        better: Better::Lower,
        about: "CPU time in kernel-launch runtime calls (cudaLaunchKernel, cuLaunchKernel, hip*) per step, per rank, averaged",
        needs: &[Kernels],
        compute: balance::cpu_launch_overhead,
    },
    Metric {
        name: "scale_up_bw_utility",
        unit: Unit::Percent,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "needs a network simulator's link model: always not applicable here",
        needs: &[Simulator],
        compute: balance::scale_up_bw_utility,
    },
    Metric {
        name: "comm_wait_time_s",
        unit: Unit::Seconds,
        group: Group::Balance,
        better: Better::Lower,
        about: "per step, time inside collectives before the last rank of the group has started (aligned clocks; clamped to the op), per rank, averaged",
        needs: &[CommKernels, TwoRanks],
        compute: balance::comm_wait_time,
    },
    Metric {
        name: "comm_transfer_time_s",
        unit: Unit::Seconds,
        group: Group::Balance,
        better: Better::Neither,
        about: "per step, collective time after every rank has started: duration - wait, per rank, averaged",
        needs: &[CommKernels, TwoRanks],
        compute: balance::comm_transfer_time,
    },
    Metric {
        name: "comm_wait_fraction",
        unit: Unit::Percent,
        group: Group::Balance,
        better: Better::Lower,
        about: "wait / (wait + transfer) x 100 over the collectives matched across ranks, per rank, averaged",
        needs: &[CommKernels, TwoRanks],
        compute: balance::comm_wait_fraction,
    },
    Metric {
        name: "comm_time_by_role_s",
        unit: Unit::Seconds,
        group: Group::Communication,
        better: Better::Lower,
        about: "per step, communication kernel time split by the role of its process group (tp, cp, ep, dp, pp, world: from pg_desc, else the card's parallelism, else size and rank stride; `group NAME` when none fits), per rank, averaged; the value is the total_communication_time",
        needs: &[CommKernels],
        compute: roles::comm_time_by_role,
    },
    Metric {
        name: "comm_wait_by_role_s",
        unit: Unit::Seconds,
        group: Group::Balance,
        better: Better::Lower,
        about: "per step, time inside matched collectives before their last member started, split by group role, per rank, averaged; the value is comm_wait_time_s",
        needs: &[CommKernels, TwoRanks],
        compute: roles::comm_wait_by_role,
    },
    Metric {
        name: "busbw_by_role_gbps",
        unit: Unit::GBps,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "bus bandwidth of the transfer (after the last member arrived) of matched collectives, Σ S x bus factor / Σ transfer, split by group role; with --rank, the collectives the rank took part in",
        needs: &[CollSizes, TwoRanks],
        compute: roles::busbw_by_role,
    },
    Metric {
        name: "whatif_no_straggler_step_s",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Neither,
        about: "what-if: mean step time had the late ranks (the straggler, or ranks late together) arrived with the others: each step's matched collectives replayed in order of their last start as barriers, a late member arriving no later than the latest other member, each collective ending at the latest arrival plus each member's transfer and what it gains moving everything after it on that rank; a step saves what its rank's last collective gained, capped at the rank's exposed communication; per rank, averaged; the measured step without a straggler; not applicable when the verdict is unknown",
        needs: &[Steps, CommKernels, TwoRanks],
        compute: whatif::no_straggler_step,
    },
    Metric {
        name: "whatif_full_overlap_step_s",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Neither,
        about: "what-if: mean step time with all communication overlapped by compute: measured step - exposed communication per step, per rank, averaged (the floor of the other what-ifs)",
        needs: &[Steps, CommKernels],
        compute: whatif::full_overlap_step,
    },
    Metric {
        name: "whatif_link_bandwidth_step_s",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Neither,
        about: "what-if: mean step time had every sized matched collective moved its data at the card's link bandwidth: measured step - each member's transfer beyond S x bus factor / link (barrier model, capped at the exposed communication), per rank, averaged",
        needs: &[Steps, CollSizes, Card],
        compute: whatif::link_bandwidth_step,
    },
    // Training phases and FSDP, from record_function ranges.
    Metric {
        name: "forward_time_s",
        unit: Unit::Seconds,
        group: Group::Phases,
        better: Better::Lower,
        about: "union of `forward` ranges (GPU-side when mirrored) per step, per rank, averaged",
        needs: &[Annotations],
        compute: phases::forward_time,
    },
    Metric {
        name: "backward_time_s",
        unit: Unit::Seconds,
        group: Group::Phases,
        better: Better::Lower,
        about: "union of `backward` ranges per step, per rank, averaged",
        needs: &[Annotations],
        compute: phases::backward_time,
    },
    Metric {
        name: "optimizer_time_s",
        unit: Unit::Seconds,
        group: Group::Phases,
        better: Better::Lower,
        about: "union of `optimizer` and `Optimizer.step#*` ranges per step, per rank, averaged",
        needs: &[Annotations],
        compute: phases::optimizer_time,
    },
    Metric {
        name: "forward_fraction",
        unit: Unit::Percent,
        group: Group::Phases,
        better: Better::Neither,
        about: "forward ranges / step time x 100, per rank, averaged",
        needs: &[Annotations],
        compute: phases::forward_fraction,
    },
    Metric {
        name: "backward_fraction",
        unit: Unit::Percent,
        group: Group::Phases,
        better: Better::Neither,
        about: "backward ranges / step time x 100, per rank, averaged",
        needs: &[Annotations],
        compute: phases::backward_fraction,
    },
    Metric {
        name: "optimizer_fraction",
        unit: Unit::Percent,
        group: Group::Phases,
        better: Better::Neither,
        about: "optimizer ranges / step time x 100, per rank, averaged",
        needs: &[Annotations],
        compute: phases::optimizer_fraction,
    },
    Metric {
        name: "fsdp_all_gather_time_s",
        unit: Unit::Seconds,
        group: Group::Phases,
        better: Better::Lower,
        about: "union of FSDP::all_gather ranges (CPU) per step, per rank, averaged",
        needs: &[Annotations],
        compute: phases::fsdp_all_gather_time,
    },
    Metric {
        name: "fsdp_reduce_scatter_time_s",
        unit: Unit::Seconds,
        group: Group::Phases,
        better: Better::Lower,
        about: "union of FSDP::reduce_scatter / FSDP::post_backward_reduce ranges per step, per rank, averaged",
        needs: &[Annotations],
        compute: phases::fsdp_reduce_scatter_time,
    },
    Metric {
        name: "fsdp_copy_in_time_s",
        unit: Unit::Seconds,
        group: Group::Phases,
        better: Better::Lower,
        about: "union of FSDP::*copy_in ranges per step, per rank, averaged",
        needs: &[Annotations],
        compute: phases::fsdp_copy_in_time,
    },
    Metric {
        name: "fsdp_copy_out_time_s",
        unit: Unit::Seconds,
        group: Group::Phases,
        better: Better::Lower,
        about: "union of FSDP::*copy_out ranges per step, per rank, averaged",
        needs: &[Annotations],
        compute: phases::fsdp_copy_out_time,
    },
    Metric {
        name: "total_trace_time",
        unit: Unit::Seconds,
        group: Group::Time,
        better: Better::Neither,
        about: "CCL-Bench's total trace time: first GPU kernel start to last kernel end over every rank (the profiled window's span, all steps)",
        needs: &[Kernels],
        compute: ccl_names::total_trace_time,
    },
    Metric {
        name: "kernel_compute_time_group_6",
        unit: Unit::Seconds,
        group: Group::Compute,
        better: Better::Neither,
        about: "CCL-Bench group 6's kernel compute time: every non-communication kernel's duration summed over the whole trace and over the ranks",
        needs: &[Kernels],
        compute: ccl_names::kernel_compute_time,
    },
    Metric {
        name: "ttft_group_6",
        unit: Unit::Seconds,
        group: Group::Throughput,
        better: Better::Lower,
        about: "CCL-Bench group 6's median TTFT, which it reads from SGLang's bench_results.jsonl, not from a trace: not applicable here (the trace's figure is ttft)",
        needs: &[EngineSteps],
        compute: ccl_names::ttft_group_6,
    },
    Metric {
        name: "tpot_group_6",
        unit: Unit::Seconds,
        group: Group::Throughput,
        better: Better::Lower,
        about: "CCL-Bench group 6's median TPOT, which it reads from SGLang's bench_results.jsonl, not from a trace: not applicable here (the trace's figure is tpot)",
        needs: &[EngineSteps],
        compute: ccl_names::tpot_group_6,
    },
    Metric {
        name: "throughput_group_6",
        unit: Unit::TokensPerS,
        group: Group::Throughput,
        better: Better::Higher,
        about: "CCL-Bench group 6's output tokens per second, which it reads from SGLang's bench_results.jsonl, not from a trace: not applicable here",
        needs: &[EngineSteps],
        compute: ccl_names::throughput_group_6,
    },
    Metric {
        name: "comm_kernel_breakdown_tpu",
        unit: Unit::Seconds,
        group: Group::Communication,
        better: Better::Lower,
        about: "CCL-Bench group 4's communication breakdown of an XLA (TPU/JAX) trace: device time of its collective ops over every device, with one part per kind (CCL-Bench gives the table in us; NCCL traces have none)",
        needs: &[CommKernels],
        compute: ccl_names::comm_kernel_breakdown_tpu,
    },
    Metric {
        name: "estimated_bandwidth",
        unit: Unit::GBps,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "CCL-Bench group 4's estimated bandwidth: XLA ops' bytes_accessed over the trace span; those per-op byte counts are not read here: not applicable",
        needs: &[Kernels],
        compute: ccl_names::estimated_bandwidth,
    },
    Metric {
        name: "traffic_window",
        unit: Unit::Seconds,
        group: Group::Communication,
        better: Better::Lower,
        about: "CCL-Bench group 1's traffic window: NCCL kernel time per iteration per GPU, iterations counted by the first rank's RedistributeBackward ops (1 without), with parts tp, dp, pp, other by its name heuristic (all-reduce inside an iteration mark dp, else tp; broadcast tp; all-gather, reduce-scatter dp; send/recv pp)",
        needs: &[CommKernels],
        compute: ccl_names::traffic_window,
    },
    Metric {
        name: "communication_overhead",
        unit: Unit::Ratio,
        group: Group::Communication,
        better: Better::Lower,
        about: "CCL-Bench group 1's communication overhead: the first rank's NCCL kernel time / all its kernel time (0-1), over the whole trace",
        needs: &[Kernels],
        compute: ccl_names::communication_overhead,
    },
    Metric {
        name: "bandwidth_utilization",
        unit: Unit::Ratio,
        group: Group::Bandwidth,
        better: Better::Higher,
        about: "CCL-Bench group 1's bandwidth utilization: over the first rank's NCCL all-reduce kernels with sizes, the mean of T_exp / T_obs with T_exp = S (n-1)/n / 100 GB/s (its fixed ring model and link)",
        needs: &[CollSizes],
        compute: ccl_names::bandwidth_utilization,
    },
    Metric {
        name: "gpu_step_score",
        unit: Unit::Ratio,
        group: Group::Time,
        better: Better::Higher,
        about: "CCL-Bench's GPU/step score: w G0/G + (1-w) T0/T with G the ranks loaded, T avg_step_time and its defaults G0 = 16, T0 = 0.44 s, w = 0.5 (its gpu_count.txt and gpu_step_score_config.yaml overrides are not read)",
        needs: &[Steps],
        compute: ccl_names::gpu_step_score,
    },
];
/// The README's metric table, generated so it cannot drift from the registry.
pub fn markdown_table() -> String {
    let mut s = String::from("| metric | unit | needs | meaning |\n|---|---|---|---|\n");
    for m in METRICS {
        let needs: Vec<&str> = m.needs.iter().map(|n| n.describe()).collect();
        s += &format!(
            "| `{}` | {} | {} | {} |\n",
            m.name,
            m.unit.symbol(),
            needs.join(", "),
            m.about.replace('|', "\\|")
        );
    }
    s
}

/// Every metric of [`METRICS`], in order, evaluated in parallel: each is a pass
/// over all ops, and on a large trace they cost as much as a fifth of loading.
pub fn eval_all(ctx: &Ctx) -> Vec<Outcome> {
    // The shared caches are filled first: a job waiting for a cache that another
    // job fills with rayon can be run by the filling thread itself (a deadlock).
    // Those that pass over every rank's collectives take longest on a large
    // run: started first, each its own job, so that the last to finish does
    // not run alone while the other cores wait (the no-straggler replay, a
    // tenth of a first open of 64 ranks of collectives, finished last).
    let first = |m: &Metric| {
        if m.needs.contains(&TwoRanks) {
            0
        } else if m.needs.iter().any(|n| matches!(n, CommKernels | CollSizes)) {
            1
        } else {
            2
        }
    };
    let mut order: Vec<usize> = (0..METRICS.len()).collect();
    order.sort_by_key(|&i| first(&METRICS[i]));
    let mut out: Vec<(usize, Outcome)> = order
        .into_par_iter()
        .with_max_len(1)
        .map(|i| (i, METRICS[i].eval(ctx)))
        .collect();
    out.sort_by_key(|o| o.0);
    out.into_iter().map(|o| o.1).collect()
}

pub fn find(name: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.name == name)
}

/// A name that is no metric, and the names closest to it: what the command
/// line, `compare` and the Python package all say of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownMetric {
    pub name: String,
    pub close: Vec<&'static str>,
}

impl std::fmt::Display for UnknownMetric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "unknown metric '{}'", self.name)?;
        if !self.close.is_empty() {
            write!(f, "; did you mean {}?", self.close.join(", "))?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownMetric {}

impl UnknownMetric {
    fn of(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            close: suggest(name),
        }
    }
}

/// The metric called `name`, or why there is none.
pub fn lookup(name: &str) -> Result<&'static Metric, UnknownMetric> {
    find(name).ok_or_else(|| UnknownMetric::of(name))
}

/// The metric or breakdown part called `name` (see [`find_part`]), or why
/// there is none.
pub fn lookup_part(name: &str) -> Result<(&'static Metric, Option<&str>), UnknownMetric> {
    find_part(name).ok_or_else(|| UnknownMetric::of(name))
}

/// A metric, or one part of its breakdown as CSV names it
/// (`comm_time_by_role_s.tp`, `hockney_alpha_by_role_s.all_reduce_dp`).
pub(crate) fn find_part(name: &str) -> Option<(&'static Metric, Option<&str>)> {
    if let Some(m) = find(name) {
        return Some((m, None));
    }
    let (metric, part) = name.split_once('.')?;
    Some((find(metric)?, Some(part)))
}

/// The part of `out` called `part` (spaces written as `_`), as its own outcome.
pub fn part_of(out: Outcome, part: &str) -> Outcome {
    let Outcome::Value(m) = out else {
        return out;
    };
    match m.parts.iter().find(|p| p.0.replace(' ', "_") == part) {
        Some(&(_, v)) => Outcome::value(v),
        None => {
            let have: Vec<String> = m.parts.iter().map(|p| p.0.replace(' ', "_")).collect();
            Outcome::na(if have.is_empty() {
                format!("no part {part}: the metric has no breakdown here")
            } else {
                format!("no part {part} here; parts: {}", have.join(", "))
            })
        }
    }
}

/// Metric names close to a mistyped one, closest first.
pub(crate) fn suggest(name: &str) -> Vec<&'static str> {
    let mut scored: Vec<(f64, &str)> = METRICS
        .iter()
        .map(|m| {
            let sim = strsim::jaro_winkler(name, m.name);
            let contains = m.name.contains(name) || name.contains(m.name);
            (if contains { sim + 1.0 } else { sim }, m.name)
        })
        .filter(|(s, _)| *s > 0.75)
        .collect();
    scored.sort_by(|a, b| b.0.total_cmp(&a.0));
    scored.into_iter().take(5).map(|(_, n)| n).collect()
}

/// Helpers for tests (this crate's and the application's): traces from
/// `synth`, loaded through the real Kineto reader, and metrics evaluated on
/// them.
pub mod testing {
    use crate::model::Trace;
    use crate::read::kineto;
    use crate::synth::RankTrace;

    pub fn trace(ranks: &[RankTrace]) -> Trace {
        let mut trace = Trace::default();
        for r in ranks {
            let text = r.to_json();
            let f = kineto::read(text.as_bytes(), "synthetic.json".as_ref())
                .expect("synthetic trace loads");
            let mut t = f.timeline;
            t.rank = f.dist_rank.unwrap_or(0);
            trace.ranks.push(t);
        }
        trace
    }

    /// The sample workload card attached to `trace`.
    #[cfg(test)]
    pub(crate) fn with_card(trace: &mut Trace) {
        trace.card = Some(
            crate::read::card::parse(crate::synth::SAMPLE_CARD, "card.yaml".as_ref())
                .expect("sample card parses"),
        );
    }

    /// The value of `metric` with command-line options.
    #[cfg(test)]
    pub(crate) fn eval_with(trace: &Trace, metric: &str, opts: super::Options) -> super::Outcome {
        let ctx = super::Ctx::new(trace, None)
            .expect("all ranks")
            .with_options(opts);
        super::find(metric).expect("metric exists").eval(&ctx)
    }

    /// The value of `metric` on `trace`, over all ranks or one.
    pub(crate) fn eval(trace: &Trace, metric: &str, rank: Option<u32>) -> super::Outcome {
        let ctx = super::Ctx::new(trace, rank).expect("rank exists");
        super::find(metric).expect("metric exists").eval(&ctx)
    }

    pub fn value(trace: &Trace, metric: &str, rank: Option<u32>) -> f64 {
        match eval(trace, metric, rank) {
            super::Outcome::Value(m) => m.value,
            super::Outcome::NotApplicable(why) => panic!("{metric} not applicable: {why}"),
        }
    }

    #[cfg(test)]
    pub(crate) fn assert_close(got: f64, want: f64) {
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "got {got}, want {want}"
        );
    }
}

#[cfg(test)]
mod invariants;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_name_says_so_with_the_closest_names() {
        let Err(e) = lookup("avg_step_tme") else {
            panic!("a misspelt name is no metric")
        };
        assert_eq!(e.close.first(), Some(&"avg_step_time"));
        assert!(
            e.to_string()
                .starts_with("unknown metric 'avg_step_tme'; did you mean avg_step_time"),
            "{e}"
        );
        let Err(e) = lookup_part("zzzz") else {
            panic!("zzzz is no metric")
        };
        assert_eq!(e.to_string(), "unknown metric 'zzzz'");
        assert_eq!(
            lookup_part("comm_time_by_role_s.tp").map(|(_, part)| part),
            Ok(Some("tp"))
        );
        // A part is not a metric of its own where only whole metrics go.
        assert!(lookup("comm_time_by_role_s.tp").is_err());
    }

    #[test]
    fn parallel_evaluation_matches_one_at_a_time() {
        // A straggler run with collectives, steps and a card: most metrics apply.
        let mut trace = testing::trace(&crate::synth::training_run(&crate::synth::RunShape {
            ranks: 4,
            straggler: Some(2),
            ..Default::default()
        }));
        testing::with_card(&mut trace);
        let ctx = Ctx::new(&trace, None).unwrap();
        let one_by_one: Vec<Outcome> = METRICS.iter().map(|m| m.eval(&ctx)).collect();
        let fresh = Ctx::new(&trace, None).unwrap();
        let parallel = eval_all(&fresh);
        assert_eq!(parallel, one_by_one);
        assert!(parallel.iter().filter(|o| o.as_value().is_some()).count() > 40);
    }

    #[test]
    fn names_are_unique_and_documented() {
        let mut names: Vec<_> = METRICS.iter().map(|m| m.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate metric names");
        for m in METRICS {
            assert!(!m.about.is_empty(), "{} has no description", m.name);
            assert!(
                !m.about.contains('\n'),
                "{}: description must be one line",
                m.name
            );
        }
    }

    #[test]
    fn suggestions_for_typos() {
        assert_eq!(suggest("comunication_ratio")[0], "communication_ratio");
        assert!(suggest("overlap").contains(&"communication_overlap_ratio"));
        assert!(suggest("zzzz").is_empty());
    }
}
