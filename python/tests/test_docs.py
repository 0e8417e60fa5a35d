"""Every `python` block of the README and docs/ runs as written, from a copy
of the bundled sample (blocks fenced `python no-run` need what the tests do
not have, such as PyTorch or Ray, and say so beside them). The `sh` blocks
are run by tests/it/docs.rs."""

import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", ROOT / "CONTRIBUTING.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```([^\n]*)\n(.*?)^```", re.S | re.M)


def blocks():
    for page in PAGES:
        for k, m in enumerate(FENCE.finditer(page.read_text())):
            if m.group(1).strip() == "python":
                yield pytest.param(m.group(2), id=f"{page.relative_to(ROOT)}-{k}")


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    work = tmp_path_factory.mktemp("docs")
    shutil.copytree(ROOT / "trace_collection", work / "trace_collection")
    return work


def test_there_are_blocks():
    assert len(list(blocks())) >= 5


@pytest.mark.parametrize("code", blocks())
def test_python_block_runs(code, sample):
    # A file, not -c: Dask's worker processes import the script.
    script = sample / "snippet.py"
    script.write_text(code)
    r = subprocess.run(
        [sys.executable, str(script)], cwd=sample, capture_output=True, text=True, timeout=600
    )
    assert r.returncode == 0, f"{code}\n--- stderr:\n{r.stderr[-4000:]}"
