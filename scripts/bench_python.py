"""The Python package on a generated run: import time, load, and the ops
table into pandas and polars (time, and resident memory after each step, to
show the table reaches pandas without a second copy).

    .venv/bin/python scripts/bench_python.py target/bench/data/500mb_16r

(scripts/bench.sh generates the sets; run it once first.)
"""

import resource
import subprocess
import sys
import time


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() / 1e6


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3


def main(path: str) -> None:
    t = []
    for _ in range(5):
        out = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import ccl_bench"],
            capture_output=True,
            text=True,
            check=True,
        )
        last = [line for line in out.stderr.splitlines() if line.rstrip().endswith("ccl_bench")][-1]
        t.append(int(last.split("|")[1]) / 1e3)
    print(f"import ccl_bench: {min(t):.1f} ms (best of 5, cumulative, -X importtime)")

    import ccl_bench
    import pandas as pd  # noqa: F401  (imported before measuring)
    import polars as pl  # noqa: F401

    base = rss_mb()
    t0 = time.perf_counter()
    run = ccl_bench.load(path, progress=False)
    t1 = time.perf_counter()
    after_load = rss_mb()
    ops = run.ops()
    t2 = time.perf_counter()
    after_table = rss_mb()
    df = ops.to_pandas()
    t3 = time.perf_counter()
    after_pandas = rss_mb()
    pdf = ops.to_polars()
    t4 = time.perf_counter()
    after_polars = rss_mb()
    nbytes = sum(
        b.size for c in ops.to_pyarrow().columns for ch in c.chunks for b in ch.buffers() if b is not None
    )
    print(f"run: {path}, {len(run.rank_ids)} ranks, {len(df):,} ops (Arrow buffers {nbytes / 1e6:.0f} MB)")
    print(f"load:               {t1 - t0:7.3f} s   RSS {after_load - base:+8.0f} MB")
    print(f"Run.ops() (Arrow):  {t2 - t1:7.3f} s   RSS {after_table - after_load:+8.0f} MB")
    print(f"  .to_pandas():     {t3 - t2:7.3f} s   RSS {after_pandas - after_table:+8.0f} MB")
    print(f"  .to_polars():     {t4 - t3:7.3f} s   RSS {after_polars - after_pandas:+8.0f} MB")
    print(f"peak RSS of the process: {peak_mb():.0f} MB")
    assert len(pdf) == len(df)


if __name__ == "__main__":
    main(sys.argv[1])
