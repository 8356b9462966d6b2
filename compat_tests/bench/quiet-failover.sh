#!/usr/bin/env bash
# How fast a quiet group fails over: the 3-node cluster of deploy/local-cluster with
# MNODE_GROUPS groups is left idle until every group is quiet (saker_mnode_quiet_groups), node 3
# is SIGKILLed, and 300 small PUTs go through node 1's gateway (each retried until it
# succeeds). Reports, per run, the longest single PUT (the wait for a group whose leader died)
# and the failed attempts; RUNS runs on fresh clusters, JSON to OUT_DIR/quiet-failover.json.
#
# usage: quiet-failover.sh OUT_DIR
# knobs: MNODE_GROUPS (64), RUNS (3), SAKER_BIN (else the release build).
# needs: python3 with boto3.
set -euo pipefail
OUT=${1:?usage: quiet-failover.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
MNODE_GROUPS=${MNODE_GROUPS:-64}
RUNS=${RUNS:-3}
export SAKER_BIN="$SAKER" SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
cfg="$OUT/local-cluster"
rm -rf "$cfg"
cp -r "$repo/deploy/local-cluster" "$cfg"
sed -i "s/^groups = .*/groups = $MNODE_GROUPS/" "$cfg"/node*.toml
trap '"$cfg/run.sh" stop "$OUT/cluster" >/dev/null 2>&1 || true' EXIT
: >"$OUT/runs.jsonl"
for _ in $(seq 1 "$RUNS"); do
  "$cfg/run.sh" stop "$OUT/cluster" >/dev/null 2>&1 || true
  rm -rf "$OUT/cluster"
  "$cfg/run.sh" start "$OUT/cluster" >/dev/null
  python3 - "$cfg/run.sh" "$OUT/cluster" "$MNODE_GROUPS" >>"$OUT/runs.jsonl" <<'PY'
import json, subprocess, sys, time, urllib.request
import boto3
from botocore.config import Config
run, work, groups = sys.argv[1], sys.argv[2], int(sys.argv[3])
def quiet():
    n = 0
    for port in (9901, 9911, 9921):
        for line in urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read().decode().splitlines():
            if line.startswith("saker_mnode_quiet_groups "):
                n += int(float(line.split()[1]))
    return n
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:9900", aws_access_key_id="benchak",
                  aws_secret_access_key="benchsecret123", region_name="us-east-1",
                  config=Config(retries={"max_attempts": 0}, read_timeout=30))
s3.create_bucket(Bucket="quiet-failover")
deadline = time.time() + 60
while quiet() < groups:
    if time.time() > deadline:
        sys.exit(f"only {quiet()} of {groups} groups went quiet")
    time.sleep(0.2)
subprocess.run([run, "kill", work, "3"], check=True, stdout=subprocess.DEVNULL)
t0, worst, fails = time.time(), 0.0, 0
for i in range(300):
    s = time.time()
    while True:
        try:
            s3.put_object(Bucket="quiet-failover", Key=f"k{i}", Body=b"z" * 64)
            break
        except Exception:
            fails += 1
    worst = max(worst, time.time() - s)
got = s3.list_objects_v2(Bucket="quiet-failover", MaxKeys=1000).get("KeyCount", 0)
print(json.dumps({"quiet_groups_before_kill": groups, "all_puts_s": round(time.time() - t0, 2),
                  "longest_put_s": round(worst, 2), "failed_attempts": fails, "listed": got}))
PY
done
python3 - "$OUT/runs.jsonl" "$OUT/quiet-failover.json" "$MNODE_GROUPS" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
r = {"groups": int(sys.argv[3]), "nodes": 3, "killed": "node 3", "runs": runs,
     "median_longest_put_s": statistics.median(x["longest_put_s"] for x in runs),
     "lost": sum(300 - x["listed"] for x in runs)}
json.dump(r, open(sys.argv[2], "w"), indent=1)
print(json.dumps(r))
PY
