"""A CUDA memory snapshot grown to about MB megabytes for the reader benchmark:
the real snapshot's allocator history preceded by copies of itself, each copy
earlier in time and at other addresses, pickled by Python's pickle as
torch.cuda.memory._dump_snapshot does (frame dicts shared between events as in
the real file). An earlier copy keeps only the blocks and segments it both
allocates and frees, so the whole history still adds up to the snapshot's
state, which the real history ends in.

    python3 scripts/tile_snapshot.py REAL.pickle OUT.pickle MB
"""
import os
import pickle
import sys

OPEN = {"alloc", "segment_alloc", "segment_map"}
CLOSE = {"free_completed", "segment_free", "segment_unmap"}


def balanced(trace):
    """The events of blocks and segments allocated and freed within the trace."""
    keep, live = [False] * len(trace), {}
    for i, e in enumerate(trace):
        a = e.get("action", "")
        key = (a.startswith("segment"), e.get("addr"))
        if a in OPEN:
            live[key] = [i]
        elif a == "free_requested" and key in live:
            live[key].append(i)
        elif a in CLOSE and key in live:
            for j in live.pop(key) + [i]:
                keep[j] = True
    return [e for e, k in zip(trace, keep) if k]


real, out, mb = sys.argv[1], sys.argv[2], float(sys.argv[3])
with open(real, "rb") as f:
    snap = pickle.load(f)
for d, trace in enumerate(snap["device_traces"]):
    if not trace:
        continue
    times = [e["time_us"] for e in trace if "time_us" in e]
    span = max(times) - min(times) + 1000
    inner = balanced(trace)
    copies = max(0, int(mb * 1e6 / os.path.getsize(real) * len(trace) / max(1, len(inner))))
    grown = []
    for c in range(copies, 0, -1):
        lists = {}  # the copy's frame lists, shared where the real file shares them
        for e in inner:
            e = dict(e)
            e["time_us"] -= c * span
            e["addr"] += c << 44
            fr = e.get("frames")
            if fr is not None:
                e["frames"] = lists.setdefault(id(fr), list(fr))
            grown.append(e)
    snap["device_traces"][d] = grown + trace
with open(out, "wb") as f:
    pickle.dump(snap, f)
