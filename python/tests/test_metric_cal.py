"""`metric_cal` returns CCL-Bench's family results with every documented key."""

import pytest

import ccl_bench
from conftest import SAMPLE, corpus

#: The quantities of each family of CCL-Bench's profile-trace guide, by metric name.
DOCUMENTED = {
    "throughput": ["avg_step_time", "tokens_per_s", "throughput", "estimated_throughput_tokens_per_s", "mfu", "ttft", "tpot", "wall_time_s", "achieved_flops_from_trace_json"],
    "communication": [
        "total_communication_time", "communication_fraction", "communication_ratio", "coll_call_num",
        "num_comm_kernels", "total_comm_time_s", "avg_comm_kernel_time_s", "allreduce_comm_time_s",
        "avg_comm_bandwidth_GBps", "collective_vol_allreduce_gb", "collective_vol_allgather_gb",
        "collective_vol_reducescatter_gb", "collective_vol_alltoall_gb", "collective_vol_total_gb",
        "bandwidth_utilization_allreduce_group_6", "bandwidth_utilization_allgather_group_6",
        "bandwidth_utilization_reducescatter_group_6", "bandwidth_utilization_alltoall_group_6",
        "bandwidth_utilization_peertopeer_group_6", "hockney_alpha_s", "hockney_beta_s_per_byte",
        "comm_wait_time_s", "comm_transfer_time_s", "comm_wait_fraction",
    ],
    "memory": ["peak_memory_allocated_gb", "peak_memory_reserved_gb", "memory_fragmentation", "memory_allocation_efficiency", "memory_alloc_count", "average_memory_bandwidth", "memory_transfer_overhead"],
    "overlap": ["communication_overlap_ratio", "compute_comm_overlap", "exposed_comm_time_s", "bubble_time_s"],
    "training_phases": ["forward_time_s", "backward_time_s", "optimizer_time_s", "forward_fraction", "backward_fraction", "optimizer_fraction"],
    "fsdp": ["fsdp_all_gather_time_s", "fsdp_reduce_scatter_time_s", "fsdp_copy_in_time_s", "fsdp_copy_out_time_s"],
    "straggler": ["straggler", "straggler_metrics", "straggler_wait_share", "slowest_rank", "load_imbalance_ratio", "step_time_std_s", "sync_wait_time_s", "comm_wait_time_s"],
    "kernel": ["total_kernel_time", "break_down_steps", "dominant_kernel_concentration", "moe_fraction", "unclassified_fraction", "compute_bound_fraction", "memory_bound_fraction", "cpu_launch_overhead_s"],
    "gpu_utilization": ["aggregate_gpu_utilization", "compute_utilization_proxy", "mean_sm_coverage", "total_compute_time_s", "total_comm_time_s", "wall_time_s"],
}
COMMON = ["units", "not_applicable", "ranks", "trace_dir"]


def test_every_family_has_every_documented_key():
    assert set(ccl_bench.FAMILIES) == set(DOCUMENTED)
    out = ccl_bench.metric_cal(str(SAMPLE))
    run = ccl_bench.load(SAMPLE)
    for family, keys in DOCUMENTED.items():
        got = out[family]
        for k in keys + COMMON:
            assert k in got, f"{family} lacks {k}"
        for k in keys:
            assert got[k] == run.metric(k), (family, k)
            assert got["units"][k]
            if got[k] is None:
                assert got["not_applicable"][k] == run.why(k)
        assert got["ranks"] == run.rank_ids


def test_one_family_and_per_rank_values():
    out = ccl_bench.metric_cal(SAMPLE, family="communication")
    assert set(out["communication_fraction_per_rank"]) == set(range(8))
    assert out == ccl_bench.metric_cal(SAMPLE)["communication"]
    kernel = ccl_bench.metric_cal(SAMPLE, family="kernel")
    assert set(kernel["break_down_steps_terms"]) >= {"communication", "gemm", "memory"}


def test_memory_family_reads_snapshots():
    d = corpus("memory/h100_tiny_transformer")
    mem = ccl_bench.metric_cal(d, family="memory")
    assert mem["peak_memory_allocated_gb"] > 0


def test_profile_mode_and_card():
    with pytest.raises(ccl_bench.TraceError, match="profile_mode 'nsys'"):
        ccl_bench.metric_cal(SAMPLE, profile_mode="nsys")
    assert ccl_bench.metric_cal(SAMPLE, profile_mode="torch", family="fsdp")
    with pytest.raises(ValueError, match="profile_mode"):
        ccl_bench.metric_cal(SAMPLE, profile_mode="bogus")
    card = next(SAMPLE.glob("*.yaml"))
    with_card = ccl_bench.metric_cal(corpus("kineto/dlrm_8rank_v100"), workload_card_path=card, family="throughput")
    assert with_card["tokens_per_s"] is not None


def test_per_metric_tool_returns_minus_one():
    assert ccl_bench.metric_value(SAMPLE, "peak_memory_allocated_gb") == -1
    assert ccl_bench.metric_value(SAMPLE, "communication_fraction") > 0
