#!/usr/bin/env python3
"""Independent reference values for ccl-bench's corpus tests.

Computes the seed-list-A metrics of ../shared/METRICS.md straight from the raw
PyTorch profiler JSON with json.load (no code shared with the Rust crate), so the
integration tests in tests/it/corpus.rs compare two separate implementations.

    python3 scripts/reference_metrics.py ../shared/corpus/kineto/dlrm_8rank_v100/*.json
    python3 scripts/reference_metrics.py --all-steps FILE...   # every step, warm-up included

Prints one `name value` line per metric; the numbers were pasted into the tests.
"""
import gzip
from decimal import Decimal, ROUND_HALF_EVEN
import json
import re
import statistics
import sys

COMM = re.compile(r"nccl|rccl|msccl|allreduce|allgather|reducescatter|all_reduce|all_gather|"
                  r"reduce_scatter|alltoall|all_to_all|sendrecv|broadcast|cross_device|memcpy ptop|memcpy peer", re.I)
MEMNAME = re.compile(r"^memcpy|^memset|^memory copy|^memory set|^copy-start|^copy-done", re.I)
MOE = re.compile(r"moe|expert|routing|gating|topk|fused_expert|dispatch|combine|grouped_gemm", re.I)
ENGINE = re.compile(r"^execute_(?:\d+_)?context_\d+\(.*\)_generation_\d+|^step\[(PREFILL|EXTEND|MIXED|DECODE)")
GEMM = re.compile(r"gemm|cutlass|cublas|matmul|^fc(-|_|$)|wgmma|sm90_xmma|nvjet|triton_mm|^cijk_|hipblaslt|rocblas|"
                  r"convolve|convolution|conv_(fwd|bwd|wrw)", re.I)
ATTN = re.compile(r"flash|fmha|attention|attn|sdpa", re.I)
KERNEL, MEMCPY, MEMSET = {"kernel", "Kernel"}, {"gpu_memcpy", "Memcpy"}, {"gpu_memset", "Memset"}
RUNTIME = {"cuda_runtime", "cuda_driver", "Runtime", "Driver"}


def ns(us):
    # Exact: float(us) * 1000 would lose nanoseconds above 2**53 (epoch microseconds).
    if isinstance(us, int):
        return us * 1000
    return int((Decimal(repr(us)) * 1000).to_integral_value(rounding=ROUND_HALF_EVEN))


def own(name):
    """The kernel's own qualified name: templates and parameters removed, FBGEMM
    namespaces dropped; for cutlass-style wrappers, the wrapped kernel first."""
    flat, depth, i = "", 0, 0
    while i < len(name):
        if depth == 0 and name.startswith("(anonymous namespace)", i):
            flat += "(anonymous namespace)"
            i += len("(anonymous namespace)")
            continue
        c = name[i]
        if c == "<":
            depth += 1
        elif c == ">" and depth:
            depth -= 1
        elif c == "(" and depth == 0 and flat.strip():
            break
        elif depth == 0:
            flat += c
        i += 1
    path = flat.strip()
    if path.lower().startswith("void "):
        path = path[5:].strip()
    parts = [p.strip() for p in path.split("::") if p.strip().lower() not in ("fbgemm_gpu", "fbgemm")]
    last = parts[-1] if parts else ""
    if not last:
        return name
    path = "::".join(parts)
    if (last.lower() in ("kernel", "kernel2", "device_kernel") or last.lower().startswith("enable_sm")) and "<" in name:
        depth, start = 0, name.index("<")
        for j in range(start, len(name)):
            if name[j] == "<":
                depth += 1
            elif name[j] == ">":
                depth -= 1
            if (name[j] == "," and depth == 1) or depth == 0:
                return own(name[start + 1:j].strip()) + " " + path
    return path


def klass(name, is_kernel):
    n = own(name)
    if COMM.search(n) or (not is_kernel and COMM.search(name)):
        return "comm"
    if not is_kernel or MEMNAME.search(n):
        return "memory"
    for cls, rx in (("moe", MOE), ("attention", ATTN), ("gemm", GEMM)):
        if rx.search(n):
            return cls
    return "other"


def union(iv):
    out = []
    for s, e in sorted(x for x in iv if x[1] > x[0]):
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return out


def total(iv):
    return sum(e - s for s, e in iv)


def intersect(a, b):
    out, i, j = [], 0, 0
    while i < len(a) and j < len(b):
        s, e = max(a[i][0], b[j][0]), min(a[i][1], b[j][1])
        if s < e:
            out.append([s, e])
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(a, b):
    # a minus b, by walking both boundaries on a small grid of events
    res = []
    for s, e in a:
        cur = s
        for bs, be in b:
            if be <= cur or bs >= e:
                continue
            if bs > cur:
                res.append([cur, bs])
            cur = max(cur, be)
        if cur < e:
            res.append([cur, e])
    return res


def load(path):
    opener = gzip.open if open(path, "rb").read(2) == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    sms = {p.get("id", 0): p.get("numSms") for p in (d.get("deviceProperties") or [])} if isinstance(d, dict) else {}
    ops, launches, steps = [], {}, []
    ann, comm_args, lo, hi = [], {}, None, None
    for e in ev:
        if not isinstance(e, dict) or e.get("ph") != "X" or "ts" not in e or "dur" not in e:
            continue
        cat, name, a = e.get("cat"), e.get("name", ""), e.get("args") or {}
        ts, dur = ns(e["ts"]), ns(e["dur"])
        if dur < 0:
            continue
        lo = ts if lo is None else min(lo, ts)
        hi = ts + dur if hi is None else max(hi, ts + dur)
        if cat == "user_annotation":
            ann.append((name, ts, ts + dur))
        if name == "record_param_comms" and "External id" in a:
            comm_args[a["External id"]] = a
        if cat in KERNEL or cat in MEMCPY or cat in MEMSET:
            grid = a.get("grid")
            blocks = None
            if isinstance(grid, list) and grid:
                blocks = 1
                for g in grid:
                    blocks *= g
            # The profiler's own blocks per SM decide coverage (CCL-Bench).
            bps = a.get("blocks per SM") if cat in KERNEL else None
            ops.append(dict(ts=ts, end=ts + dur, dur=dur, name=name, kernel=cat in KERNEL,
                            memcpy=cat in MEMCPY, cls=klass(name, cat in KERNEL), bytes=a.get("bytes"),
                            corr=a.get("correlation"), blocks=blocks, bps=bps, device=a.get("device", 0),
                            ext=a.get("External id"), args=a))
        elif cat in RUNTIME and "correlation" in a:
            launches.setdefault(a["correlation"], []).append(ts)
        elif cat != "gpu_user_annotation" and name.startswith("ProfilerStep#"):
            # A step is an instance: the same number again later is another step.
            step = (int(name.split("#")[1]), (ts, ts + dur))
            if step not in steps:
                steps.append(step)
    steps.sort(key=lambda kv: kv[1][0])
    if not steps:
        # A serving trace: vLLM/SGLang engine steps are the steps (outermost of nested ones).
        engine = sorted(((s, e) for n, s, e in ann if ENGINE.match(n)), key=lambda x: (x[0], -x[1]))
        for s, e in engine:
            if not steps or e > steps[-1][1][1]:
                steps.append((len(steps), (s, e)))
    for o in ops:
        # Repeated correlation ids: the launch just before the kernel.
        before = [t for t in launches.get(o["corr"], []) if t <= o["ts"]]
        t = max(before) if before else o["ts"]
        o["launch"] = t
        o["step"] = next((i for i, (_, (s, e)) in enumerate(steps) if s <= t < e), None)
        a = o["args"] if "Collective name" in o["args"] else comm_args.get(o["ext"], {})
        o["coll"] = coll(a) if o["cls"] == "comm" else None
    # Per-step averages: with 3+ steps the first (warm-up) and last (profiler stop) are left out.
    measured = set(range(1, len(steps) - 1)) if len(steps) >= 3 and not ALL_STEPS else set(range(len(steps)))
    return dict(ops=ops, steps=steps, measured=measured, sms=sms, ann=ann,
                window=(hi - lo) if lo is not None else None)


DTYPE = {"Float": 4, "BFloat16": 2, "Half": 2, "Double": 8, "Int": 4, "Long": 8, "Byte": 1,
         "Char": 1, "Bool": 1, "Short": 2}


def coll(a):
    """(kind, message bytes, nccl-tests data bytes, group size) from collective args."""
    name = str(a.get("Collective name", "")).lower().replace("_", "")
    size = DTYPE.get(a.get("dtype"))
    if "In msg nelems" not in a or size is None:
        return None
    kind = next((k for k in ("allreduce", "allgather", "reducescatter", "alltoall") if k in name), "other")
    msg = a["In msg nelems"] * size
    data = a.get("Out msg nelems", 0) * size if kind == "allgather" else msg
    return kind, msg, data, a.get("Group size")


def phase(name, which):
    if which == "optimizer":
        return name == "optimizer" or name.startswith("Optimizer.step#")
    return name == which or name.endswith("## %s ##" % which)


def phase_time(r, which):
    """Union of device ops launched in the phase's CPU ranges, per step (s)."""
    spans = []
    ranges = [(a, b) for n, a, b in r["ann"] if phase(n, which) and counts_at(r, a)]
    if not ranges:
        return None
    for a, b in ranges:
        launched = [[o["ts"], o["end"]] for o in r["ops"] if a <= o["launch"] < b]
        spans += launched or [[a, b]]
    return total(union(spans)) / 1e9 / max(1, len(r["measured"]))


def counts_at(r, t):
    """Whether CPU time t falls in a measured step (always, without steps)."""
    if not r["steps"]:
        return True
    return any(s <= t < e for i, (_, (s, e)) in enumerate(r["steps"]) if i in r["measured"])


def counts(r, o):
    return not r["steps"] or o["step"] in r["measured"]


def metrics(ranks):
    out = {}
    per = []
    for r in ranks:
        ops, steps = r["ops"], r["steps"]
        ks = [o for o in ops if o["kernel"]]
        ksum = sum(o["dur"] for o in ks)
        osum = sum(o["dur"] for o in ops)
        comm_k = sum(o["dur"] for o in ks if o["cls"] == "comm")
        comm_o = sum(o["dur"] for o in ops if o["cls"] == "comm")
        busy = union([[o["ts"], o["end"]] for o in ops])
        comm_u = union([[o["ts"], o["end"]] for o in ops if o["cls"] == "comm"])
        comp_u = union([[o["ts"], o["end"]] for o in ks if o["cls"] not in ("comm", "memory")])
        mem_u = union([[o["ts"], o["end"]] for o in ops if o["cls"] == "memory"])
        window = max(o["end"] for o in ops) - min(o["ts"] for o in ops)
        names = {}
        for o in ks:
            names[o["name"]] = names.get(o["name"], 0) + o["dur"]
        nsteps = max(1, len(r["measured"]))
        in_steps = [o for o in ops if counts(r, o)]
        comm_steps = sum(o["dur"] for o in in_steps if o["kernel"] and o["cls"] == "comm")
        if steps:
            hulls = {}
            for o in ops:
                if o["step"] in r["measured"]:
                    h = hulls.get(o["step"], [o["ts"], o["end"]])
                    hulls[o["step"]] = [min(h[0], o["ts"]), max(h[1], o["end"])]
            win = union(list(hulls.values()))
        else:
            win = [[min(o["ts"] for o in ops), max(o["end"] for o in ops)]]
        last = max(r["measured"]) if steps else None
        cov = []
        # SMs by device id; else the one count all described GPUs share.
        sm_counts = set(r["sms"].values())
        same = next(iter(sm_counts)) if len(sm_counts) == 1 else None
        for o in ks:
            sm = r["sms"].get(o["device"], same)
            if o["bps"] is not None:
                cov.append((o["dur"], min(1.0, o["bps"])))
            elif o["blocks"] is not None and sm:
                cov.append((o["dur"], min(1.0, o["blocks"] / sm)))
        mc = [o for o in ops if o["memcpy"] and o["bytes"] is not None and o["dur"] > 0]
        bsum = sum(o["dur"] for o in in_steps)
        per.append(dict(
            total_kernel_time=ksum / 1e9,
            communication_ratio=100 * comm_k / ksum,
            communication_fraction=100 * comm_o / osum,
            coll_call_num=sum(1 for o in ks if o["cls"] == "comm" and (last is None or o["step"] == last)),
            total_communication_time=comm_steps / 1e9 / nsteps,
            aggregate_gpu_utilization=100 * total(busy) / window,
            communication_overlap_ratio=(total(intersect(comm_u, comp_u)) / total(comm_u)) if comm_u else None,
            busy=total(busy),
            avg_step_time=(statistics.mean(e - s for i, (_, (s, e)) in enumerate(steps) if i in r["measured"]) / 1e9)
            if steps else None,
            dominant_kernel_concentration=100 * max(names.values()) / ksum,
            moe_fraction=100 * sum(o["dur"] for o in ks if o["cls"] == "moe") / ksum,
            break_down_steps=100 * sum(o["dur"] for o in in_steps if o["cls"] not in ("comm", "memory")) / bsum,
            memory_transfer_overhead=100 * total(intersect(subtract(mem_u, comp_u), win)) / total(win),
            mean_sm_coverage=(100 * sum(d * c for d, c in cov) / sum(d for d, _ in cov)) if cov else None,
            mc_bytes=sum(o["bytes"] for o in mc), mc_ns=sum(o["dur"] for o in mc),
            wall_time_s=r["window"] / 1e9,
            total_compute_time_s=total(union(comp_u + mem_u)) / 1e9,
            total_comm_time_s=total(comm_u) / 1e9,
            comm_durs=[o["dur"] for o in ops if o["cls"] == "comm"],
            exposed_comm_time_s=total(intersect(subtract(comm_u, comp_u), win)) / 1e9 / nsteps,
            work=(total(intersect(busy, win)) - total(intersect(subtract(comm_u, comp_u), win))) / nsteps,
            **{f"{w}_time_s": phase_time(r, w) for w in ("forward", "backward", "optimizer")},
            colls=[(o["coll"], o["dur"], counts(r, o)) for o in ops if o["coll"]],
        ))
    def mean(k):
        v = [p[k] for p in per if p[k] is not None]
        return statistics.mean(v) if v else None
    out["total_kernel_time"] = sum(p["total_kernel_time"] for p in per)
    for k in ("communication_ratio", "communication_fraction", "total_communication_time",
              "aggregate_gpu_utilization", "communication_overlap_ratio", "avg_step_time",
              "dominant_kernel_concentration", "moe_fraction", "break_down_steps",
              "memory_transfer_overhead", "mean_sm_coverage"):
        out[k] = mean(k)
    out["coll_call_num"] = per[0]["coll_call_num"]
    b = [p["busy"] for p in per]
    out["load_imbalance_ratio"] = max(b) / min(b) if len(b) > 1 else None
    for k in ("wall_time_s", "total_compute_time_s", "total_comm_time_s", "exposed_comm_time_s",
              "forward_time_s", "backward_time_s", "optimizer_time_s"):
        out[k] = mean(k)
    durs = [d for p in per for d in p["comm_durs"]]
    out["avg_comm_kernel_time_s"] = sum(durs) / len(durs) / 1e9 if durs else None
    out["num_comm_kernels"] = len(durs)
    # `straggler` is decided by whom the others wait for at collectives matched
    # across ranks on aligned clocks, which this script does not rebuild; the
    # Rust tests check it by hand on small traces and on dlrm_8rank_v100.
    bus, t = 0.0, 0
    for p in per:
        for (kind, msg, data, n), dur, _ in p["colls"]:
            if kind == "allreduce" and n and n > 1 and dur > 0:
                bus += data * 2 * (n - 1) / n
                t += dur
    out["bandwidth_utilization_allreduce_group_6"] = bus / t if t else None
    r0 = per[0]
    nsteps = max(1, len(ranks[0]["measured"]))
    in_steps = [c for c in r0["colls"] if c[2]]
    if r0["colls"]:
        out["collective_vol_allreduce_gb"] = sum(c[0][1] for c in in_steps if c[0][0] == "allreduce") / 1e9 / nsteps
        out["collective_vol_total_gb"] = sum(c[0][1] for c in in_steps) / 1e9 / nsteps
    mb, mn = sum(p["mc_bytes"] for p in per), sum(p["mc_ns"] for p in per)
    out["average_memory_bandwidth"] = mb / mn if mn else None
    return out


def rank_of(path, d_rank):
    return d_rank


ALL_STEPS = False

if __name__ == "__main__":
    # Files are given in rank order; rank 0 first. --all-steps: average over every step.
    args = sys.argv[1:]
    if "--all-steps" in args:
        args.remove("--all-steps")
        ALL_STEPS = True
    ranks = [load(p) for p in args]
    for k, v in sorted(metrics(ranks).items()):
        print(k, repr(v))
