#!/usr/bin/env bash
# The project's test command (README "Test", and what CI runs): formatting,
# lints with warnings as errors, every Rust test, then the Python package's
# tests in a venv this script makes (.venv; packages from PyPI). Each step
# builds what it needs, and says when it starts and how long it took.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$SECONDS
stage() {
    echo "== test.sh: $1 (${2}; $((SECONDS - start)) s so far)" >&2
}
stage "formatting" "cargo fmt --check"
cargo fmt --all --check
stage "lints" "cargo clippy -D warnings; a fresh clone compiles every dependency here, about 6 min on 2 cores"
cargo clippy --workspace --all-targets -- -D warnings
stage "Rust tests" "cargo test: unit tests, then tests/it"
cargo test

# Python: the extension is built by maturin into .venv (dev profile, sharing
# target/ with the steps above), with the packages the tests read tables with.
stage "Python package" "maturin develop into .venv, with the test extra from PyPI"
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check "maturin>=1.7,<2"
VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" \
    .venv/bin/maturin develop --extras test
stage "Python tests" "pytest python/tests"
.venv/bin/python -m pytest --quiet python/tests
echo "== test.sh: all passed in $((SECONDS - start)) s" >&2
