#!/usr/bin/env bash
# What SSE-S3 costs: `saker bench s3` PUT/GET against one all-in-one server holding a master
# key, alternating between a bucket whose default encryption is SSE-S3 (every object sealed
# under its own data key) and one that stores objects as sent; RUNS rounds each; medians and
# the ratio (sealed over plain), per size and concurrency.
#
# usage: sse-cost.sh OUT_DIR
# knobs: RUNS (3), DURATION (8s), SIZES (4KiB,1MiB,16MiB), CONCURRENCY (1,16)
# needs: a release build of saker (cargo build --release), curl, python3 with boto3.
set -euo pipefail
OUT=${1:?usage: sse-cost.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
RUNS=${RUNS:-3}
DURATION=${DURATION:-8s}
SIZES=${SIZES:-4KiB,1MiB,16MiB}
CONCURRENCY=${CONCURRENCY:-1,16}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/data" "$OUT/keys"
mkdir -m 700 "$OUT/keys"
"$SAKER" admin master-key "$OUT/keys/master.key" >/dev/null
"$SAKER" server --data-dir "$OUT/data" --sse-key-file "$OUT/keys/master.key" \
  --s3-addr 127.0.0.1:19900 --admin-addr 127.0.0.1:19901 --rpc-addr 127.0.0.1:19902 \
  >"$OUT/server.log" 2>&1 &
pid=$!
# The data goes at the end (KEEP_DATA=1 keeps it): the rounds leave tens of GB behind.
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; [ "${KEEP_DATA:-0}" = 1 ] || rm -rf "$OUT/data"' EXIT
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:19901/health >/dev/null && break; sleep 0.1; done
python3 - <<'PY'
import boto3
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:19900", aws_access_key_id="benchak",
                  aws_secret_access_key="benchsecret123", region_name="us-east-1")
for b in ("bench-plain", "bench-sealed"):
    s3.create_bucket(Bucket=b)
s3.put_bucket_encryption(Bucket="bench-sealed", ServerSideEncryptionConfiguration={
    "Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
assert s3.get_bucket_encryption(Bucket="bench-sealed")
PY
bench() { # bucket out.json
  "$SAKER" bench s3 --endpoint 127.0.0.1:19900 --access-key benchak \
    --secret-key benchsecret123 --sizes "$SIZES" --concurrency "$CONCURRENCY" --phases put,get \
    --bucket "$1" --duration "$DURATION" --json "$2" >/dev/null
}
for r in $(seq 1 "$RUNS"); do
  echo "round $r"
  bench bench-sealed "$OUT/sealed-$r.json"
  bench bench-plain "$OUT/plain-$r.json"
done

python3 "$here/compare-modes.py" "$OUT" "$RUNS" plain sealed sse-cost.json
