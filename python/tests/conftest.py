"""Shared fixtures: the bundled sample (always there) and corpus traces
(skipped with a message when ../shared is not beside the checkout)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ROOT.parent / "shared" / "corpus"
SAMPLE = ROOT / "trace_collection" / "llama_fsdp_8gpu"

#: Corpus runs the API is checked on: Kineto (8 ranks, clocks aligned),
#: Nsight Systems SQLite, and an XLA XSpace.
CORPUS_RUNS = [
    "kineto/dlrm_8rank_v100",
    "nsys/h100_tiny_transformer/h100_tiny_transformer_nsys.sqlite",
    "xla/tf_profiler_gpu_multi_worker",
]


def corpus(rel: str) -> Path:
    p = CORPUS / rel
    if not p.exists():
        pytest.skip(f"{p} absent (../shared/corpus is not beside the checkout)")
    return p


def cli(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """The installed command line, through the package's own entry point."""
    return subprocess.run(
        [sys.executable, "-m", "ccl_bench", *args],
        capture_output=True,
        text=True,
        check=check,
        env={**os.environ, "NO_COLOR": "1"},
    )


def cli_metrics(path: Path) -> dict:
    doc = json.loads(cli("--trace", str(path), "--metrics", "--format", "json").stdout)
    return {m["name"]: m for m in doc["metrics"]}


@pytest.fixture(params=["sample", *CORPUS_RUNS])
def trace_path(request) -> Path:
    return SAMPLE if request.param == "sample" else corpus(request.param)
