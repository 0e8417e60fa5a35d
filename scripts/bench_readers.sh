#!/usr/bin/env bash
# Every reader's throughput and memory against its floor, in one run: for each
# input format, a generated input of about $MB megabytes (default 200), read by
# `ccl-bench --metrics` (Flight Recorder dumps: `ccl-bench hang`) and by the
# floor under it: the parsing library alone reading the same bytes and building
# nothing the tool keeps (examples/floor.rs: serde_json checking, prost
# decoding, SQLite stepping through the rows, Parquet decoding to Arrow), or,
# for pickles, where no such library exists in Rust, Python's pickle.load.
# Rates are per CPU second (user + system), so that one file on one core and
# many files on every core compare; the fastest of three runs.
# Prints a Markdown table and writes it to target/bench/readers.md.
#
#   scripts/bench_readers.sh            # every reader
#   ONLY=xspace scripts/bench_readers.sh
#   BEFORE=path/to/old/ccl-bench scripts/bench_readers.sh   # adds its CPU time and RSS
#
# The nsys-jax archive is a tenth of $MB (its rows take 5 bytes each: 20 MB
# are 4 M ranges); the memory snapshot about $MB like the others (copies of
# 0.7 MB; it was 100 copies, 71 MB, where the process's fixed 14 MB weighed
# three times as much).
# The nsys, execution trace and memory snapshot inputs repeat the real files
# of ../shared/corpus (skipped with a message when it is absent).
set -euo pipefail
cd "$(dirname "$0")/.."
out=target/bench
mkdir -p "$out"
bin=target/release/ccl-bench
mb=${MB:-200}
corpus=../shared/corpus
cargo build --release --quiet --example gen_readers --example floor --example gen_bench --example gen_fr
cargo build --release --quiet
gen=target/release/examples/gen_readers
floor=target/release/examples/floor

run() { # prints "wall cpu max_rss_kb" of the command, the fastest of three
    local best="" t0 t1 line
    for _ in 1 2 3; do
        t0=$EPOCHREALTIME
        # Exit 1 of `hang` is its verdict, not a failure.
        /usr/bin/time -f "%U %S %M" -o "$out/time.txt" "$@" >/dev/null 2>"$out/stderr.txt" || [ $? -le 1 ] || {
            cat "$out/stderr.txt" >&2
            return 1
        }
        t1=$EPOCHREALTIME
        line=$(awk -v a="$t0" -v b="$t1" 'END { printf "%.3f %.3f %d", b - a, $1 + $2, $3 }' "$out/time.txt")
        if [ -z "$best" ] || awk -v a="${line%% *}" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then
            best=$line
        fi
    done
    echo "$best"
}
py_pickle='import pickle, sys
for f in sys.argv[1:]:
    with open(f, "rb") as h:
        pickle.load(h)'

# name | how to make DIR (a command with DIR in it) | what the tool runs | the floor's kind | the floor's name
sets=(
    "Kineto JSON|target/release/examples/gen_bench DIR 8 $mb|--metrics|json|serde_json"
    "Kineto JSON .gz|target/release/examples/gen_bench DIR 8 $mb --gzip|--metrics|json|serde_json (gzip inflated first)"
    "XLA trace JSON|$gen xla-json DIR $mb|--metrics|json|serde_json"
    "XSpace|$gen xspace DIR $mb|--metrics|xspace|prost"
    "nsys-jax|$gen nsys-jax DIR $((mb / 10))|--metrics|zip|Parquet to Arrow"
    "nsys SQLite|$gen nsys-sqlite DIR $mb $corpus/nsys/h100_tiny_transformer/h100_tiny_transformer_nsys.sqlite|--metrics|sqlite|SQLite rows"
    "nsys JSON|$gen nsys-json DIR $mb $corpus/nsys/h100_tiny_transformer/h100_tiny_transformer_nsys.json|--metrics|jsonl|serde_json per line"
    "execution trace|$gen et DIR $mb $corpus/et/h100_tiny_transformer/h100_tiny_transformer_et.json|--metrics|json|serde_json"
    "memory snapshot|python3 scripts/tile_snapshot.py $corpus/memory/h100_tiny_transformer/h100_tiny_transformer_memory_snapshot.pickle DIR/rank0_memory_snapshot.pickle $((mb * 142 / 100))|--metrics|pickle|Python pickle.load"
    "Flight Recorder pickle|target/release/examples/gen_fr DIR 256 2000|hang|pickle|Python pickle.load"
    "Flight Recorder JSON|target/release/examples/gen_fr DIR 256 2000 --json|hang|json|serde_json"
)
{
    echo "Machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GB", $2/1e6}' /proc/meminfo) RAM, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
    echo
    echo "| reader | input | wall | CPU | MB per CPU s | floor | floor MB per CPU s | of the floor | peak RSS | of the input |${BEFORE:+ before: CPU | its RSS |}"
    echo "|---|---|---|---|---|---|---|---|---|---|${BEFORE:+---|---|}"
} | tee "$out/readers.md"
for s in "${sets[@]}"; do
    IFS='|' read -r name make args kind fname <<<"$s"
    [ -n "${ONLY:-}" ] && [[ "$name" != *"$ONLY"* ]] && continue
    if [[ "$make" == *"$corpus"* ]] && [ ! -d "$corpus" ]; then
        echo "skipping $name: it repeats a real file of $corpus, which is absent" >&2
        continue
    fi
    dir="$out/data/readers/$(echo "$name" | tr ' .A-Z-' '__a-z_')"
    params="$make $(cat examples/gen_readers.rs scripts/tile_snapshot.py crates/read/src/synth/*.rs | sha1sum | cut -c1-12)"
    if [ "$(cat "$dir/.params" 2>/dev/null)" != "$params" ]; then
        rm -rf "$dir"
        mkdir -p "$dir"
        ${make//DIR/$dir} >/dev/null 2>&1
        echo "$params" >"$dir/.params"
    fi
    files=()
    for f in "$dir"/*; do files+=("$f"); done
    if [[ "$name" == *.gz ]]; then
        bytes=$(for f in "${files[@]}"; do gzip -dc "$f"; done | wc -c)
    else
        bytes=$(cat "${files[@]}" | wc -c)
    fi
    if [ "$args" = hang ]; then
        read -r t cpu rss < <(run "$bin" hang "$dir")
    else
        read -r t cpu rss < <(run "$bin" --trace "$dir" $args)
    fi
    if [ "$kind" = pickle ]; then
        read -r _ fcpu _ < <(run python3 -c "$py_pickle" "${files[@]}")
    else
        read -r _ fcpu _ < <(run "$floor" "$kind" "${files[@]}")
    fi
    bcpu="" brss=""
    if [ -n "${BEFORE:-}" ]; then
        if [ "$args" = hang ]; then
            read -r _ bcpu brss < <(run "$BEFORE" hang "$dir")
        else
            read -r _ bcpu brss < <(run "$BEFORE" --trace "$dir" $args)
        fi
    fi
    awk -v n="$name" -v b="$bytes" -v t="$t" -v c="$cpu" -v rss="$rss" -v f="$fname" -v fc="$fcpu" -v bc="$bcpu" -v brss="$brss" 'BEGIN {
        mb = b / 1e6
        c = (c > 0.01 ? c : 0.01); fc = (fc > 0.01 ? fc : 0.01)
        printf "| %s | %.0f MB | %.2f s | %.2f s | %.0f | %s | %.0f | %.0f %% | %.0f MB | %.2fx |",
            n, mb, t, c, mb / c, f, mb / fc, 100 * fc / c, rss / 1024, rss * 1024 / b
        if (bc != "") printf " %.2f s | %.0f MB |", bc, brss / 1024
        printf "\n"
    }' | tee -a "$out/readers.md"
done
echo "written to $out/readers.md"
