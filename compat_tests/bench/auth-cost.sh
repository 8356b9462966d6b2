#!/usr/bin/env bash
# What S3 authorization costs: `saker bench s3` PUT/GET 4 KiB at c=16 against one all-in-one
# server with one key and bucket, alternating between the key's `admin` policy and no bucket
# policy (nothing is evaluated) and an identity policy (with a condition) plus a bucket policy
# (a Deny statement with a condition that does not match), so every request is evaluated; RUNS
# rounds each; medians and the ratio.
#
# usage: auth-cost.sh OUT_DIR
# knobs: RUNS (5), DURATION (10s)
# needs: a release build of saker (cargo build --release), curl, python3 with boto3.
set -euo pipefail
OUT=${1:?usage: auth-cost.sh OUT_DIR}
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
admin() { "$SAKER" admin --admin-endpoint http://127.0.0.1:19901 "$@" >/dev/null; }

cat >"$OUT/key-policy.json" <<'JSON'
{"Version":"2012-10-17","Statement":[
  {"Sid":"Objects","Effect":"Allow","Action":["s3:GetObject","s3:PutObject","s3:DeleteObject"],
   "Resource":"arn:aws:s3:::saker-bench/*","Condition":{"Bool":{"aws:SecureTransport":"false"}}},
  {"Sid":"Bucket","Effect":"Allow","Action":["s3:CreateBucket","s3:ListBucket"],
   "Resource":"arn:aws:s3:::saker-bench"}]}
JSON
admin key create --access-key AKPOLICY --secret-key policysecret123 --policy "$OUT/key-policy.json"
bench() { # out.json
  "$SAKER" bench s3 --endpoint 127.0.0.1:19900 --access-key AKPOLICY \
    --secret-key policysecret123 --sizes 4KiB --concurrency 16 --phases put,get \
    --duration "$DURATION" --json "$1" >/dev/null
}
cat >"$OUT/bucket-policy.json" <<'JSON'
{"Version":"2012-10-17","Statement":[
  {"Sid":"OnlyLocal","Effect":"Deny","Principal":"*","Action":"s3:*",
   "Resource":["arn:aws:s3:::saker-bench","arn:aws:s3:::saker-bench/*"],
   "Condition":{"NotIpAddress":{"aws:SourceIp":["127.0.0.0/8","10.0.0.0/8"]}}}]}
JSON
policies() { # on|off: the key's policy and the bucket's, set, or admin and removed
  if [ "$1" = on ]; then
    admin key policy set --access-key AKPOLICY "$OUT/key-policy.json"
  else
    admin key policy set --access-key AKPOLICY admin
  fi
  python3 - "$1" "$OUT/bucket-policy.json" <<'PY'
import sys, boto3
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:19900", aws_access_key_id="benchak",
                  aws_secret_access_key="benchsecret123", region_name="us-east-1")
if sys.argv[1] == "on":
    s3.put_bucket_policy(Bucket="saker-bench", Policy=open(sys.argv[2]).read())
else:
    s3.delete_bucket_policy(Bucket="saker-bench")
PY
}
# The same key on the same bucket, alternately with the admin policy and no bucket policy
# (nothing is evaluated) and with both policies (every request evaluated).
bench "$OUT/warmup.json"
for r in $(seq 1 "$RUNS"); do
  echo "round $r"
  policies on
  bench "$OUT/policy-$r.json"
  policies off
  bench "$OUT/none-$r.json"
done

python3 "$here/compare-modes.py" "$OUT" "$RUNS" none policy auth-cost.json
