#!/usr/bin/env bash
# What mutual TLS on the cluster RPC costs: `saker bench s3` (PUT/GET) through node 1 of the
# 3-node cluster of deploy/local-cluster (replication 3), as deployed (every raft message, Meta
# call and chunk over mutual TLS) and with `--insecure-rpc` (plaintext with tokens),
# alternating, RUNS rounds each; medians and the TLS/plain ratios.
#
# usage: rpc-tls-cost.sh OUT_DIR
# knobs: RUNS (3), DURATION (8s), SIZES (4KiB,64KiB).
# needs: a release build of saker (cargo build --release), python3, curl.
set -euo pipefail
OUT=${1:?usage: rpc-tls-cost.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
export SAKER_BIN="$SAKER"
RUNS=${RUNS:-3}
DURATION=${DURATION:-8s}
SIZES=${SIZES:-4KiB,64KiB}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
run="$repo/deploy/local-cluster/run.sh"
trap '"$run" stop "$OUT/cluster" >/dev/null 2>&1 || true' EXIT

for r in $(seq 1 "$RUNS"); do
  for mode in plain tls; do
    echo "round $r: $mode"
    rm -rf "$OUT/cluster"
    args="${SAKER_SERVER_ARGS:-}"
    [ "$mode" = plain ] && args="$args --insecure-rpc"
    SAKER_SERVER_ARGS="$args" "$run" start "$OUT/cluster" >/dev/null
    "$SAKER" bench s3 --endpoint 127.0.0.1:9900 --access-key "$SAKER_ACCESS_KEY" \
      --secret-key "$SAKER_SECRET_KEY" --sizes "$SIZES" --concurrency 16 \
      --duration "$DURATION" --json "$OUT/$mode-$r.json" >/dev/null
    "$run" stop "$OUT/cluster" >/dev/null
  done
done

python3 "$here/compare-modes.py" "$OUT" "$RUNS" plain tls summary.json
