#!/usr/bin/env bash
# What replication costs and how fast a group fails over, on this machine.
#
# 1. Cost: `saker bench s3` (PUT/GET) and `saker bench meta` (create/stat) against the
#    all-in-one server and against the 3-node cluster of deploy/local-cluster (replication 3),
#    alternating, RUNS rounds each; medians and replicated/unreplicated ratios.
# 2. Failover: a writer PUTs small objects through node 1's gateway while the node leading a
#    group (node 2 or 3) is SIGKILLed, KILLS times: the longest stretch without a successful
#    write and the time from the kill to the first success, per kill, and their medians.
#
# usage: replication.sh OUT_DIR
# knobs: RUNS (3), KILLS (5; 0 skips the failover part), DURATION (10s), SIZES (4KiB,64KiB),
#        META (1; 0 skips saker bench meta).
# needs: a release build of saker (cargo build --release), python3 with boto3, curl.
set -euo pipefail
OUT=${1:?usage: replication.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
export SAKER_BIN="$SAKER"
RUNS=${RUNS:-3}
KILLS=${KILLS:-5}
DURATION=${DURATION:-10s}
SIZES=${SIZES:-4KiB,64KiB}
META=${META:-1}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
run="$repo/deploy/local-cluster/run.sh"
single_pid=""
cleanup() {
  [ -n "$single_pid" ] && kill "$single_pid" 2>/dev/null || true
  "$run" stop "$OUT/cluster" >/dev/null 2>&1 || true
}
trap cleanup EXIT

s3_bench() { # endpoint out.json
  "$SAKER" bench s3 --endpoint "$1" --access-key "$SAKER_ACCESS_KEY" \
    --secret-key "$SAKER_SECRET_KEY" --sizes "$SIZES" --concurrency 16 \
    --duration "$DURATION" --json "$2" >/dev/null
}
meta_bench() { # rpc credential out.json
  [ "$META" = 1 ] || return 0
  SAKER_CLUSTER_CREDENTIAL="$2" "$SAKER" bench meta --cluster "$1" --threads 16 --files 2000 --depth 3 --json "$3" >/dev/null
}

start_single() {
  rm -rf "$OUT/single"
  "$SAKER" server --data-dir "$OUT/single" --s3-addr 127.0.0.1:19900 \
    --admin-addr 127.0.0.1:19901 --rpc-addr 127.0.0.1:19902 >"$OUT/single.log" 2>&1 &
  single_pid=$!
  for _ in $(seq 1 100); do curl -sf http://127.0.0.1:19901/health >/dev/null && return; sleep 0.1; done
  echo "all-in-one server not healthy" >&2; exit 1
}
stop_single() { kill "$single_pid"; wait "$single_pid" 2>/dev/null || true; single_pid=""; }

for r in $(seq 1 "$RUNS"); do
  echo "round $r: all-in-one"
  start_single
  s3_bench 127.0.0.1:19900 "$OUT/single-s3-$r.json"
  meta_bench 127.0.0.1:19902 "$OUT/single/cluster-credential.json" "$OUT/single-meta-$r.json"
  stop_single
  echo "round $r: 3 nodes, replication 3"
  rm -rf "$OUT/cluster"
  "$run" start "$OUT/cluster" >/dev/null
  s3_bench 127.0.0.1:9900 "$OUT/cluster-s3-$r.json"
  meta_bench 127.0.0.1:9902 "$OUT/cluster/cluster-credential.json" "$OUT/cluster-meta-$r.json"
  "$run" stop "$OUT/cluster" >/dev/null
done

if [ "$KILLS" -gt 0 ]; then
echo "failover: $KILLS kills"
rm -rf "$OUT/cluster"
"$run" start "$OUT/cluster" >/dev/null
python3 - "$OUT" "$KILLS" "$run" "$SAKER" <<'PY'
import json, os, subprocess, sys, threading, time
import boto3
from botocore.config import Config

out, kills, run, saker = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
work = os.path.join(out, "cluster")
s3 = boto3.client("s3", endpoint_url="http://127.0.0.1:9900", region_name="us-east-1",
                  aws_access_key_id=os.environ["SAKER_ACCESS_KEY"],
                  aws_secret_access_key=os.environ["SAKER_SECRET_KEY"],
                  config=Config(retries={"max_attempts": 1}, connect_timeout=5, read_timeout=30))
s3.create_bucket(Bucket="failover")
attempts, acked, stop = [], {}, threading.Event()

def writer():
    n = 0
    while not stop.is_set():
        n += 1
        key, body = f"k/{n % 16}/obj-{n}", os.urandom(512)
        try:
            s3.put_object(Bucket="failover", Key=key, Body=body)
            attempts.append((time.monotonic(), True))
            acked[key] = body
        except Exception:
            attempts.append((time.monotonic(), False))
            time.sleep(0.02)

def status():
    text = subprocess.run([saker, "admin", "status", "--json"], capture_output=True,
                          text=True, check=True).stdout
    return json.loads(text)

def node_of(addr):
    return {"9902": 1, "9912": 2, "9922": 3}[addr.rsplit(":", 1)[1]]

t = threading.Thread(target=writer)
t.start()
time.sleep(3)
rows = []
for k in range(kills):
    groups = status()
    led = {}
    for g in groups:
        if g["leader_addr"]:
            led.setdefault(node_of(g["leader_addr"]), []).append(g["group"])
    victim = 2 + k % 2 if (2 + k % 2) in led else next(n for n in (2, 3) if n in led)
    killed = time.monotonic()
    subprocess.run([run, "kill", work, str(victim)], check=True, capture_output=True)
    time.sleep(10)
    window = [(t_, ok) for t_, ok in attempts if t_ >= killed]
    first = next((t_ for t_, ok in window if ok), None)
    last_ok, gap = killed, 0.0
    for t_, ok in window:
        if ok:
            gap, last_ok = max(gap, t_ - last_ok), t_
    rows.append({"node": victim, "groups_led": led[victim],
                 "longest_write_gap_s": round(gap, 3),
                 "first_write_after_kill_s": round(first - killed, 3) if first else None,
                 "failed_attempts": sum(1 for _, ok in window if not ok)})
    print(rows[-1], flush=True)
    subprocess.run([run, "restart", work, str(victim)], check=True, capture_output=True)
    time.sleep(3)
stop.set()
t.join()
# Every acknowledged write reads back.
bad = [k for k, v in acked.items() if s3.get_object(Bucket="failover", Key=k)["Body"].read() != v]
med = lambda xs: sorted(xs)[len(xs) // 2]
json.dump({"kills": rows,
           "median_longest_write_gap_s": med([r["longest_write_gap_s"] for r in rows]),
           "median_first_write_after_kill_s": med([r["first_write_after_kill_s"] for r in rows]),
           "acknowledged_writes": len(acked), "lost_or_corrupt": len(bad)},
          open(os.path.join(out, "failover.json"), "w"), indent=1)
PY
"$run" stop "$OUT/cluster" >/dev/null
fi

python3 - "$OUT" "$RUNS" <<'PY'
import json, os, sys
out, runs = sys.argv[1], int(sys.argv[2])
med = lambda xs: sorted(xs)[len(xs) // 2]
def load(kind, target):
    return [json.load(open(os.path.join(out, f"{target}-{kind}-{r}.json"))) for r in range(1, runs + 1)]
def s3_lines(docs):
    lines = {}
    for d in docs:
        for res in d["results"]:
            name = f'{res["phase"]} {res["size"]} c{res["concurrency"]}'
            lines.setdefault(name, []).append(res["ops_per_sec"])
    return {k: med(v) for k, v in lines.items()}
def meta_lines(docs):
    lines = {}
    for d in docs:
        for res in d["results"]:
            lines.setdefault(res["op"], []).append(res["ops_per_sec"])
    return {k: med(v) for k, v in lines.items()}
summary = {}
for kind, f in (("s3", s3_lines), ("meta", meta_lines)):
    if not os.path.exists(os.path.join(out, f"single-{kind}-1.json")):
        continue
    single, cluster = f(load(kind, "single")), f(load(kind, "cluster"))
    summary[kind] = {k: {"all_in_one": single[k], "replicated": cluster.get(k),
                         "ratio": round(cluster[k] / single[k], 3) if cluster.get(k) else None}
                     for k in single}
if os.path.exists(os.path.join(out, "failover.json")):
    summary["failover"] = json.load(open(os.path.join(out, "failover.json")))
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
