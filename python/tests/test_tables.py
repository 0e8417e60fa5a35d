"""Tables reach pandas, polars, pyarrow and DuckDB without a copy, and the
Parquet and Perfetto exports agree with the command line."""

import gzip
import json

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import ccl_bench
from conftest import SAMPLE, cli, cli_metrics, corpus


@pytest.fixture(scope="module")
def run():
    return ccl_bench.load(SAMPLE)


def address(chunked, i=0):
    # buffers(): [validity, values] for fixed-width columns.
    return chunked.chunk(i).buffers()[1].address


def test_ops_reach_pandas_and_polars_without_a_copy(run):
    ops = run.ops()
    doc = run.metrics_document()
    assert len(ops) == doc["gpu_ops"]
    a, b = pa.table(ops), pa.table(ops)
    # Two exports of one table share the Rust-side buffers.
    assert address(a["start_ns"]) == address(b["start_ns"])
    assert a.column("start_ns").num_chunks == len(run.rank_ids)
    df = ops.to_pandas()
    assert len(df) == len(ops)
    assert isinstance(df["start_ns"].dtype, pd.ArrowDtype)
    assert str(df["start_ns"].dtype) == "int64[pyarrow]"
    assert str(df["rank"].dtype) == "uint32[pyarrow]"
    assert address(df["start_ns"].array._pa_array) == address(a["start_ns"])
    pdf = ops.to_polars()
    assert pdf.height == len(ops)
    assert pdf.schema["start_ns"] == pl.Int64
    assert pdf.schema["name"] in (pl.Categorical, pl.Enum) or isinstance(pdf.schema["name"], (pl.Categorical, pl.Enum))
    assert pdf["dur_ns"].sum() == df["dur_ns"].sum()


def test_table_columns_and_totals(run):
    metrics = {k: v["value"] for k, v in run.metrics().items()}
    ops = pa.table(run.ops())
    kernels = ops.filter(pa.compute.equal(ops["activity"].cast(pa.string()), "kernel"))
    assert pa.compute.sum(kernels["dur_ns"]).as_py() / 1e9 == pytest.approx(metrics["total_kernel_time"], rel=1e-12)
    ranks = pa.table(run.ranks())
    assert ranks["rank"].to_pylist() == run.rank_ids
    steps = pa.table(run.steps())
    assert set(steps["rank"].to_pylist()) == set(run.rank_ids)
    k = pa.table(run.kernels())
    assert pa.compute.sum(k["count"]).as_py() == len(ops)
    coll = pa.table(run.collectives())
    for col in ["wait_ns", "transfer_ns", "last_rank", "kind", "group"]:
        assert col in coll.column_names
    w = coll["wait_ns"].to_pylist()
    assert all(x >= 0 for x in w)


def test_duckdb_reads_tables_in_place(run):
    ops = run.ops()
    n = duckdb.sql("select count(*) from ops").fetchall()[0][0]
    assert n == len(ops)


def test_parquet_round_trip_gives_the_cli_numbers(tmp_path):
    for path in [SAMPLE, corpus("kineto/dlrm_8rank_v100")]:
        out = tmp_path / path.name
        r = cli("export", str(path), "--to", "parquet", str(out))
        assert "ops.parquet" in r.stderr
        want = cli_metrics(path)
        ops = pq.read_table(out / "ops.parquet")
        assert ops.schema.metadata[b"ccl_bench.schema_version"] == str(ccl_bench.SCHEMA_VERSION).encode()
        total = duckdb.sql(
            f"select sum(dur_ns) from '{out / 'ops.parquet'}' where activity = 'kernel'"
        ).fetchall()[0][0]
        assert total / 1e9 == pytest.approx(want["total_kernel_time"]["value"], rel=1e-12)
        comm = duckdb.sql(
            f"select count(*) from '{out / 'ops.parquet'}' where class = 'communication'"
        ).fetchall()[0][0]
        assert comm == want["num_comm_kernels"]["value"]
        ranks = pq.read_table(out / "ranks.parquet")
        assert ranks.num_rows == len(want["total_comm_time_s"].get("per_rank", {})) or ranks.num_rows > 0
        api = ccl_bench.load(path).export_parquet(tmp_path / (path.name + "_api"))
        assert sorted(p.rsplit("/", 1)[1] for p in api) == sorted(
            f"{t}.parquet" for t in ["ops", "kernels", "collectives", "steps", "ranks"]
        )


def test_perfetto_has_a_process_per_rank_shifted_by_its_offset(tmp_path):
    d = corpus("kineto/dlrm_8rank_v100")
    out = tmp_path / "run.json.gz"
    cli("export", str(d), "--to", "perfetto", str(out))
    with gzip.open(out, "rt") as f:
        doc = json.load(f)
    events = doc["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(procs) == list(range(8))
    want = json.loads(cli("--trace", str(d), "--metrics", "--format", "json").stdout)
    # DLRM's ranks share a host clock: no offset is applied (none listed).
    offsets = {o["rank"]: o["offset_ns"] for o in want.get("clock_offsets", [])}
    assert {int(k): v for k, v in doc["otherData"]["clock_offsets_ns"].items()} == offsets
    origin = doc["otherData"]["ts_origin_ns"]
    run = ccl_bench.load(d)
    sources = dict(zip(pa.table(run.ranks())["rank"].to_pylist(), pa.table(run.ranks())["source"].to_pylist()))
    for rank, src in sources.items():
        # The first kernel of the raw file, moved by the rank's offset only.
        with open(src) as f:
            raw = json.load(f)
        first = min(
            (e for e in raw["traceEvents"] if e.get("cat") == "kernel" and e.get("ph") == "X"),
            key=lambda e: e["ts"],
        )
        raw_ns = round(first["ts"] * 1000)
        slices = [
            e for e in events
            if e.get("ph") == "X" and e["pid"] == rank and e["name"] == first["name"] and e.get("cat") != "step"
        ]
        shifted = min(round(e["ts"] * 1000) + origin for e in slices)
        assert shifted - raw_ns == offsets.get(rank, 0), rank
    straggler = cli("--trace", str(d), "--metric", "slowest_rank").stdout.strip()
    assert doc["otherData"]["straggler_rank"] == int(straggler)
    assert procs[int(straggler)].endswith("(straggler)")
