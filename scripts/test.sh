#!/usr/bin/env bash
# The project's test command (README "Test", and what CI runs): formatting,
# lints with warnings as errors, every Rust test, then the Python package's
# tests in a venv this script makes (.venv; packages from PyPI). Each step
# builds what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
cargo clippy --workspace --all-targets --quiet -- -D warnings
cargo test

# Python: the extension is built by maturin into .venv (dev profile, sharing
# target/ with the steps above), with the packages the tests read tables with.
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check "maturin>=1.7,<2"
VIRTUAL_ENV="$PWD/.venv" PATH="$PWD/.venv/bin:$PATH" \
    .venv/bin/maturin develop --quiet --extras test
.venv/bin/python -m pytest --quiet python/tests
