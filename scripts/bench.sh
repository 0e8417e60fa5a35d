#!/usr/bin/env bash
# Load + every metric on generated multi-rank trace sets, against a plain
# `json.load` of the same files in Python (the floor of any Python tool).
# Prints a Markdown table and writes it to target/bench/results.md.
#
# Events are laid out as the PyTorch profiler writes them (over several lines
# each); the *_lines set has one event per line, the layout of other writers.
#
#   scripts/bench.sh            # 10 MB .. 2 GB, 8 .. 64 ranks, plain and gzip
#   QUICK=1 scripts/bench.sh    # only the small sets
#   ONLY=1024r scripts/bench.sh # one set
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/bench
mkdir -p "$out"
bin=target/release/ccl-bench
cores=$(nproc)
# name ranks total_MB flags
sets=("10mb_8r 8 10" "100mb_8r 8 100" "100mb_8r_gz 8 100 --gzip")
if [ -z "${QUICK:-}" ]; then
    sets+=("500mb_16r 16 500" "500mb_16r_gz 16 500 --gzip" "500mb_16r_lines 16 500 --one-line"
        "2gb_64r 64 2000" "1024r 1024 300")
fi
# ONLY=name runs one set.
if [ -n "${ONLY:-}" ]; then
    for s in "${sets[@]}"; do [[ "$s" == "$ONLY "* ]] && sets=("$s"); done
fi
. scripts/bench_lib.sh
build
py='import gzip, json, sys
for f in sys.argv[1:]:
    with (gzip.open(f, "rt") if f.endswith(".gz") else open(f)) as h:
        json.load(h)'
{
    echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo) RAM, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo
    echo "| set | ranks | input (uncompressed) | ccl-bench --metrics | MB/s (per core) | peak RSS (% of input) | python json.load | speed-up |"
    echo "|---|---|---|---|---|---|---|---|"
} | tee "$out/results.md"
for s in "${sets[@]}"; do
    read -r name ranks mb flags <<<"$s"
    dir="$out/data/$name"
    generate "$dir" "$ranks" "$mb" $flags
    files=("$dir"/*)
    if [[ "$flags" == *gzip* ]]; then
        bytes=$(for f in "${files[@]}"; do gzip -dc "$f"; done | wc -c)
    else
        bytes=$(cat "${files[@]}" | wc -c)
    fi
    read -r t rss < <(best_of_3 "$bin" --trace "$dir" --metrics)
    read -r pt prss < <(measure python3 -c "$py" "${files[@]}")
    awk -v n="$name" -v r="$ranks" -v b="$bytes" -v t="$t" -v rss="$rss" -v pt="$pt" -v c="$cores" 'BEGIN {
        mb = b / 1e6
        printf "| %s | %d | %.0f MB | %.3f s | %.0f (%.0f) | %.0f MB (%.1f %%) | %.2f s | %.0fx |\n",
            n, r, mb, t, mb / t, mb / t / c, rss / 1024, 100 * rss * 1024 / b, pt, pt / t
    }' | tee -a "$out/results.md"
done
echo "written to $out/results.md"
