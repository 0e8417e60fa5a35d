"""Summaries from Python: ``ccl_bench.summarize`` as a plain function, the
map step on a Dask cluster of worker processes, and the Parquet folders
read directly by DuckDB and polars."""

import shutil

import duckdb
import polars as pl
import pytest

import ccl_bench
from conftest import SAMPLE, corpus


def metrics(run):
    doc = run.metrics_document()
    doc.pop("trace")
    return doc


@pytest.fixture
def traces(tmp_path):
    """A copy of the bundled sample (8 rank traces and a workload card), so
    summaries beside it are ours."""
    d = tmp_path / "run"
    shutil.copytree(SAMPLE, d)
    return d


def test_summarize_then_load_gives_the_same_metrics(traces, tmp_path):
    out = tmp_path / "run.summary"
    done = ccl_bench.summarize(traces, out)
    assert (done["inputs"], done["written"], done["unchanged"]) == (9, 9, 0)
    assert done["failed"] == [] and 0 < done["bytes_out"] < done["bytes_in"]
    assert metrics(ccl_bench.load(out)) == metrics(ccl_bench.load(traces))
    again = ccl_bench.summarize(traces, out)
    assert (again["written"], again["unchanged"]) == (0, 9)


def test_the_default_summary_beside_the_traces_is_used(traces):
    done = ccl_bench.summarize(traces)
    assert done["out"] == str(traces) + ".sum"
    with pytest.warns(ccl_bench.TraceWarning, match="read the summary"):
        ccl_bench.load(traces)


def test_a_corpus_run_round_trips(tmp_path):
    d = corpus("kineto/dlrm_8rank_v100")
    out = tmp_path / "dlrm.sum"
    ccl_bench.summarize(d, out, (0, 1))
    assert metrics(ccl_bench.load(out)) == metrics(ccl_bench.load(d))


def test_dask_workers_summarize_shares_of_one_run(traces, tmp_path):
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "dask.sum"
    n = 3
    with distributed.LocalCluster(
        n_workers=n, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        futures = client.map(
            ccl_bench.summarize,
            [str(traces)] * n,
            [str(out)] * n,
            [f"{i}/{n}" for i in range(n)],
        )
        done = client.gather(futures)
        pids = set(client.run(lambda: __import__("os").getpid()).values())
    assert len(pids) == n, "one process per worker"
    assert sorted(d["mine"] for d in done) == [3, 3, 3]
    assert sum(d["written"] for d in done) == 9
    assert metrics(ccl_bench.load(out)) == metrics(ccl_bench.load(traces))


def test_dask_workers_summarize_one_file_each(traces, tmp_path):
    distributed = pytest.importorskip("distributed")
    out = tmp_path / "files.sum"
    files = sorted(str(f) for f in traces.iterdir())
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster, distributed.Client(cluster) as client:
        done = client.gather(
            client.map(lambda f: ccl_bench.summarize(traces, out, only=[f]), files)
        )
    assert [d["written"] for d in done] == [1] * 9
    assert metrics(ccl_bench.load(out)) == metrics(ccl_bench.load(traces))


def test_a_summary_of_another_run_is_not_overwritten(traces, tmp_path):
    out = tmp_path / "one.sum"
    ccl_bench.summarize(traces, out)
    with pytest.raises(ccl_bench.TraceError, match="holds the summary of"):
        ccl_bench.summarize(traces / "rank0_trace.json", out)
    with pytest.raises(ccl_bench.TraceError, match="not an input of the run"):
        ccl_bench.summarize(traces, out, only=[tmp_path / "elsewhere.json"])


def test_duckdb_and_polars_read_the_tables_by_rank(traces, tmp_path):
    out = tmp_path / "q.sum"
    ccl_bench.summarize(traces, out)
    run = ccl_bench.load(traces)
    want = run.ops().to_pandas().groupby("rank").size().to_dict()
    rows = duckdb.sql(
        f"select rank, count(*) from read_parquet('{out}/ops/*.parquet') "
        "group by rank order by rank"
    ).fetchall()
    assert {int(r): n for r, n in rows} == want
    # Per-step partial sums: busy time of each rank's steps, in ns.
    steps = pl.read_parquet(f"{out}/steps/*.parquet")
    assert set(steps["rank"].to_list()) == set(want)
    assert (steps["busy_ns"] >= steps["compute_ns"]).all()
    assert (steps["comm_ns"] >= steps["exposed_comm_ns"]).all()
    names = duckdb.sql(
        f"select name, sum(dur_ns) t from read_parquet('{out}/ops/*.parquet') "
        "where class = 'communication' group by name order by t desc limit 1"
    ).fetchall()[0]
    assert names is not None and "nccl" in names[0].lower()


def test_duckdb_maps_utilization_from_the_coverage_table(traces, tmp_path):
    out = tmp_path / "c.sum"
    ccl_bench.summarize(traces, out)
    want = ccl_bench.load(traces).ops().to_pandas().groupby("rank").size().to_dict()
    table = f"read_parquet('{out}/coverage/*.parquet')"
    # Each level's bins of a rank's lane count every op once.
    counts = duckdb.sql(
        f"select rank, level, sum(ops) from {table} where stream is null group by 1, 2"
    ).fetchall()
    assert counts and all(want[int(r)] == n for r, _, n in counts)
    # The documented query: busy share per bin at the coarsest level.
    shares = duckdb.sql(
        f"select rank, start, busy / len as busy_share from {table} "
        f"where stream is null and level = (select max(level) from {table}) order by rank, start"
    ).fetchall()
    assert {int(r) for r, _, _ in shares} == set(want)
    assert all(0 < s <= 1 for _, _, s in shares)


def test_a_summary_gives_the_traces_tables_a_rank_at_a_time(tmp_path):
    """A summary loads lean (each rank's ops read from its table when a
    table needs them) with the traces' tables, whole or one rank's."""
    d = corpus("kineto/dlrm_8rank_v100")
    out = tmp_path / "dlrm.sum"
    ccl_bench.summarize(d, out)
    raw, summed = ccl_bench.load(d), ccl_bench.load(out)
    for name in ("ops", "kernels", "collectives", "steps", "ranks"):
        a = getattr(raw, name)().to_pyarrow().to_pylist()
        b = getattr(summed, name)().to_pyarrow().to_pylist()
        if name == "ranks":  # where each rank was read from
            for row in a + b:
                row.pop("source")
        assert a == b, name
    one = summed.ops(rank=3).to_pyarrow()
    assert one.num_rows > 0 and set(one.column("rank").to_pylist()) == {3}
    assert one.to_pylist() == raw.ops(rank=3).to_pyarrow().to_pylist()
    assert summed.kernels(rank=3).to_pyarrow().to_pylist() == [
        r for r in raw.kernels().to_pyarrow().to_pylist() if r["rank"] == 3
    ]
    with pytest.raises(ValueError, match="rank 99"):
        summed.ops(rank=99)


def plain_metric(path, name):
    return ccl_bench.load(path).metric(name)


@pytest.mark.filterwarnings("ignore:rank .*clock")
def test_a_summary_under_class_rules_gives_the_traces_tables(tmp_path):
    """Class rules and every step change what the map step made of the ops:
    the summary still loads lean, its ops reclassified as they are read,
    with the tables and metrics the traces give under the same options."""
    d = corpus("kineto/dlrm_8rank_v100")
    out = tmp_path / "dlrm.sum"
    ccl_bench.summarize(d, out)
    rules = tmp_path / "rules.toml"
    rules.write_text('[[rule]]\nclass = "communication"\npattern = "elementwise"\n')
    opts = dict(classes=rules, all_steps=True)
    with pytest.warns(ccl_bench.TraceWarning, match="reclassified"):
        raw, summed = ccl_bench.load(d, **opts), ccl_bench.load(out, **opts)
    plain = ccl_bench.load(out).ops().to_pyarrow().to_pylist()
    ops = summed.ops().to_pyarrow().to_pylist()
    assert ops == raw.ops().to_pyarrow().to_pylist()
    assert ops != plain, "the rules change the ops"
    for name in ("kernels", "collectives", "steps"):
        a = getattr(raw, name)().to_pyarrow().to_pylist()
        assert a == getattr(summed, name)().to_pyarrow().to_pylist(), name
    for m in ("num_comm_kernels", "coll_call_num"):
        assert raw.metric(m) == summed.metric(m) != plain_metric(out, m), m
