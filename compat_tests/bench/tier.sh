#!/usr/bin/env bash
# The archive tier's numbers: a hot all-in-one server whose tier COLD is a second saker
# server on loopback (or, with TIER_ENDPOINT, any S3 service: MinIO, SeaweedFS). Per round:
#   - `saker bench s3` fills a bucket with 16 KiB objects (c=16, FILL) and one with 64 MiB
#     objects (c=2, FILL64), keeping their keys;
#   - GETs them locally (c=16 and c=2, DURATION);
#   - `saker archive BUCKET --tier COLD` moves each bucket: objects/s and MiB/s of its move
#     walks (report.move_ms), then its verification pass;
#   - GETs them again, now read through from the tier (no local cache: --tier-cache-size 0,
#     or CACHE);
#   - a lifecycle Transition pass (`saker admin lifecycle run`) moves a third bucket of 4 KiB
#     objects while 4 KiB GETs run on another: the pass's objects/s and foreground p99 idle
#     and busy.
# Medians of RUNS rounds, side by side, into OUT_DIR/tier.json.
#
# usage: tier.sh OUT_DIR
# knobs: LC_ONLY (1: only the lifecycle pass and its foreground p99), RUNS (3), FILL (5s), FILL64 (2s), FILL_LC (1s), DURATION (5s), CACHE (0), RATE (--lifecycle-rate: 250),
#        TIER_ENDPOINT/TIER_AK/TIER_SK (an outside tier; its bucket `archive` must exist)
# needs: a release build of saker (cargo build --release), curl (--aws-sigv4), python3 with boto3.
set -euo pipefail
OUT=${1:?usage: tier.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
RUNS=${RUNS:-3}
FILL=${FILL:-5s}
FILL64=${FILL64:-2s}
FILL_LC=${FILL_LC:-1s}
DURATION=${DURATION:-5s}
CACHE=${CACHE:-0}
RATE=${RATE:-250}
LC_ONLY=${LC_ONLY:-0}
AK=benchak SK=benchsecret123
# SHA-256 of no bytes: the body hash S3 signatures carry for an empty request.
EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855
export SAKER_ACCESS_KEY=$AK SAKER_SECRET_KEY=$SK
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/hot" "$OUT/cold" "$OUT"/keys-*.txt
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
wait_health() { for _ in $(seq 1 100); do curl -sf "$1/health" >/dev/null && return; sleep 0.1; done; echo "no health at $1" >&2; exit 1; }
if [ -z "${TIER_ENDPOINT:-}" ]; then
  "$SAKER" server --data-dir "$OUT/cold" --s3-addr 127.0.0.1:19910 --admin-addr 127.0.0.1:19911 \
    --rpc-addr 127.0.0.1:19912 >"$OUT/cold.log" 2>&1 &
  pids+=($!)
  wait_health http://127.0.0.1:19911
  TIER_ENDPOINT=http://127.0.0.1:19910 TIER_AK=$AK TIER_SK=$SK
  curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$AK:$SK" -H "x-amz-content-sha256: $EMPTY_SHA256" \
    -X PUT "$TIER_ENDPOINT/archive" >/dev/null
fi
# No passes but those run here; a one-second day; chunks freed one second after they go.
"$SAKER" server --data-dir "$OUT/hot" --s3-addr 127.0.0.1:19900 --admin-addr 127.0.0.1:19901 \
  --rpc-addr 127.0.0.1:19902 --lifecycle-day-secs 1 --lifecycle-every 0s --lifecycle-rate "$RATE" \
  --gc-grace 1s --tier-cache-size "$CACHE" >"$OUT/hot.log" 2>&1 &
pids+=($!)
wait_health http://127.0.0.1:19901
admin() { "$SAKER" admin --admin-endpoint http://127.0.0.1:19901 "$@"; }
admin tier add COLD --endpoint "$TIER_ENDPOINT" --bucket archive --prefix bench/ \
  --access-key "$TIER_AK" --secret-key "$TIER_SK" >/dev/null
bench() { # bucket size conc phases duration out.json [extra…]
  local b=$1 size=$2 conc=$3 phases=$4 dur=$5 json=$6
  shift 6
  "$SAKER" bench s3 --endpoint 127.0.0.1:19900 --access-key "$AK" --secret-key "$SK" \
    --sizes "$size" --concurrency "$conc" --phases "$phases" --bucket "$b" --duration "$dur" \
    --json "$json" "$@" >/dev/null
}
transition_rule() { # bucket
  python3 - "$1" <<'PY'
import sys, boto3
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:19900", aws_access_key_id="benchak",
                  aws_secret_access_key="benchsecret123", region_name="us-east-1")
s3.put_bucket_lifecycle_configuration(Bucket=sys.argv[1], LifecycleConfiguration={"Rules": [
    {"ID": "all", "Filter": {"Prefix": ""}, "Status": "Enabled",
     "Transitions": [{"Days": 1, "StorageClass": "COLD"}]}]})
PY
}
for r in $(seq 1 "$RUNS"); do
  echo "round $r"
  k16="$OUT/keys-16k-$r.txt" k64="$OUT/keys-64m-$r.txt"
  [ "$LC_ONLY" = 1 ] || {
  bench "t16k-$r" 16KiB 16 put "$FILL" "$OUT/fill16-$r.json" --keep --keys "$k16"
  bench "t64m-$r" 64MiB 2 put "$FILL64" "$OUT/fill64-$r.json" --keep --keys "$k64"
  bench "t16k-$r" 16KiB 16 get "$DURATION" "$OUT/local16-$r.json" --keep --keys "$k16"
  bench "t64m-$r" 64MiB 2 get "$DURATION" "$OUT/local64-$r.json" --keep --keys "$k64"
  "$SAKER" archive "t16k-$r" --tier COLD --admin-endpoint http://127.0.0.1:19901 2>/dev/null >"$OUT/archive16-$r.json"
  "$SAKER" archive "t64m-$r" --tier COLD --admin-endpoint http://127.0.0.1:19901 2>/dev/null >"$OUT/archive64-$r.json"
  bench "t16k-$r" 16KiB 16 get "$DURATION" "$OUT/tier16-$r.json" --keep --keys "$k16"
  bench "t64m-$r" 64MiB 2 get "$DURATION" "$OUT/tier64-$r.json" --keep --keys "$k64"
  }
  # A lifecycle Transition pass and the foreground's p99 beside it.
  bench "fg-$r" 4KiB 16 put,get "$DURATION" "$OUT/idle-$r.json"
  bench "lc-$r" 4KiB 16 put "$FILL_LC" "$OUT/fill-lc-$r.json" --keep
  transition_rule "lc-$r"
  sleep 1.1 # a day: every object filled is due when the pass starts
  admin lifecycle run "lc-$r" >"$OUT/pass-$r.json" &
  pass_pid=$!
  bench "fg-$r" 4KiB 16 put,get "$DURATION" "$OUT/busy-$r.json"
  wait "$pass_pid"
done

python3 - "$OUT" "$RUNS" "$CACHE" "$LC_ONLY" <<'PY'
import json, os, sys
out, runs, cache, lc_only = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4] == "1"
med = lambda xs: sorted(xs)[len(xs) // 2]
load = lambda n: json.load(open(os.path.join(out, n)))
rounds = range(1, runs + 1)
def get(name):
    xs = [x for r in rounds for x in load(f"{name}-{r}.json")["results"] if x["phase"] == "get"]
    return {"ops_per_s": round(med([x["ops_per_sec"] for x in xs])),
            "mib_per_s": round(med([x["mib_per_sec"] for x in xs]), 1),
            "p50_ms": med([x["p50_ms"] for x in xs]), "p99_ms": med([x["p99_ms"] for x in xs]),
            "errors": sum(x["errors"] for x in xs)}
def archive(name):
    jobs = [load(f"{name}-{r}.json") for r in rounds]
    rep = [j["report"] for j in jobs]
    return {"objects_per_run": med([x["moved"] for x in rep]),
            "objects_per_s": round(med([x["moved"] * 1000 / max(x["move_ms"], 1) for x in rep])),
            "mib_per_s": round(med([x["moved_bytes"] / 1048576 * 1000 / max(x["move_ms"], 1) for x in rep]), 1),
            "states": [j["state"] for j in jobs], "errors": sum(x["errors"] for x in rep),
            "verified": sum(x["verified"] for x in rep), "mismatched": sum(x["mismatched"] for x in rep)}
passes = [load(f"pass-{r}.json") for r in rounds]
result = {
    "tier": "second saker server on loopback" if os.environ.get("TIER_ENDPOINT") is None else os.environ["TIER_ENDPOINT"],
    "tier_cache_size": cache,
    "lifecycle transition pass": {
        "lifecycle_rate": int(os.environ.get("RATE", "250")),
        "transitioned_per_pass": med([p["transitioned"] for p in passes]),
        "objects_per_s": round(med([p["transitioned"] * 1000 / max(p["elapsed_ms"], 1) for p in passes])),
        "errors": sum(p["errors"] for p in passes)},
    "get 4KiB c16 p99_ms": {"idle": get("idle")["p99_ms"], "busy": get("busy")["p99_ms"]},
}
if not lc_only:
    result["transition 16KiB (saker archive)"] = archive("archive16")
    result["transition 64MiB (saker archive)"] = archive("archive64")
    result["get 16KiB c16"] = {"local": get("local16"), "read-through": get("tier16")}
    result["get 64MiB c2"] = {"local": get("local64"), "read-through": get("tier64")}
for k in ("get 16KiB c16", "get 64MiB c2") if not lc_only else ():
    result[k]["read_through_over_local_ops"] = round(
        result[k]["read-through"]["ops_per_s"] / max(result[k]["local"]["ops_per_s"], 1), 3)
result["p99_busy_over_idle"] = round(result["get 4KiB c16 p99_ms"]["busy"] /
                                     result["get 4KiB c16 p99_ms"]["idle"], 3)
# Per round too: the machine is noisy, and idle and busy of one round run back to back.
result["p99_busy_over_idle_per_round"] = [
    round(min(x["p99_ms"] for x in load(f"busy-{r}.json")["results"] if x["phase"] == "get") /
          min(x["p99_ms"] for x in load(f"idle-{r}.json")["results"] if x["phase"] == "get"), 3)
    for r in rounds]
json.dump(result, open(os.path.join(out, "tier.json"), "w"), indent=1)
print(json.dumps(result, indent=1))
PY
