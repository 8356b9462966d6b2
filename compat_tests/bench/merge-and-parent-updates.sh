#!/usr/bin/env bash
# Issue 5's benchmarks with `saker bench meta` against fresh release servers, RUNS alternating
# runs of every configuration (default 3); medians in OUT_DIR/summary.json.
#
#   1. create in one shared directory (16 threads), for --mnodes 1, 2, 4 and the four
#      combinations of --merge true|false and --parent-updates async|sync;
#   2. create + stat with bursts of 10, 100, 1000 files per directory (4 groups, both modes);
#   3. a directory's stat right after k = 1 ... 10,000 creates in it (4 groups, both modes).
#
# Usage: merge-and-parent-updates.sh [OUT_DIR]   (ports 29900-29902 must be free)
set -euo pipefail
BIN=${SAKER_BIN:-${CARGO_TARGET_DIR:-$(dirname "$0")/../../target}/release/saker}
OUT=${1:-/tmp/merge_bench}; rm -rf "$OUT"; mkdir -p "$OUT"
RUNS=${RUNS:-3}
FILES=${FILES:-10000}

# run NAME "server flags" "bench flags"
run() {
  local name=$1 srv=$2 bench=$3 d="$OUT/data"
  rm -rf "$d"; mkdir -p "$d"
  # shellcheck disable=SC2086
  SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=sk12345678 "$BIN" server --data-dir "$d" \
    --s3-addr 127.0.0.1:29900 --admin-addr 127.0.0.1:29901 --rpc-addr 127.0.0.1:29902 \
    $srv >"$OUT/$name.srv.log" 2>&1 &
  local pid=$!
  for _ in $(seq 300); do curl -sf http://127.0.0.1:29901/health >/dev/null && break; sleep 0.1; done
  # shellcheck disable=SC2086
  SAKER_CLUSTER_CREDENTIAL="$d/cluster-credential.json" "$BIN" bench meta --cluster 127.0.0.1:29902 --json "$OUT/$name.json" $bench >"$OUT/$name.txt" 2>&1
  kill "$pid"; wait "$pid" || true
  rm -rf "$d"
}

for r in $(seq "$RUNS"); do
  for m in 1 2 4; do
    for merge in true false; do
      for pu in async sync; do
        run "shared-m$m-merge$merge-$pu-r$r" "--mnodes $m --merge $merge --parent-updates $pu" \
          "--shared-dir --threads 16 --files $FILES --depth 2 --ops create"
      done
    done
  done
  for pu in async sync; do
    for b in 10 100 1000; do
      run "burst$b-$pu-r$r" "--mnodes 4 --parent-updates $pu" \
        "--threads 16 --files $FILES --depth 2 --burst $b --ops create,stat"
    done
    run "statdir-$pu-r$r" "--mnodes 4 --parent-updates $pu" \
      "--threads 16 --files 16 --depth 2 --ops statdir --statdir-k 1,10,100,1000,10000"
  done
done

python3 - "$OUT" <<'PY'
import json, glob, os, re, statistics, sys
out = sys.argv[1]
rows = {}
for f in glob.glob(os.path.join(out, "*.json")):
    name = re.sub(r"-r\d+$", "", os.path.basename(f)[:-5])
    for r in json.load(open(f))["results"]:
        rows.setdefault((name, r["op"]), []).append(r)
summary = []
for (name, op), rs in sorted(rows.items()):
    med = lambda k: statistics.median(x[k] for x in rs)
    summary.append({"config": name, "op": op, "runs": len(rs),
                    "ops_per_sec": med("ops_per_sec"), "p50_ms": med("p50_ms"),
                    "p99_ms": med("p99_ms"), "rpcs_per_op": med("rpcs_per_op"),
                    "server_msgs_per_op": med("server_msgs_per_op"),
                    "mean_batch": med("mean_batch"), "errors": sum(x["errors"] for x in rs)})
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
for s in summary:
    print(f'{s["config"]:<34} {s["op"]:<20} {s["ops_per_sec"]:>9.0f}/s p50 {s["p50_ms"]:>8.3f} ms '
          f'batch {s["mean_batch"]:>6.1f} msgs/op {s["server_msgs_per_op"]:>5.2f} err {s["errors"]}')
PY
