#!/usr/bin/env bash
# The TiKV engine's own overhead: the same all-in-one server on the embedded engine (fjall) and
# on TiKV (`--store tikv` against saker-tikv-sim on loopback), side by side, per round:
#   - `saker bench meta` (create, stat, readdir, unlink, mkdir, rmdir; 16 threads);
#   - `saker bench s3` (PUT and GET of 4 KiB objects, 16 clients).
# The simulator keeps everything in memory and replicates nothing, so this measures what the
# engine adds (PD timestamps, Percolator's two phases, gRPC round trips, serial commits per
# group), not TiKV's speed. Medians of RUNS rounds into OUT_DIR/tikv.json.
#
# usage: tikv.sh OUT_DIR
# knobs: RUNS (3), FILES (4000), DURATION (5s)
# needs: a release build of saker and saker-tikv-sim (cargo build --release --bins).
set -euo pipefail
OUT=${1:?usage: tikv.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
REL=${CARGO_TARGET_DIR:-$repo/target}/release
SAKER=${SAKER_BIN:-$REL/saker}
SIM=${SIM_BIN:-$REL/saker-tikv-sim}
for b in "$SAKER" "$SIM"; do
  [ -x "$b" ] || { echo "no binary at $b (cargo build --release --bins)" >&2; exit 1; }
done
RUNS=${RUNS:-3}
FILES=${FILES:-4000}
DURATION=${DURATION:-5s}
AK=benchak SK=benchsecret123
export SAKER_ACCESS_KEY=$AK SAKER_SECRET_KEY=$SK
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
wait_health() { for _ in $(seq 1 200); do curl -sf "$1/health" >/dev/null && return; sleep 0.1; done; echo "no health at $1" >&2; exit 1; }

"$SIM" --listen 127.0.0.1:23791 >"$OUT/sim.out" 2>"$OUT/sim.log" &
pids+=($!)
for _ in $(seq 1 100); do grep -q '^pd ' "$OUT/sim.out" 2>/dev/null && break; sleep 0.1; done

for i in $(seq 1 "$RUNS"); do
  for engine in fjall tikv; do
    d="$OUT/data-$engine-$i"
    rm -rf "$d"
    args=(--store "$engine")
    [ "$engine" = tikv ] && args+=(--pd 127.0.0.1:23791 --tikv-keyspace "bench$i")
    "$SAKER" server --data-dir "$d" --s3-addr 127.0.0.1:19900 --admin-addr 127.0.0.1:19901 \
      --rpc-addr 127.0.0.1:19902 "${args[@]}" >"$OUT/server-$engine-$i.log" 2>&1 &
    pid=$!
    pids+=($pid)
    wait_health http://127.0.0.1:19901
    echo "== run $i: $engine"
    SAKER_CLUSTER_CREDENTIAL=$d/cluster-credential.json "$SAKER" bench meta \
      --cluster 127.0.0.1:19902 --threads 16 --files "$FILES" \
      --json "$OUT/meta-$engine-$i.json" >"$OUT/meta-$engine-$i.txt" 2>&1
    "$SAKER" bench s3 --endpoint 127.0.0.1:19900 --access-key "$AK" --secret-key "$SK" \
      --sizes 4KiB --concurrency 16 --phases put,get --bucket bench --duration "$DURATION" \
      --label "$engine" --json "$OUT/s3-$engine-$i.json" >"$OUT/s3-$engine-$i.txt" 2>&1
    kill "$pid"; wait "$pid" 2>/dev/null || true
    rm -rf "$d"
  done
done

python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
def med(rows, key):
    return statistics.median(r[key] for r in rows)
report = {"what": "saker all-in-one on fjall vs on TiKV (saker-tikv-sim on loopback): the engine's own overhead",
          "runs": runs, "meta": [], "s3": []}
for op in ("create", "stat", "readdir", "unlink", "mkdir", "rmdir"):
    row = {"op": op}
    for e in ("fjall", "tikv"):
        rs = [r for i in range(1, runs + 1) for r in json.load(open(f"{out}/meta-{e}-{i}.json"))["results"] if r["op"] == op]
        row[e] = {"ops_per_sec": med(rs, "ops_per_sec"), "p50_ms": med(rs, "p50_ms"), "errors": sum(r["errors"] for r in rs)}
    row["tikv_vs_fjall"] = row["tikv"]["ops_per_sec"] / row["fjall"]["ops_per_sec"]
    report["meta"].append(row)
for phase in ("put", "get"):
    row = {"phase": phase, "size": "4KiB", "concurrency": 16}
    for e in ("fjall", "tikv"):
        rs = [r for i in range(1, runs + 1) for r in json.load(open(f"{out}/s3-{e}-{i}.json"))["results"] if r["phase"] == phase]
        row[e] = {"ops_per_sec": med(rs, "ops_per_sec"), "p50_ms": med(rs, "p50_ms"), "p99_ms": med(rs, "p99_ms"),
                  "errors": sum(r.get("errors", 0) for r in rs)}
    row["tikv_vs_fjall"] = row["tikv"]["ops_per_sec"] / row["fjall"]["ops_per_sec"]
    report["s3"].append(row)
json.dump(report, open(f"{out}/tikv.json", "w"), indent=2)
for r in report["meta"]:
    print(f"meta {r['op']:8} fjall {r['fjall']['ops_per_sec']:9.0f}/s  tikv {r['tikv']['ops_per_sec']:9.0f}/s  {r['tikv_vs_fjall']:.2f}x")
for r in report["s3"]:
    print(f"s3 {r['phase']:4} 4KiB fjall {r['fjall']['ops_per_sec']:9.0f}/s  tikv {r['tikv']['ops_per_sec']:9.0f}/s  {r['tikv_vs_fjall']:.2f}x")
PY
