//! A large, realistic rank file streamed event by event (no document is built in
//! memory), for benchmarks: per step and layer, CPU ops with launches, compute
//! kernels, NCCL collectives with their arguments and flow events, on two
//! streams, laid out as the PyTorch profiler writes them (or one event per line).

use std::fmt;
use std::io::{self, Write};

/// Counts bytes so a rank stops near its share of the total (uncompressed).
struct Counted<'a, W: Write> {
    w: &'a mut W,
    n: u64,
}

impl<W: Write> Write for Counted<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let k = self.w.write(buf)?;
        self.n += k as u64;
        Ok(k)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

const KERNELS: [(&str, f64); 5] = [
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas", 310.0),
    ("void flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false>(flash::Flash_fwd_params)", 240.0),
    ("triton_red_fused__to_copy_add_mean_mul_pow_rsqrt_0", 41.0),
    ("void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#8}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::silu_kernel(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#8}::operator()() const::{lambda(c10::BFloat16)#1}, at::detail::Array<char*, 2>)", 28.0),
    ("sm90_xmma_gemm_bf16bf16_bf16f32_f32_nt_n_tilesize128x256x64warpgroupsize2x1x1_execute_segment_k_off_kernel__5x_cublas", 590.0),
];

/// How events are laid out in the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// As the PyTorch profiler (libkineto) writes them: an event over several
    /// lines, its args on lines of their own.
    Kineto,
    /// One event per line, as other Chrome-trace writers do.
    Lines,
}

/// Writes one event from its fields: `fields` and `more` (each a list of
/// `"key": value` pairs) and `args` (the pairs inside `"args"`, if any).
fn event<W: Write>(
    w: &mut W,
    layout: Layout,
    fields: fmt::Arguments,
    more: fmt::Arguments,
    args: Option<fmt::Arguments>,
) -> io::Result<()> {
    match (layout, args) {
        (Layout::Kineto, Some(a)) => write!(
            w,
            "  {{\n    {fields},\n    {more},\n    \"args\": {{\n      {a}\n    }}\n  }}"
        ),
        (Layout::Kineto, None) => write!(w, "  {{\n    {fields},\n    {more}\n  }}"),
        (Layout::Lines, Some(a)) => write!(w, "  {{{fields}, {more}, \"args\": {{{a}}}}}"),
        (Layout::Lines, None) => write!(w, "  {{{fields}, {more}}}"),
    }
}

/// What a rank's layers launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mix {
    /// Five compute kernels and a collective per layer.
    Training,
    /// The collectives alone, timed as in `Training` (the compute they wait
    /// for left out): a run as the cross-rank figures see it, their memory
    /// at its largest for the file's size.
    Collectives,
}

/// Writes rank `rank` of `ranks` with about `bytes` bytes of events. Kernel
/// times differ a little between ranks, but every layer starts at the same time
/// on all of them (the collectives synchronize them), so the ranks' clocks agree.
pub fn write_rank<W: Write>(
    w: &mut W,
    layout: Layout,
    rank: u32,
    ranks: u32,
    bytes: u64,
    mix: Mix,
) -> io::Result<()> {
    write_rank_in_groups(w, layout, rank, ranks, bytes, mix, ranks)
}

/// [`write_rank`] with the collectives issued in process groups of `group`
/// consecutive ranks (group `rank / group`, named by that number), as
/// tensor-parallel groups of 8 are: a collective per `group` communication
/// ops, where one group of every rank has a collective per `ranks`.
pub fn write_rank_in_groups<W: Write>(
    w: &mut W,
    layout: Layout,
    rank: u32,
    ranks: u32,
    bytes: u64,
    mix: Mix,
    group: u32,
) -> io::Result<()> {
    let group = group.clamp(1, ranks.max(1));
    let (pg, first_rank) = (rank / group, rank / group * group);
    let mut w = Counted { w, n: 0 };
    write!(
        w,
        "{{\n  \"schemaVersion\": 1,\n  \"deviceProperties\": [{{\"id\": 0, \"name\": \"NVIDIA H100 80GB HBM3\", \"numSms\": 132}}],\n  \"distributedInfo\": {{\"backend\": \"nccl\", \"rank\": {rank}, \"world_size\": {ranks}}},\n  \"traceEvents\": [\n"
    )?;
    let (mut cpu, mut layer_start, mut corr) = (1_000_000.0f64, 1_000_100.0f64, 1u64);
    let mut step = 0u32;
    let mut first = true;
    let mut sep = |w: &mut Counted<W>| -> io::Result<()> {
        if first {
            first = false;
            Ok(())
        } else {
            w.write_all(b",\n")
        }
    };
    while w.n < bytes {
        step += 1;
        let step_start = cpu;
        for layer in 0..32u32 {
            // This rank's kernels, each up to 1 % slower than on the fastest
            // rank; the layer's time is the slowest rank's.
            let mut gpu = layer_start;
            let mut slowest = layer_start;
            for (i, (name, dur)) in KERNELS.iter().enumerate() {
                let d = dur * (1.0 + 0.001 * f64::from((rank * 7 + layer * 3 + i as u32) % 11));
                // Where this kernel runs (written or not).
                let at = gpu;
                gpu += d + 2.0;
                slowest += dur * 1.01 + 2.0;
                if mix == Mix::Collectives {
                    continue;
                }
                sep(&mut w)?;
                event(
                    &mut w,
                    layout,
                    format_args!("\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"aten::mm\", \"pid\": 1, \"tid\": 1"),
                    format_args!("\"ts\": {cpu:.3}, \"dur\": 6.125"),
                    Some(format_args!("\"External id\": {corr}, \"Record function id\": 0, \"Sequence number\": {corr}, \"Fwd thread id\": 0, \"Ev Idx\": {corr}")),
                )?;
                sep(&mut w)?;
                event(
                    &mut w,
                    layout,
                    format_args!("\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernel\", \"pid\": 1, \"tid\": 1"),
                    format_args!("\"ts\": {:.3}, \"dur\": 3.5", cpu + 1.0),
                    Some(format_args!("\"External id\": {corr}, \"cbid\": 211, \"correlation\": {corr}")),
                )?;
                sep(&mut w)?;
                event(
                    &mut w,
                    layout,
                    format_args!("\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{name}\", \"pid\": 0, \"tid\": 7"),
                    format_args!("\"ts\": {at:.3}, \"dur\": {d:.3}"),
                    Some(format_args!("\"External id\": {corr}, \"queued\": 0, \"device\": 0, \"context\": 1, \"stream\": 7, \"correlation\": {corr}, \"registers per thread\": 168, \"shared memory\": 232448, \"blocks per SM\": 1.0, \"warps per SM\": 12.0, \"grid\": [132, 1, 1], \"block\": [384, 1, 1], \"est. achieved occupancy %\": 0")),
                )?;
                sep(&mut w)?;
                event(
                    &mut w,
                    layout,
                    format_args!(
                        "\"ph\": \"f\", \"id\": {corr}, \"pid\": 0, \"tid\": 7, \"ts\": {at:.3}"
                    ),
                    format_args!("\"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\""),
                    None,
                )?;
                cpu += 12.0;
                corr += 1;
            }
            let (coll, kernel, d) = if layer % 2 == 0 {
                (
                    "_allgather_base",
                    "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
                    180.0,
                )
            } else {
                ("_reduce_scatter_base", "ncclDevKernel_ReduceScatter_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", 230.0)
            };
            sep(&mut w)?;
            event(
                &mut w,
                layout,
                format_args!("\"ph\": \"X\", \"cat\": \"cuda_runtime\", \"name\": \"cudaLaunchKernelExC\", \"pid\": 1, \"tid\": 1"),
                format_args!("\"ts\": {cpu:.3}, \"dur\": 4.0"),
                Some(format_args!("\"External id\": {corr}, \"correlation\": {corr}")),
            )?;
            // Each rank joins the collective when it gets there; all leave together.
            let (join, leave) = (gpu - 500.0, slowest - 500.0 + d);
            sep(&mut w)?;
            event(
                &mut w,
                layout,
                format_args!("\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"{kernel}\", \"pid\": 0, \"tid\": 20"),
                format_args!("\"ts\": {join:.3}, \"dur\": {:.3}", leave - join),
                Some(format_args!("\"External id\": {corr}, \"device\": 0, \"stream\": 20, \"correlation\": {corr}, \"grid\": [16, 1, 1], \"block\": [512, 1, 1], \"Collective name\": \"{coll}\", \"In msg nelems\": 2097152, \"Out msg nelems\": {}, \"Group size\": {group}, \"dtype\": \"BFloat16\", \"Process Group Name\": \"{pg}\", \"Process Group Ranks\": \"[{first_rank}, ..., {}]\"", 2_097_152 * u64::from(group), first_rank + group - 1)),
            )?;
            cpu += 6.0;
            corr += 1;
            layer_start = slowest;
        }
        // With collectives alone the step ends when the device is done (a
        // sync, as an optimizer step waits): the launches alone take a few
        // µs, against the device's milliseconds, and exposed communication
        // per step would exceed the step. (`Training` keeps the layout its
        // measured sets were made with.)
        let step_end = match mix {
            Mix::Training => cpu,
            Mix::Collectives => cpu.max(layer_start),
        };
        sep(&mut w)?;
        event(
            &mut w,
            layout,
            format_args!("\"ph\": \"X\", \"cat\": \"user_annotation\", \"name\": \"ProfilerStep#{step}\", \"pid\": 1, \"tid\": 1"),
            format_args!("\"ts\": {step_start:.3}, \"dur\": {:.3}", step_end - step_start),
            Some(format_args!("\"External id\": {corr}")),
        )?;
        corr += 1;
        cpu = cpu.max(layer_start) + 50.0;
        layer_start = cpu + 100.0;
    }
    w.write_all(b"\n  ],\n  \"traceName\": \"bench\"\n}\n")
}
