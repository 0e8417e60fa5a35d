#!/usr/bin/env bash
# Renders each tab of the UI on the bundled sample (and the Compare tab on the
# bundled pair) to screenshots/<tab>.svg and,
# with rsvg-convert (Debian/Ubuntu: apt install librsvg2-bin), to .png.
# No terminal is needed: the app is drawn into an off-screen buffer.
set -euo pipefail
cd "$(dirname "$0")/.."
trace=${1:-trace_collection/llama_fsdp_8gpu}
size=${SIZE:-120x36}
cargo build --release --quiet
# Keys pressed before each picture: the timeline shows the second step.
declare -A keys=([summary]="" [kernels]="" [timeline]="]]" [stragglers]="" [collectives]="c")
for tab in summary kernels timeline stragglers collectives; do
    target/release/ccl-bench --trace "$trace" --screenshot "screenshots/$tab.svg" --tab "$tab" \
        --size "$size" --keys "${keys[$tab]}"
    if command -v rsvg-convert >/dev/null; then
        rsvg-convert "screenshots/$tab.svg" -o "screenshots/$tab.png"
    fi
    echo "screenshots/$tab.svg"
done
# The Compare tab: the sample against the same run without its straggler.
target/release/ccl-bench "$trace" trace_collection/llama_fsdp_8gpu_balanced \
    --screenshot screenshots/compare.svg --tab compare --size "$size"
if command -v rsvg-convert >/dev/null; then
    rsvg-convert screenshots/compare.svg -o screenshots/compare.png
fi
echo screenshots/compare.svg
command -v rsvg-convert >/dev/null || echo "rsvg-convert not found: SVGs only" >&2
