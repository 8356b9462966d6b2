#!/usr/bin/env bash
# Runs one benchmark 3 times, alternating the two engines (or layouts), and summarizes:
#   compat_tests/bench/engines/run.sh meta|chunks OUT_DIR [extra args for every run]
# Run files: OUT_DIR/<subject>-<n>.json; medians and ratios: OUT_DIR/summary.json (and a markdown
# table on stdout). Data goes to $BENCH_DATA_DIR (default /tmp/saker-bench), deleted after each
# cell: put it on the file system you want to measure (fsync cost is the point).
set -euo pipefail
kind=${1:?usage: run.sh meta|chunks OUT_DIR [args]}
out=${2:?usage: run.sh meta|chunks OUT_DIR [args]}
shift 2
here=$(cd "$(dirname "$0")" && pwd)
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/root/.cache/saker-bench-target}
cargo build --release --manifest-path "$here/Cargo.toml"
bin=$CARGO_TARGET_DIR/release/saker-bench-engines
data=${BENCH_DATA_DIR:-/tmp/saker-bench}
runs=${RUNS:-3}
case $kind in
  meta) flag=--engine; a=redb; b=fjall ;;
  chunks) flag=--layout; a=file; b=volume ;;
  *) echo "unknown benchmark $kind" >&2; exit 2 ;;
esac
mkdir -p "$out"
files=()
for i in $(seq 1 "$runs"); do
  for s in "$a" "$b"; do
    echo "== $kind run $i: $s"
    "$bin" "$kind" "$flag" "$s" --dir "$data/$kind-$s" --run "$i" --out "$out/$s-$i.json" "$@"
    files+=("$out/$s-$i.json")
  done
done
"$bin" summarize --baseline "$a" --candidate "$b" --out "$out/summary.json" "${files[@]}"
