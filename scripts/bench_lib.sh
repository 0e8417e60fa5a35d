# Shared by scripts/bench.sh and scripts/bench_summary.sh (sourced, with
# $out set to the output folder).

build() { # the tool and the trace generator, optimized
    cargo build --release --quiet --example gen_bench
    cargo build --release --quiet
}
measure() { # prints "seconds max_rss_kb" of the command
    # Wall time from bash's clock (time(1) rounds to 10 ms), peak RSS from time(1).
    local t0=$EPOCHREALTIME
    /usr/bin/time -f "%M" -o "$out/time.txt" "$@" >/dev/null 2>"$out/stderr.txt" || {
        cat "$out/stderr.txt" >&2
        return 1
    }
    local t1=$EPOCHREALTIME
    echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $(cat "$out/time.txt")"
}
best_of_3() { # the fastest of three runs (the VM is noisy): "seconds max_rss_kb"
    best_of 3 "$@"
}
best_of() { # N CMD...: the fastest of N runs: "seconds max_rss_kb"
    local n=$1 best="" t rss k
    shift
    for ((k = 0; k < n; k++)); do
        read -r t rss < <(measure "$@")
        if [ -z "$best" ] || awk -v a="$t" -v b="${best%% *}" 'BEGIN { exit !(a < b) }'; then
            best="$t $rss"
        fi
    done
    echo "$best"
}
generate() { # DIR RANKS MB [FLAGS]: the trace set, regenerated when its parameters changed
    local dir=$1 ranks=$2 mb=$3
    shift 3
    local params="$ranks $mb $* $(sha1sum crates/read/src/synth/stream.rs | cut -c1-12)"
    if [ "$(cat "$dir/.params" 2>/dev/null)" != "$params" ]; then
        rm -rf "$dir"
        target/release/examples/gen_bench "$dir" "$ranks" "$mb" "$@"
        echo "$params" >"$dir/.params"
    fi
}
