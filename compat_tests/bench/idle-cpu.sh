#!/usr/bin/env bash
# What an idle replicated cluster costs: the 3-node cluster of deploy/local-cluster with MNODE_GROUPS
# MNode groups (replication 3), WARM seconds after every node is healthy, then the CPU time
# (utime+stime from /proc) of the three processes over IDLE seconds, as a percentage of the
# machine's cores. Prints one JSON object; also writes it to OUT_DIR/idle-cpu.json.
#
# usage: idle-cpu.sh OUT_DIR
# knobs: MNODE_GROUPS (64), WARM (15), IDLE (20), SAKER_BIN (else the release build),
# NOTIFY (0; 1: a webhook target and a bucket whose events go to it, configured before the
# warm-up, so the figure is that of a cluster with notifications and no writes; needs boto3).
set -euo pipefail
OUT=${1:?usage: idle-cpu.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
MNODE_GROUPS=${MNODE_GROUPS:-64}
WARM=${WARM:-15}
IDLE=${IDLE:-20}
export SAKER_BIN="$SAKER" SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
# run.sh reads its node configs next to itself: a copy with MNODE_GROUPS groups.
cfg="$OUT/local-cluster"
rm -rf "$cfg" "$OUT/cluster"
cp -r "$repo/deploy/local-cluster" "$cfg"
sed -i "s/^groups = .*/groups = $MNODE_GROUPS/" "$cfg"/node*.toml
trap '"$cfg/run.sh" stop "$OUT/cluster" >/dev/null 2>&1 || true' EXIT
"$cfg/run.sh" start "$OUT/cluster" >/dev/null
if [ "${NOTIFY:-0}" = 1 ]; then
  arn=$("$SAKER" admin --admin-endpoint http://127.0.0.1:9901 notify target add idle \
    --webhook http://127.0.0.1:19601/ | grep -o 'arn:saker:sqs::[^ ]*')
  python3 - "$arn" <<'PY'
import sys, boto3
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:9900", aws_access_key_id="benchak",
                  aws_secret_access_key="benchsecret123", region_name="us-east-1")
s3.create_bucket(Bucket="idle-notified")
s3.put_bucket_notification_configuration(Bucket="idle-notified", NotificationConfiguration={
    "QueueConfigurations": [{"QueueArn": sys.argv[1], "Events": ["s3:ObjectCreated:*"]}]})
assert s3.get_bucket_notification_configuration(Bucket="idle-notified")["QueueConfigurations"]
PY
fi
sleep "$WARM" # settling time before the measurement, not synchronisation
ticks() {
  local s=0 p f
  for p in $(cat "$OUT"/cluster/node*.pid); do
    read -r -a f <"/proc/$p/stat"
    s=$((s + f[13] + f[14]))
  done
  echo "$s"
}
quiet() {
  local n=0 port v
  for port in 9901 9911 9921; do
    v=$(curl -sf "http://127.0.0.1:$port/metrics" | awk '/^saker_mnode_quiet_groups /{print $2}')
    n=$((n + ${v:-0}))
  done
  echo "$n"
}
a=$(ticks)
sleep "$IDLE"
b=$(ticks)
python3 - "$a" "$b" "$(getconf CLK_TCK)" "$IDLE" "$(nproc)" "$MNODE_GROUPS" "$(quiet)" "$OUT/idle-cpu.json" "${NOTIFY:-0}" <<'PY'
import json, sys
a, b, hz, idle, cores, groups, quiet, out, notify = sys.argv[1:]
pct = (int(b) - int(a)) / int(hz) / float(idle) / int(cores) * 100
r = {"groups": int(groups), "nodes": 3, "replication": 3, "idle_seconds": float(idle),
     "idle_cpu_percent_of_all_cores": round(pct, 2), "cores": int(cores),
     "quiet_groups": int(quiet), "notifications": notify == "1"}
json.dump(r, open(out, "w"), indent=1)
print(json.dumps(r))
PY
