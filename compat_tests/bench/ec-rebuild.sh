#!/usr/bin/env bash
# How fast a lost disk's erasure-coded shards are rebuilt, against how fast its replicas are
# copied back (issue 63), on one all-in-one server on six chunk directories. Each round fills
# bucket `data` with 4 MiB objects (three copies), wipes directory 2 and times one repair
# pass (`saker admin repair`: the replicated rate); then codes the bucket 4+2
# (`saker admin bucket storage-class set`, `saker admin ec run --free-now`), wipes directory
# 2 again and times the next pass (the coded rate: shards rebuilt from four others). Rates
# are the bytes a pass wrote back over its wall time; a second pass must find nothing short.
# Every object is read back (its MD5 checked against its ETag) after the coded rebuild.
#
# usage: ec-rebuild.sh OUT_DIR
# knobs: RUNS (3), FILL (4s of 4 MiB PUTs at c=8; mind the disk: three copies of it).
# needs: a release build of saker, curl, python3 with boto3.
set -euo pipefail
OUT=${1:?usage: ec-rebuild.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
RUNS=${RUNS:-3}
FILL=${FILL:-4s}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
D="$OUT/server"
PORT=19980
pid=""
start() {
  setsid "$SAKER" server --data-dir "$D/data" --chunk-dirs "$dirs" --gc-grace 1s \
    --repair-every 0s --repair-full-every 0s --s3-addr 127.0.0.1:$PORT \
    --admin-addr 127.0.0.1:$((PORT + 1)) --rpc-addr 127.0.0.1:$((PORT + 2)) >>"$D/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 120); do curl -s -o /dev/null http://127.0.0.1:$PORT/ && return; sleep 0.5; done
  echo "the server did not start" >&2; exit 1
}
stop() { [ -n "$pid" ] && { kill -- -"$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; }; pid=""; }
trap stop EXIT
admin() { "$SAKER" admin --admin-endpoint http://127.0.0.1:$((PORT + 1)) "$@"; }
wipe2() { stop; rm -rf "$D/disk2"; mkdir -p "$D/disk2"; start; }
timed_repair() { # OUT_JSON
  local s e
  s=$(date +%s.%N); admin repair >"$1"; e=$(date +%s.%N)
  python3 - "$1" "$s" "$e" <<'PY'
import json, sys
path, s, e = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
r = json.load(open(path))
r["wall_seconds"] = round(e - s, 3)
r["mib_per_sec"] = round(r["bytes"] / (1 << 20) / (e - s), 1)
json.dump(r, open(path, "w"), indent=1)
PY
}

for r in $(seq 1 "$RUNS"); do
  echo "round $r"
  rm -rf "$D"; mkdir -p "$D"
  dirs=""; for i in 0 1 2 3 4 5; do dirs="$dirs${dirs:+,}$D/disk$i"; done
  start
  "$SAKER" bench s3 --endpoint 127.0.0.1:$PORT --access-key benchak --secret-key benchsecret123 \
    --bucket data --sizes 4MiB --concurrency 8 --duration "$FILL" --phases put --keep \
    --json "$OUT/fill-$r.json" >>"$OUT/bench.log" 2>&1
  wipe2
  timed_repair "$OUT/rep-$r.json"
  admin repair >"$OUT/rep-again-$r.json"
  admin bucket storage-class set data --ec 4+2 >/dev/null
  admin ec run data --free-now >"$OUT/ec-run-$r.json" 2>/dev/null
  wipe2
  timed_repair "$OUT/ec-$r.json"
  admin repair >"$OUT/ec-again-$r.json"
  python3 - "$PORT" >"$OUT/verify-$r.txt" <<'PY'
import hashlib, sys, boto3
c = boto3.client("s3", endpoint_url=f"http://127.0.0.1:{sys.argv[1]}", aws_access_key_id="benchak",
                 aws_secret_access_key="benchsecret123", region_name="us-east-1")
n = bad = 0
for page in c.get_paginator("list_objects_v2").paginate(Bucket="data"):
    for o in page.get("Contents", []):
        body = c.get_object(Bucket="data", Key=o["Key"])["Body"].read()
        n += 1
        bad += hashlib.md5(body).hexdigest() != o["ETag"].strip('"') or o["StorageClass"] != "EC_4_2"
print(n, bad)
PY
  stop
done
rm -rf "$D"

python3 - "$OUT" "$RUNS" <<'PY'
import json, os, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
rounds = []
for r in range(1, runs + 1):
    j = lambda name: json.load(open(os.path.join(out, f"{name}-{r}.json")))
    rep, ec, fill = j("rep"), j("ec"), j("fill")["results"][0]
    n, bad = map(int, open(os.path.join(out, f"verify-{r}.txt")).read().split())
    rounds.append({
        "objects": fill["ops"], "put_errors": fill["errors"],
        "rep_mib": round(rep["bytes"] / (1 << 20), 1), "rep_seconds": rep["wall_seconds"],
        "rep_mib_per_sec": rep["mib_per_sec"],
        "ec_mib": round(ec["bytes"] / (1 << 20), 1), "ec_seconds": ec["wall_seconds"],
        "ec_mib_per_sec": ec["mib_per_sec"],
        "failed": rep["failed"] + ec["failed"], "lost": rep["lost"] + ec["lost"],
        "short_after": j("rep-again")["under_replicated"] + j("ec-again")["under_replicated"],
        "read_back": n, "read_back_bad": bad,
    })
med = lambda k: statistics.median(x[k] for x in rounds)
summary = {
    "what": "rebuild of one wiped chunk directory of six on an all-in-one server: replicas "
            "copied back, then (the same objects coded 4+2) shards rebuilt; MiB written back "
            "per second of the repair pass (compat_tests/bench/ec-rebuild.sh)",
    "rounds": rounds,
    "median_rep_mib_per_sec": med("rep_mib_per_sec"),
    "median_ec_mib_per_sec": med("ec_mib_per_sec"),
}
summary["ec_over_rep"] = round(summary["median_ec_mib_per_sec"] / summary["median_rep_mib_per_sec"], 3)
json.dump(summary, open(os.path.join(out, "ec-rebuild.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
