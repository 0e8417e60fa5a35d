"""The Python API gives the command line's numbers, raises its errors, and
compares runs as `ccl-bench compare` does."""

import math
import warnings

import pytest

import ccl_bench
from conftest import SAMPLE, cli, cli_metrics, corpus


def same(a, b):
    if a is None or b is None:
        return a is b
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0)


def test_every_metric_equals_the_cli(trace_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ccl_bench.TraceWarning)
        run = ccl_bench.load(trace_path)
    want = cli_metrics(trace_path)
    got = run.metrics()
    assert set(got) == set(want) == set(ccl_bench.metric_names())
    for name, m in want.items():
        assert same(got[name]["value"], m["value"]), name
        assert same(run.metric(name), m["value"]), name
        assert got[name]["unit"] == m["unit"]
        assert got[name]["not_applicable"] == m.get("not_applicable")
        assert run.why(name) == m.get("not_applicable")
        assert got[name]["per_rank"] == {int(k): v for k, v in m.get("per_rank", {}).items()}
    assert run.metrics_document()["schema_version"] == ccl_bench.METRICS_SCHEMA_VERSION


def test_one_rank_and_not_applicable():
    run = ccl_bench.load(SAMPLE)
    assert run.rank_ids == list(range(8))
    # The sample has no memory snapshot: None, with the reason.
    assert run.metric("peak_memory_allocated_gb") is None
    assert "snapshot" in run.why("peak_memory_allocated_gb")
    one = run.metric("communication_fraction", rank=3)
    want = cli("--trace", str(SAMPLE), "--rank", "3", "--metric", "communication_fraction")
    assert one == float(want.stdout)
    assert isinstance(run.metric("num_comm_kernels"), int)
    assert isinstance(run.metric("slowest_rank"), int)
    assert isinstance(run.metric("avg_step_time"), float)
    # A part of a breakdown, named as in CSV: the sample's one group is data parallel.
    dp = run.metric("comm_time_by_role_s.dp")
    want = cli("--trace", str(SAMPLE), "--metric", "comm_time_by_role_s.dp")
    assert dp == float(want.stdout) == run.metric("comm_time_by_role_s")
    assert run.metric("comm_time_by_role_s.tp") is None
    assert "parts: dp" in run.why("comm_time_by_role_s.tp")
    with pytest.raises(ValueError, match="did you mean communication_fraction"):
        run.metric("comunication_fraction")
    with pytest.raises(ValueError, match="rank 99 is not in the trace"):
        run.metric("communication_fraction", rank=99)


def test_load_options_reach_the_loader():
    run = ccl_bench.load(SAMPLE, all_steps=True, align="none")
    want = cli("--trace", str(SAMPLE), "--all-steps", "--align", "none", "--metric", "avg_step_time")
    assert run.metric("avg_step_time") == float(want.stdout)
    with pytest.raises(ValueError, match="align"):
        ccl_bench.load(SAMPLE, align="sideways")


def test_bad_input_raises_the_cli_message(tmp_path):
    bad = tmp_path / "rank0_trace.json"
    bad.write_text('{"traceEvents": [ {"ph": "X", "name": ')
    (tmp_path / "empty").mkdir()
    for path in [tmp_path / "missing", tmp_path / "empty"]:
        with pytest.raises(ccl_bench.TraceError) as e:
            ccl_bench.load(path)
        out = cli("--trace", str(path), "--metrics", check=False)
        assert out.returncode == 1
        assert out.stderr.strip() == f"ccl-bench: error: {e.value}"


def test_truncated_trace_loads_with_a_warning(tmp_path):
    text = (SAMPLE / "rank0_trace.json").read_text() if (SAMPLE / "rank0_trace.json").exists() else None
    if text is None:
        src = sorted(SAMPLE.glob("*.json*"))[0]
        import gzip

        opener = gzip.open if src.suffix == ".gz" else open
        with opener(src, "rt") as f:
            text = f.read()
    (tmp_path / "rank0_trace.json").write_text(text[: len(text) * 2 // 3])
    with pytest.warns(ccl_bench.TraceWarning) as said:
        run = ccl_bench.load(tmp_path)
    assert run.warnings
    # A file read in part: its kind says so, on the run and on the warning.
    assert len(run.warning_kinds) == len(run.warnings)
    cut = [k for k, w in zip(run.warning_kinds, run.warnings) if "cut off" in w]
    assert cut == ["damaged"], (run.warning_kinds, run.warnings)
    assert "damaged" in [w.message.kind for w in said]
    assert run.metric("total_kernel_time") > 0


def test_compare_equals_the_cli():
    balanced = SAMPLE.parent / "llama_fsdp_8gpu_balanced"
    got = ccl_bench.compare(SAMPLE, balanced, threshold=0.05)
    import json

    want = json.loads(cli("compare", str(SAMPLE), str(balanced), "--format", "json").stdout)
    assert got["metrics"] == want["metrics"]
    same_run = ccl_bench.compare(SAMPLE, SAMPLE)
    assert {m["verdict"] for m in same_run["metrics"]} <= {"same", "n/a"}


def test_gate_equals_the_cli():
    import json

    balanced = SAMPLE.parent / "llama_fsdp_8gpu_balanced"
    got = ccl_bench.gate(SAMPLE, balanced, threshold=0.05, all_steps=True)
    run = cli("gate", str(SAMPLE), str(balanced), "--all-steps", "--format", "json")
    assert got == json.loads(run.stdout)
    assert got["gate"]["verdict"] == "improved"
    # One measured step of each run: too few to judge.
    assert ccl_bench.gate(SAMPLE, balanced)["gate"]["verdict"] == "inconclusive"
    with pytest.raises(ccl_bench.TraceError):
        ccl_bench.gate(SAMPLE, SAMPLE.parent / "no_such_run")


def test_no_progress_bar_when_not_a_terminal(capfd):
    ccl_bench.load(SAMPLE)
    assert capfd.readouterr().err == ""


def test_progress_bar_is_erased(capfd):
    ccl_bench.load(SAMPLE, progress=True)
    err = capfd.readouterr().err
    # Whatever was drawn ends erased (a fast load may draw nothing).
    assert err == "" or err.endswith("\r\x1b[K")


def test_command_line_entry_point():
    out = cli("--version")
    assert out.stdout.startswith("ccl-bench ")
    out = cli("--trace", str(SAMPLE), "--metric", "no_such_metric", check=False)
    assert out.returncode == 2


def test_workload_card_path_and_nsys_corpus():
    d = corpus("kineto/dlrm_8rank_v100")
    card = SAMPLE / "workload_card.yaml"
    if not card.exists():
        card = next(SAMPLE.glob("*.yaml"))
    run = ccl_bench.load(d, card=card)
    want = cli("--trace", str(d), "--card", str(card), "--metric", "tokens_per_s")
    assert run.metric("tokens_per_s") == float(want.stdout)
    assert ccl_bench.load(d).metric("tokens_per_s") is None
