"""`ccl_bench.hang` gives what `ccl-bench hang --format json` prints."""

import json

import pytest

import ccl_bench
from conftest import ROOT, SAMPLE, cli

HANG = ROOT / "trace_collection" / "llama_fsdp_8gpu_hang"


def test_hang_equals_the_cli():
    got = ccl_bench.hang(HANG)
    want = json.loads(cli("hang", str(HANG), "--format", "json", check=False).stdout)
    assert got == want
    assert got["verdict"] == "hang"
    assert got["findings"][0]["missing"] == [5]
    assert got["headline"].startswith("rank(s) 5 never called _allgather_base #44")


def test_no_dumps_is_a_trace_error():
    with pytest.raises(ccl_bench.TraceError, match="no NCCL Flight Recorder dumps"):
        ccl_bench.hang(SAMPLE)
