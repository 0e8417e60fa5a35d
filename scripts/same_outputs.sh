#!/usr/bin/env bash
# Whether a change altered what the tool prints: builds REV (default: the
# commit before HEAD) in a temporary worktree, then runs both binaries on
# every trace directory of ../shared/corpus and the bundled samples
# (`--metrics --format json`, `collectives --format json`, `--inputs`) and
# diffs their outputs, paths aside. Prints the directories that differ;
# exit 1 when any does.
#
#   scripts/same_outputs.sh [REV]
set -euo pipefail
cd "$(dirname "$0")/.."
rev=${1:-HEAD~1}
out=target/same_outputs
rm -rf "$out"
mkdir -p "$out"
tree=$(mktemp -d)
trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || true; rm -rf "$tree"' EXIT
git worktree add --detach --quiet "$tree" "$rev"
# REV is built in a target folder of its own, kept between runs: cargo
# names a workspace's units alike wherever the checkout lies, so REV built
# into this tree's target would replace this tree's build, and a build of
# this tree then found "fresh" would hand back REV's binary.
CARGO_TARGET_DIR="$PWD/target/rev" cargo build --quiet --manifest-path "$tree/Cargo.toml" --bin ccl-bench
cp target/rev/debug/ccl-bench "$out/before"
cargo build --quiet --bin ccl-bench
cp target/debug/ccl-bench "$out/after"
cmp -s "$out/before" "$out/after" && echo "note: the two binaries are the same" >&2

dirs=(trace_collection/llama_fsdp_8gpu trace_collection/llama_fsdp_8gpu_balanced)
if [ -d ../shared/corpus ]; then
    while IFS= read -r d; do dirs+=("$d"); done < <(
        find ../shared/corpus -mindepth 2 -maxdepth 2 \( -type d -o -name '*.sqlite' \) | sort
    )
else
    echo "../shared/corpus absent: the bundled samples only" >&2
fi
differ=0
for d in "${dirs[@]}"; do
    for bin in before after; do
        # Paths differ between the two trees; the numbers must not.
        for cmd in "--trace $d --metrics --format json" "collectives $d --format json" "--trace $d --inputs"; do
            rc=0
            # shellcheck disable=SC2086
            timeout 300 "$out/$bin" $cmd >"$out/one.txt" 2>&1 || rc=$?
            sed "s#$PWD#ROOT#g; s#$tree#ROOT#g" "$out/one.txt"
            echo "== $cmd: exit $rc"
        done >"$out/$bin.txt"
    done
    if ! cmp -s "$out/before.txt" "$out/after.txt"; then
        echo "differs: $d"
        diff "$out/before.txt" "$out/after.txt" | head -20 || true
        differ=1
    fi
done
[ $differ = 0 ] && echo "same outputs on ${#dirs[@]} directories (before: $rev)"
exit $differ
