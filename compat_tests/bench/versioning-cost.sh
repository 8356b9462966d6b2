#!/usr/bin/env bash
# What bucket versioning costs: `saker bench s3` PUT/GET 4 KiB at c=16 against one all-in-one
# server, alternating between a bucket that keeps versions (every PUT keeps the object it
# replaces) and one that does not; RUNS rounds each; medians and the ratio.
#
# usage: versioning-cost.sh OUT_DIR
# knobs: RUNS (5), DURATION (10s)
# needs: a release build of saker (cargo build --release), curl, python3 with boto3.
set -euo pipefail
OUT=${1:?usage: versioning-cost.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
RUNS=${RUNS:-5}
DURATION=${DURATION:-10s}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/data"
"$SAKER" server --data-dir "$OUT/data" --s3-addr 127.0.0.1:19900 \
  --admin-addr 127.0.0.1:19901 --rpc-addr 127.0.0.1:19902 >"$OUT/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:19901/health >/dev/null && break; sleep 0.1; done
python3 - <<'PY'
import boto3
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:19900", aws_access_key_id="benchak",
                  aws_secret_access_key="benchsecret123", region_name="us-east-1")
for b in ("bench-plain", "bench-versioned"):
    s3.create_bucket(Bucket=b)
s3.put_bucket_versioning(Bucket="bench-versioned",
                         VersioningConfiguration={"Status": "Enabled"})
PY
bench() { # bucket out.json
  "$SAKER" bench s3 --endpoint 127.0.0.1:19900 --access-key benchak \
    --secret-key benchsecret123 --sizes 4KiB --concurrency 16 --phases put,get \
    --bucket "$1" --duration "$DURATION" --json "$2" >/dev/null
}
bench bench-plain "$OUT/warmup.json"
for r in $(seq 1 "$RUNS"); do
  echo "round $r"
  bench bench-versioned "$OUT/versioned-$r.json"
  bench bench-plain "$OUT/plain-$r.json"
done

python3 "$here/compare-modes.py" "$OUT" "$RUNS" plain versioned versioning-cost.json
