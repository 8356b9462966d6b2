#!/usr/bin/env bash
# What bucket notifications cost (issue 64): one all-in-one server, a webhook target that is
# `saker bench notify` itself, and 4 KiB PUT load alternating between a plain bucket and one
# whose ObjectCreated events go to the target (ROUNDS rounds of DURATION each). Reports PUT
# ops/s of both and their ratio, and acknowledgement-to-event latency (p50/p99/max) with
# events missing and duplicated. Writes OUT_DIR/notify-cost.json.
#
# usage: notify-cost.sh OUT_DIR
# knobs: ROUNDS (3), DURATION (10s), CONCURRENCY (64), SAKER_BIN (else the release build).
set -euo pipefail
OUT=${1:?usage: notify-cost.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/data"
"$SAKER" server --data-dir "$OUT/data" \
  --s3-addr 127.0.0.1:19900 --admin-addr 127.0.0.1:19901 --rpc-addr 127.0.0.1:19902 \
  >"$OUT/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$OUT/data"' EXIT
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:19901/health >/dev/null && break; sleep 0.1; done
arn=$("$SAKER" admin --admin-endpoint http://127.0.0.1:19901 notify target add bench \
  --webhook http://127.0.0.1:19600/ | grep -o 'arn:saker:sqs::[^ ]*')
"$SAKER" bench notify --endpoint 127.0.0.1:19900 --access-key benchak \
  --secret-key benchsecret123 --listen 127.0.0.1:19600 --arn "$arn" \
  --rounds "${ROUNDS:-3}" --duration "${DURATION:-10s}" --concurrency "${CONCURRENCY:-64}" \
  --server-pid "$pid" --label "all-in-one, webhook target" --json "$OUT/notify-cost.json"
