#!/usr/bin/env bash
# What a lifecycle pass does and costs: one all-in-one server with a one-second lifecycle day;
# `saker bench s3` PUTs 4 KiB objects into bucket `lc-old` for FILL, a rule expires them after
# one day, and `saker admin lifecycle run lc-old` expires them all (objects/s from its summary).
# Then GET p99 on another bucket at c=16, idle and while a pass expires a second fill, RUNS
# rounds each: the pass's effect on foreground latency.
#
# usage: lifecycle-pass.sh OUT_DIR
# knobs: RUNS (3), FILL (10s), DURATION (5s; the busy phases must end before the pass does), RATE (the pass's pace, --lifecycle-rate: 250)
# needs: a release build of saker (cargo build --release), curl, python3 with boto3.
set -euo pipefail
OUT=${1:?usage: lifecycle-pass.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
RUNS=${RUNS:-3}
FILL=${FILL:-10s}
DURATION=${DURATION:-5s}
export RATE=${RATE:-250}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/data"
# A one-second day, and no passes but those run here (--lifecycle-every 0s).
"$SAKER" server --data-dir "$OUT/data" --s3-addr 127.0.0.1:19900 --admin-addr 127.0.0.1:19901 \
  --rpc-addr 127.0.0.1:19902 --lifecycle-day-secs 1 --lifecycle-every 0s --lifecycle-rate "$RATE" >"$OUT/server.log" 2>&1 &
pid=$!
trap 'kill $pid 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:19901/health >/dev/null && break; sleep 0.1; done
bench() { # bucket phases duration out.json [--keep]
  "$SAKER" bench s3 --endpoint 127.0.0.1:19900 --access-key benchak --secret-key benchsecret123 \
    --sizes 4KiB --concurrency 16 --phases "$2" --bucket "$1" --duration "$3" --json "$4" \
    ${5:-} >/dev/null
}
rule() { # bucket
  python3 - "$1" <<'PY'
import sys, boto3
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:19900", aws_access_key_id="benchak",
                  aws_secret_access_key="benchsecret123", region_name="us-east-1")
s3.put_bucket_lifecycle_configuration(Bucket=sys.argv[1], LifecycleConfiguration={"Rules": [
    {"ID": "all", "Filter": {"Prefix": ""}, "Status": "Enabled", "Expiration": {"Days": 1}}]})
PY
}
admin() { "$SAKER" admin --admin-endpoint http://127.0.0.1:19901 "$@"; }
bench lc-read put,get 4s "$OUT/warmup.json"
for r in $(seq 1 "$RUNS"); do
  echo "round $r"
  bench "lc-old-$r" put "$FILL" "$OUT/fill-$r.json" --keep
  # Past one (one-second) day, every object of the fill is due.
  rule "lc-old-$r"
  admin lifecycle run "lc-old-$r" >"$OUT/pass-$r.json"
  bench lc-read put,get "$DURATION" "$OUT/idle-$r.json"
  bench "lc-busy-$r" put "$FILL" "$OUT/fill2-$r.json" --keep
  rule "lc-busy-$r"
  admin lifecycle run "lc-busy-$r" >"$OUT/busy-pass-$r.json" &
  pass_pid=$!
  bench lc-read put,get "$DURATION" "$OUT/busy-$r.json"
  wait "$pass_pid"
done

python3 - "$OUT" "$RUNS" <<'PY'
import json, os, sys
out, runs = sys.argv[1], int(sys.argv[2])
med = lambda xs: sorted(xs)[len(xs) // 2]
load = lambda n: json.load(open(os.path.join(out, n)))
passes = [load(f"pass-{r}.json") for r in range(1, runs + 1)]
rate = [p["expired"] * 1000 / max(p["elapsed_ms"], 1) for p in passes]
gets = {w: [x for r in range(1, runs + 1) for x in load(f"{w}-{r}.json")["results"]
            if x["phase"] == "get"]
        for w in ("idle", "busy")}
result = {
    "lifecycle_rate": int(os.environ.get("RATE", "250")),
    "pass": {"expired_per_pass": med([p["expired"] for p in passes]),
             "objects_per_s": round(med(rate)), "errors": sum(p["errors"] for p in passes)},
    "get 4096 c16 p99_ms": {w: med([x["p99_ms"] for x in gets[w]]) for w in gets},
    "get 4096 c16 ops_per_s": {w: round(med([x["ops_per_sec"] for x in gets[w]])) for w in gets},
    "get errors": sum(x["errors"] for w in gets for x in gets[w]),
}
result["p99_busy_over_idle"] = round(result["get 4096 c16 p99_ms"]["busy"] /
                                     result["get 4096 c16 p99_ms"]["idle"], 3)
json.dump(result, open(os.path.join(out, "lifecycle-pass.json"), "w"), indent=1)
print(json.dumps(result, indent=1))
PY
