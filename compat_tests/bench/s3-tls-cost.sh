#!/usr/bin/env bash
# What TLS on the S3 listener costs: `saker bench s3` (PUT/GET) against the all-in-one server
# over plain HTTP and over HTTPS (`--tls-cert/--tls-key`, a P-256 certificate from a CA this
# script makes with openssl), alternating, RUNS rounds each, a fresh server per round;
# medians and the https/http ratios.
#
# usage: s3-tls-cost.sh OUT_DIR
# knobs: RUNS (3), DURATION (8s), SIZES (4KiB,64KiB).
# needs: a release build of saker (cargo build --release), python3, curl, openssl.
set -euo pipefail
OUT=${1:?usage: s3-tls-cost.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
RUNS=${RUNS:-3}
DURATION=${DURATION:-8s}
SIZES=${SIZES:-4KiB,64KiB}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
pid=""
trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true' EXIT

# A CA and a certificate for 127.0.0.1 it signed.
certs="$OUT/certs"
mkdir -p "$certs"
(
  cd "$certs"
  ec=(-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes)
  openssl req -x509 "${ec[@]}" -keyout ca.key -out ca.pem -days 2 -subj "/CN=bench CA" 2>/dev/null
  openssl req "${ec[@]}" -keyout server.key -out server.csr -subj "/CN=127.0.0.1" 2>/dev/null
  printf 'subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nkeyUsage=digitalSignature\nextendedKeyUsage=serverAuth\n' >server.ext
  openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key -CAcreateserial -out server.pem \
    -days 2 -extfile server.ext 2>/dev/null
)

for r in $(seq 1 "$RUNS"); do
  for mode in http https; do
    echo "round $r: $mode"
    rm -rf "$OUT/data"
    tls=()
    [ "$mode" = https ] && tls=(--tls-cert "$certs/server.pem" --tls-key "$certs/server.key")
    "$SAKER" server --data-dir "$OUT/data" --s3-addr 127.0.0.1:9980 --admin-addr 127.0.0.1:9981 \
      --rpc-addr 127.0.0.1:0 "${tls[@]}" >"$OUT/server-$mode-$r.log" 2>&1 &
    pid=$!
    for _ in $(seq 300); do
      curl -sfk "$mode://127.0.0.1:9981/health" >/dev/null 2>&1 && break
      sleep 0.1
    done
    "$SAKER" bench s3 --endpoint "$mode://127.0.0.1:9980" --ca-cert "$certs/ca.pem" \
      --access-key "$SAKER_ACCESS_KEY" --secret-key "$SAKER_SECRET_KEY" --sizes "$SIZES" \
      --concurrency 16 --phases put,get --duration "$DURATION" --json "$OUT/$mode-$r.json" >/dev/null
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    pid=""
  done
done

python3 "$here/compare-modes.py" "$OUT" "$RUNS" http https summary.json
