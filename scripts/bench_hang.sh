#!/usr/bin/env bash
# `ccl-bench hang` on generated Flight Recorder dumps (ranks x 2,000 entries,
# the recommended TORCH_NCCL_TRACE_BUFFER_SIZE; pickles laid out as PyTorch's
# pickler writes them, stacks 28 frames deep), against Python's
# `pickle.load` / `json.load` of the same files: the floor of PyTorch's own
# analyzer (fr_trace), which loads each dump that way before matching.
# Prints a Markdown table and writes it to target/bench/hang.md.
#
#   scripts/bench_hang.sh
#   BEFORE=path/to/old/ccl-bench scripts/bench_hang.sh   # adds its time
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/bench
mkdir -p "$out"
bin=target/release/ccl-bench
cargo build --release --quiet --example gen_fr
cargo build --release --quiet
. scripts/bench_lib.sh
py='import json, pickle, sys
for f in sys.argv[1:]:
    with open(f, "rb") as h:
        json.load(h) if f.endswith(".json") else pickle.load(h)'
{
    echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo) RAM, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo
    echo "| dumps | encoding | input | ccl-bench hang | peak RSS | python load only | speed-up |${BEFORE:+ before | its peak RSS |}"
    echo "|---|---|---|---|---|---|---|${BEFORE:+---|---|}"
} | tee "$out/hang.md"
for set in "256 pickle" "256 json" "1024 pickle" "1024 json"; do
    read -r ranks enc <<<"$set"
    dir="$out/data/fr_${ranks}_$enc"
    params="$ranks 2000 $enc $(cat crates/read/src/synth/flight.rs crates/read/src/synth/jit_pickle.rs examples/gen_fr.rs | sha1sum | cut -c1-12)"
    if [ "$(cat "$dir/.params" 2>/dev/null)" != "$params" ]; then
        rm -rf "$dir"
        flag=""
        [ "$enc" = json ] && flag=--json
        target/release/examples/gen_fr "$dir" "$ranks" 2000 $flag
        echo "$params" >"$dir/.params"
    fi
    files=("$dir"/nccl_trace_rank_*)
    bytes=$(cat "${files[@]}" | wc -c)
    # Exit 1 is the verdict "hang", not a failure.
    read -r t rss < <(best_of_3 sh -c '"$0" hang "$1"; test $? -le 1' "$bin" "$dir")
    read -r pt _ < <(measure python3 -c "$py" "${files[@]}")
    bt="" brss=""
    if [ -n "${BEFORE:-}" ]; then
        read -r bt brss < <(best_of_3 sh -c '"$0" hang "$1"; test $? -le 1' "$BEFORE" "$dir")
    fi
    awk -v r="$ranks" -v e="$enc" -v b="$bytes" -v t="$t" -v rss="$rss" -v pt="$pt" -v bt="$bt" -v brss="$brss" 'BEGIN {
        printf "| %d x 2,000 | %s | %.0f MB | %.3f s | %.0f MB | %.2f s | %.0fx |",
            r, e, b / 1e6, t, rss / 1024, pt, pt / t
        if (bt != "") printf " %.3f s | %.0f MB |", bt, brss / 1024
        printf "\n"
    }' | tee -a "$out/hang.md"
done
echo "written to $out/hang.md"
