#!/usr/bin/env bash
# Benchmark cases at an earlier commit and at the working tree, alternating, to tell a
# regression from machine noise (ratios drift between runs on a shared machine).
#
#   tools/bench_against_commit.sh COMMIT ROUNDS CASE [CASE ...]
#   tools/bench_against_commit.sh d5ffc50 2 generation_cache_speedup beam4_cost
#
# The earlier commit is checked out in a temporary worktree and run with this
# checkout's .venv (PYTHONPATH puts its own packages first). Each run writes
# bench-<commit|here>-<round>.json into ./bench-compare/ and prints its summary.
set -euo pipefail
commit=$1 rounds=$2
shift 2
here=$(pwd)
out=$here/bench-compare
python=$here/.venv/bin/python
tree=$(mktemp -d)/tree
mkdir -p "$out"
git worktree add --detach "$tree" "$commit" >/dev/null
trap 'git -C "$here" worktree remove --force "$tree"' EXIT
for round in $(seq 1 "$rounds"); do
  for side in "$commit" here; do
    dir=$here
    [ "$side" = here ] || dir=$tree
    echo "== $side, round $round"
    (cd "$dir" && PYTHONPATH=$dir "$python" -m experiments bench --only "$@" \
      --out "$out/bench-$side-$round.json" 2>&1 | sed -n '/^benchmarks/,/^results/p')
  done
done
