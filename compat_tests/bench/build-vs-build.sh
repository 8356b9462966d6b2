#!/usr/bin/env bash
# Two builds of saker side by side: the same all-in-one server (one data directory, defaults)
# started from BASE_BIN and from SAKER_BIN in turn, RUNS alternating rounds, each round a fresh
# server measured by the same client (`saker bench s3` of SAKER_BIN). Medians of ops/s and
# p99 per phase and size, errors counted, and new/base ratios in OUT_DIR/summary.json. What it
# answers: whether a change costs requests that do not use it (issue 63: 4 KiB PUT and GET in
# a bucket with no erasure-coding class, against the build before erasure coding).
#
# usage: build-vs-build.sh OUT_DIR
# knobs: BASE_BIN (required), SAKER_BIN, RUNS (3), SIZES (4KiB), PHASES (put,get),
#        CONCURRENCY (16), DURATION (10s).
# needs: two release builds of saker, curl, python3.
set -euo pipefail
OUT=${1:?usage: build-vs-build.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
NEW=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
BASE=${BASE_BIN:?set BASE_BIN to the saker binary to compare against}
for b in "$NEW" "$BASE"; do [ -x "$b" ] || { echo "no saker binary at $b" >&2; exit 1; }; done
RUNS=${RUNS:-3}
SIZES=${SIZES:-4KiB}
PHASES=${PHASES:-put,get}
CONC=${CONCURRENCY:-16}
DURATION=${DURATION:-10s}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
PORT=19970
pid=""
stop() { [ -n "$pid" ] && { kill -- -"$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; pid=""; }
trap stop EXIT
for r in $(seq 1 "$RUNS"); do
  for which in base new; do
    bin=$NEW; [ "$which" = base ] && bin=$BASE
    rm -rf "$OUT/server"; mkdir -p "$OUT/server"
    setsid "$bin" server --data-dir "$OUT/server/data" --s3-addr 127.0.0.1:$PORT \
      --admin-addr 127.0.0.1:$((PORT + 1)) --rpc-addr 127.0.0.1:$((PORT + 2)) \
      >>"$OUT/server-$which.log" 2>&1 &
    pid=$!
    up=0
    for _ in $(seq 1 120); do curl -s -o /dev/null http://127.0.0.1:$PORT/ && { up=1; break; }; sleep 0.5; done
    [ "$up" = 1 ] || { echo "the $which server did not start" >&2; exit 1; }
    "$NEW" bench s3 --endpoint 127.0.0.1:$PORT --access-key benchak --secret-key benchsecret123 \
      --sizes "$SIZES" --phases "$PHASES" --concurrency "$CONC" --duration "$DURATION" \
      --json "$OUT/$which-$r.json" >>"$OUT/bench.log" 2>&1
    stop
  done
done
rm -rf "$OUT/server"
python3 - "$OUT" "$RUNS" "$BASE" "$NEW" <<'PY'
import json, os, statistics, sys
out, runs, base_bin, new_bin = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
cells = {}
for which in ("base", "new"):
    for r in range(1, runs + 1):
        for res in json.load(open(os.path.join(out, f"{which}-{r}.json")))["results"]:
            cells.setdefault((res["phase"], res["size"], which), []).append(res)
rows = []
for (phase, size) in sorted({(p, s) for (p, s, _) in cells}):
    row = {"phase": phase, "size": size}
    for which in ("base", "new"):
        rs = cells[(phase, size, which)]
        row[f"{which}_ops"] = round(statistics.median(x["ops_per_sec"] for x in rs), 1)
        row[f"{which}_p99_ms"] = round(statistics.median(x.get("p99_ms", 0) for x in rs), 3)
        row[f"{which}_errors"] = sum(x["errors"] + x.get("bad_bodies", 0) for x in rs)
    row["new_over_base"] = round(row["new_ops"] / row["base_ops"], 3)
    rows.append(row)
summary = {"what": f"two builds side by side on one all-in-one server, medians of {runs} alternating "
           "rounds (compat_tests/bench/build-vs-build.sh)", "base": base_bin, "new": new_bin,
           "cells": rows}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
