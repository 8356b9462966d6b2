#!/usr/bin/env bash
# What erasure coding costs reads (issue 63): one all-in-one server on six chunk directories
# (`--chunk-dirs`); bucket `rep3` keeps objects as three copies, bucket `ec42` the same objects
# coded 4+2 (a lifecycle rule, Days 0, run once). `saker bench s3 --phases get` reads each,
# alternating, RUNS rounds per size: healthy GETs, then the same with one directory's shards
# and copies gone (moved aside; the server restarted so its volumes forget them). Medians,
# the ec/rep ratio of ops/s, and p99 latency degraded over healthy.
#
# usage: ec-get.sh OUT_DIR
# knobs: RUNS (3), DURATION (8s), SIZES (1MiB,16MiB), CONCURRENCY (16), FILL (1s: how long the
#        PUT phase that fills each bucket runs; mind the disk, three copies of what it writes)
# needs: a release build of saker, curl, python3.
set -euo pipefail
OUT=${1:?usage: ec-get.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
RUNS=${RUNS:-3}
DURATION=${DURATION:-8s}
SIZES=${SIZES:-1MiB,16MiB}
CONC=${CONCURRENCY:-16}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
D="$OUT/server"
rm -rf "$D"; mkdir -p "$D"
dirs=""; for i in 0 1 2 3 4 5; do dirs="$dirs${dirs:+,}$D/disk$i"; done
PORT=19990
pid=""
start() {
  setsid "$SAKER" server --data-dir "$D/data" --chunk-dirs "$dirs" --gc-grace 1s --gc-interval 500ms \
    --s3-addr 127.0.0.1:$PORT --admin-addr 127.0.0.1:$((PORT + 1)) --rpc-addr 127.0.0.1:$((PORT + 2)) \
    >>"$D/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do curl -s -o /dev/null http://127.0.0.1:$PORT/ && return; sleep 0.5; done
  echo "the server did not start" >&2; exit 1
}
stop() { kill -- -"$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }
trap stop EXIT
bench() { # bucket phases json [extra...]
  "$SAKER" bench s3 --endpoint 127.0.0.1:$PORT --access-key benchak --secret-key benchsecret123 \
    --bucket "$1" --sizes "$SIZES" --concurrency "$CONC" --duration "$DURATION" --phases "$2" \
    --keep --keys "$OUT/keys-$1" --json "$3" >>"$OUT/bench.log" 2>&1
}
admin() { "$SAKER" admin "$@" --admin-endpoint http://127.0.0.1:$((PORT + 1)) >>"$OUT/admin.log"; }
start
# Fill both buckets (a short PUT phase each), then code bucket ec.
DURATION=${FILL:-1s} bench rep3 put "$OUT/fill-rep.json"
DURATION=${FILL:-1s} bench ec42 put "$OUT/fill-ec.json"
python3 - "$PORT" <<'PY'
import sys, boto3
c = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", aws_access_key_id="benchak",
                 aws_secret_access_key="benchsecret123", region_name="us-east-1")
c.put_bucket_lifecycle_configuration(Bucket="ec42", LifecycleConfiguration={"Rules": [{
    "ID": "all", "Status": "Enabled", "Filter": {"Prefix": ""},
    "Transitions": [{"Days": 0, "StorageClass": "EC_4_2"}]}]})
PY
admin lifecycle run ec42
for mode in healthy degraded; do
  if [ "$mode" = degraded ]; then
    stop
    mv "$D/disk2" "$D/disk2.aside"; mkdir -p "$D/disk2"
    start
  fi
  for r in $(seq 1 "$RUNS"); do
    for b in rep3 ec42; do bench "$b" get "$OUT/$mode-$b-$r.json"; done
  done
done
stop
mv "$D/disk2.aside" "$D/disk2.back" 2>/dev/null || true
python3 - "$OUT" "$RUNS" <<'PY'
import json, os, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
cells = {}
for mode in ("healthy", "degraded"):
    for b in ("rep3", "ec42"):
        for r in range(1, runs + 1):
            for res in json.load(open(os.path.join(out, f"{mode}-{b}-{r}.json")))["results"]:
                key = (mode, b, res["size"])
                cells.setdefault(key, []).append(res)
summary = []
name = {"rep3": "rep", "ec42": "ec"}
sizes = sorted({k[2] for k in cells})
for size in sizes:
    row = {"size": size}
    for mode in ("healthy", "degraded"):
        for b in ("rep3", "ec42"):
            rs = cells[(mode, b, size)]
            row[f"{mode}_{name[b]}_ops"] = statistics.median(r["ops_per_sec"] for r in rs)
            row[f"{mode}_{name[b]}_p99_ms"] = statistics.median(r.get("p99_ms", 0) for r in rs)
            row[f"{mode}_{name[b]}_errors"] = sum(r["errors"] + r.get("bad_bodies", 0) for r in rs)
    row["healthy_ec_over_rep"] = round(row["healthy_ec_ops"] / row["healthy_rep_ops"], 3)
    if row["healthy_ec_p99_ms"]:
        row["ec_p99_degraded_over_healthy"] = round(row["degraded_ec_p99_ms"] / row["healthy_ec_p99_ms"], 3)
    summary.append(row)
result = {"what": "GET from an erasure-coded (4+2) bucket against a replicated one on one all-in-one "
          "server with six chunk directories, healthy and with one directory gone; medians of "
          f"{runs} alternating rounds (compat_tests/bench/ec-get.sh)", "cells": summary}
json.dump(result, open(os.path.join(out, "ec-get.json"), "w"), indent=1)
print(json.dumps(result, indent=1))
PY
