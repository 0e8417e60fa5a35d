#!/usr/bin/env bash
# The project's test command (README "Test", and what CI runs): formatting,
# lints with warnings as errors, then every test. Each step builds what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --check
cargo clippy --all-targets --quiet -- -D warnings
cargo test
