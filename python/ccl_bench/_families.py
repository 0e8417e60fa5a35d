"""CCL-Bench's family tools as one call: ``metric_cal`` returns, per family of
the profile-trace guide, the family's quantities by metric name.

Result structure of one family (``metric_cal(..., family="communication")``)::

    {
      "<metric>": value,                  # float in the metric's unit, None when it does not apply
      "<metric>_per_rank": {rank: value}, # where the metric is computed per rank
      "<metric>_terms": {label: value},   # where it has parts (classes, collective kinds)
      "units": {"<metric>": "s" | "%" | ...},
      "not_applicable": {"<metric>": "why"},
      "ranks": [0, 1, ...],
      "trace_dir": "...",
    }

Without ``family`` the result is ``{family: that dict}`` for every family.
"""

from __future__ import annotations

import os
from typing import Any, Dict, List, Optional

#: The families of CCL-Bench's profile-trace guide and the metrics each holds.
FAMILIES: Dict[str, List[str]] = {
    "throughput": [
        "avg_step_time",
        "tokens_per_s",
        "throughput",
        "estimated_throughput_tokens_per_s",
        "mfu",
        "ttft",
        "tpot",
        "wall_time_s",
        "achieved_flops_from_trace_json",
    ],
    "communication": [
        "total_communication_time",
        "communication_fraction",
        "communication_ratio",
        "coll_call_num",
        "num_comm_kernels",
        "total_comm_time_s",
        "avg_comm_kernel_time_s",
        "allreduce_comm_time_s",
        "avg_comm_bandwidth_GBps",
        "collective_vol_allreduce_gb",
        "collective_vol_allgather_gb",
        "collective_vol_reducescatter_gb",
        "collective_vol_alltoall_gb",
        "collective_vol_total_gb",
        "bandwidth_utilization_allreduce_group_6",
        "bandwidth_utilization_allgather_group_6",
        "bandwidth_utilization_reducescatter_group_6",
        "bandwidth_utilization_alltoall_group_6",
        "bandwidth_utilization_peertopeer_group_6",
        "hockney_alpha_s",
        "hockney_beta_s_per_byte",
        "comm_wait_time_s",
        "comm_transfer_time_s",
        "comm_wait_fraction",
    ],
    "memory": [
        "peak_memory_allocated_gb",
        "peak_memory_reserved_gb",
        "memory_fragmentation",
        "memory_allocation_efficiency",
        "memory_alloc_count",
        "average_memory_bandwidth",
        "memory_transfer_overhead",
    ],
    "overlap": [
        "communication_overlap_ratio",
        "compute_comm_overlap",
        "exposed_comm_time_s",
        "bubble_time_s",
    ],
    "training_phases": [
        "forward_time_s",
        "backward_time_s",
        "optimizer_time_s",
        "forward_fraction",
        "backward_fraction",
        "optimizer_fraction",
    ],
    "fsdp": [
        "fsdp_all_gather_time_s",
        "fsdp_reduce_scatter_time_s",
        "fsdp_copy_in_time_s",
        "fsdp_copy_out_time_s",
    ],
    "straggler": [
        "straggler",
        "straggler_metrics",
        "straggler_wait_share",
        "slowest_rank",
        "load_imbalance_ratio",
        "step_time_std_s",
        "sync_wait_time_s",
        "comm_wait_time_s",
    ],
    "kernel": [
        "total_kernel_time",
        "break_down_steps",
        "dominant_kernel_concentration",
        "moe_fraction",
        "unclassified_fraction",
        "compute_bound_fraction",
        "memory_bound_fraction",
        "cpu_launch_overhead_s",
    ],
    "gpu_utilization": [
        "aggregate_gpu_utilization",
        "compute_utilization_proxy",
        "mean_sm_coverage",
        "total_compute_time_s",
        "total_comm_time_s",
        "wall_time_s",
    ],
}

#: profile_mode -> the source format it asks for ("auto": whatever is there).
_MODES = {
    "auto": None,
    "torch": "pytorch",
    "kineto": "pytorch",
    "json": "pytorch",
    "nsys": "nsys",
    "tpu": "xla",
    "json_tpu": "xla",
    "xla": "xla",
}


def _family(metrics: Dict[str, Dict[str, Any]], names: List[str], run: Any) -> Dict[str, Any]:
    out: Dict[str, Any] = {}
    units: Dict[str, str] = {}
    na: Dict[str, str] = {}
    for name in names:
        m = metrics[name]
        out[name] = m["value"]
        units[name] = m["unit"]
        if m["not_applicable"] is not None:
            na[name] = m["not_applicable"]
        if m["per_rank"]:
            out[f"{name}_per_rank"] = dict(m["per_rank"])
        if m["terms"]:
            out[f"{name}_terms"] = dict(m["terms"])
    out["units"] = units
    out["not_applicable"] = na
    out["ranks"] = run.rank_ids
    out["trace_dir"] = run.path
    return out


def metric_cal(
    trace_dir: "str | os.PathLike[str]",
    workload_card_path: "Optional[str | os.PathLike[str]]" = None,
    profile_mode: str = "auto",
    family: Optional[str] = None,
) -> Dict[str, Any]:
    """CCL-Bench's family ``metric_cal`` (see the module docstring for the result).

    ``workload_card_path`` replaces a card found beside the traces.
    ``profile_mode``: ``"auto"`` reads what is there; ``"torch"`` (``"kineto"``,
    ``"json"``), ``"nsys"`` or ``"tpu"`` (``"json_tpu"``, ``"xla"``) require the
    traces to be of that kind and raise :class:`ccl_bench.TraceError` otherwise.
    ``family``: one of :data:`FAMILIES`, or None for all of them.
    """
    from ccl_bench import TraceError, load

    if profile_mode not in _MODES:
        raise ValueError(f"profile_mode must be one of {', '.join(_MODES)}, not {profile_mode!r}")
    if family is not None and family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, not {family!r}")
    run = load(trace_dir, card=workload_card_path, progress=False)
    want = _MODES[profile_mode]
    if want is not None:
        other = sorted({f for f in run.formats if f != want})
        if other:
            raise TraceError(
                f"{run.path}: profile_mode {profile_mode!r} asks for {want} traces, "
                f"but the ranks loaded are {', '.join(other)} traces"
            )
    metrics = run.metrics()
    if family is not None:
        return _family(metrics, FAMILIES[family], run)
    return {f: _family(metrics, names, run) for f, names in FAMILIES.items()}
