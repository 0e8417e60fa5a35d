#!/usr/bin/env bash
# The spill store at the target scale: 1,024 ranks issuing collectives in
# process groups of 8 (`gen_bench --collectives`, every op a communication
# op: the cross-rank pass's memory at its largest for the JSON's size).
# `--metrics` with every collective held in memory (`--pages never`) against
# spilled to temporary files (`--pages always`; the default spills past 4 Mi
# of them), on the JSON traces and on their summary (the reduce: the first
# open, no kept results), without a cap and under memory caps (a cgroup on
# memory and swap, page cache included, when this machine lets one be made).
# Prints a Markdown table and writes it to target/bench/spill.md.
#
#   scripts/bench_spill.sh                    # 1,024 ranks, 6,000 MB of JSON, caps of 1024/512/256 MB
#   RANKS=256 MB=1500 CAPS="512" scripts/bench_spill.sh
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/bench
mkdir -p "$out"
. scripts/bench_lib.sh
build
bin=target/release/ccl-bench
ranks=${RANKS:-1024}
mb=${MB:-6000}
caps=${CAPS:-"1024 512 256"}
limit=${LIMIT_S:-300}
dir="$out/data/spill_${ranks}r_${mb}mb"
generate "$dir" "$ranks" "$mb" --one-line --collectives --groups-of 8
sum="$dir.summary"
if [ "$(cat "$sum/.params" 2>/dev/null)" != "$(cat "$dir/.params")" ]; then
    rm -rf "$sum"
    "$bin" summarize "$dir" --out "$sum" >/dev/null 2>&1
    cp "$dir/.params" "$sum/.params"
fi
comm=$("$bin" --trace "$sum" --metric num_comm_kernels 2>/dev/null || echo "?")

# A memory cgroup of CAP MB (v2, else v1 with swap counted), or nothing.
cgroup=""
make_cgroup() {
    local cap=$(($1 * 1024 * 1024))
    if [ -w /sys/fs/cgroup/cgroup.subtree_control ] && [ -f /sys/fs/cgroup/cgroup.controllers ]; then
        cgroup=/sys/fs/cgroup/ccl-bench-spill
        mkdir -p "$cgroup"
        echo "$cap" >"$cgroup/memory.max"
        echo 0 >"$cgroup/memory.swap.max" 2>/dev/null || true
    elif [ -w /sys/fs/cgroup/memory ]; then
        cgroup=/sys/fs/cgroup/memory/ccl-bench-spill
        mkdir -p "$cgroup"
        echo "$cap" >"$cgroup/memory.limit_in_bytes"
        echo "$cap" >"$cgroup/memory.memsw.limit_in_bytes" 2>/dev/null || true
    else
        cgroup=""
    fi
}
# Runs the command in $cgroup (if any) under $limit seconds: "seconds rss_kb",
# "killed" or "over Ns".
capped() {
    local t0=$EPOCHREALTIME rc=0
    timeout "$limit" bash -c 'if [ -n "$0" ]; then echo $$ >"$0/cgroup.procs"; fi; exec /usr/bin/time -f "%M" -o "$1" "${@:2}"' \
        "$cgroup" "$out/time.txt" "$@" >/dev/null 2>"$out/stderr.txt" || rc=$?
    local t1=$EPOCHREALTIME
    case $rc in
        0) echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') $(cat "$out/time.txt")" ;;
        124) echo "over ${limit}s" ;;
        *) echo "killed" ;;
    esac
}
first_open() { rm -rf "$sum/results" && capped "$bin" --trace "$sum" --metrics --pages "$1"; }
cell() { # "seconds rss_kb" or a word
    if [[ "$1" == [0-9]* ]]; then awk -v t="${1%% *}" -v m="${1##* }" 'BEGIN { printf "%s s, %.0f MB", t, m / 1024 }'; else echo "$1"; fi
}
{
    echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo) RAM, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo "Set: $ranks ranks, $(du -sm "$dir" | cut -f1) MB of JSON, $comm communication ops, summary $(du -sm "$sum" | cut -f1) MB"
    echo
    echo "| cap | traces, held | traces, spilled | summary, held | summary, spilled |"
    echo "|---|---|---|---|---|"
} | tee "$out/spill.md"
for cap in none $caps; do
    if [ "$cap" = none ]; then cgroup=""; else make_cgroup "$cap"; fi
    [ "$cap" != none ] && [ -z "$cgroup" ] && { echo "(no memory cgroup can be made here: caps left out)" | tee -a "$out/spill.md"; break; }
    th=$(capped "$bin" --trace "$dir" --metrics --pages never)
    ts=$(capped "$bin" --trace "$dir" --metrics --pages always)
    sh=$(first_open never)
    ss=$(first_open always)
    echo "| $cap$([ "$cap" = none ] || echo " MB") | $(cell "$th") | $(cell "$ts") | $(cell "$sh") | $(cell "$ss") |" | tee -a "$out/spill.md"
done
[ -n "$cgroup" ] && rmdir "$cgroup" 2>/dev/null || true
echo "written to $out/spill.md"
