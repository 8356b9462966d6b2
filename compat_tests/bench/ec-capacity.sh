#!/usr/bin/env bash
# Bytes on disk per usable byte of an erasure-coded bucket (issue 63's capacity target, 4+2
# at most 1.55; replication: 3.0): one all-in-one server on six chunk directories
# (`--chunk-dirs`), TOTAL of objects of random sizes between 1 and 64 MiB written with
# StorageClass EC_4_2 (coded before each PUT answers), and the same written STANDARD (three
# copies) into another server, side by side. Once the GC took the coded objects' replicas
# (grace 1 s), the chunk directories' file bytes (shard and chunk files with their headers and
# checksums) are summed. Every object is read back and compared.
#
# usage: ec-capacity.sh OUT_DIR
# knobs: TOTAL_MIB (1024), SEED (1)
# needs: a saker binary (capacity does not depend on the build; SAKER_BIN), python3 with boto3.
set -euo pipefail
OUT=${1:?usage: ec-capacity.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (set SAKER_BIN)" >&2; exit 1; }
TOTAL_MIB=${TOTAL_MIB:-1024}
SEED=${SEED:-1}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
pids=()
trap 'for p in "${pids[@]}"; do kill -- -"$p" 2>/dev/null || true; done' EXIT

start() { # name port
  local d="$OUT/$1" dirs=""
  rm -rf "$d"; mkdir -p "$d"
  for i in 0 1 2 3 4 5; do dirs="$dirs${dirs:+,}$d/disk$i"; done
  setsid "$SAKER" server --data-dir "$d/data" --chunk-dirs "$dirs" --gc-grace 1s \
    --gc-interval 200ms --s3-addr 127.0.0.1:$2 --admin-addr 127.0.0.1:$(($2 + 1)) \
    --rpc-addr 127.0.0.1:$(($2 + 2)) >"$d/server.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 1 120); do curl -s -o /dev/null http://127.0.0.1:$2/ && return; sleep 0.5; done
  echo "server $1 did not start" >&2; exit 1
}
start coded 19970
start replicated 19980

python3 - "$OUT" "$TOTAL_MIB" "$SEED" <<'PY'
import hashlib, json, os, random, sys, time
import boto3
from botocore.config import Config

out, total_mib, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rng = random.Random(seed)
sizes, left = [], total_mib << 20
while left > 0:
    n = min(left, rng.randint(1 << 20, 64 << 20))
    sizes.append(n)
    left -= n

def client(port):
    return boto3.client("s3", endpoint_url=f"http://127.0.0.1:{port}", aws_access_key_id="benchak",
                        aws_secret_access_key="benchsecret123", region_name="us-east-1",
                        config=Config(retries={"max_attempts": 2}))

def disk_bytes(name):
    total = 0
    for i in range(6):
        for root, _, files in os.walk(os.path.join(out, name, f"disk{i}")):
            total += sum(os.path.getsize(os.path.join(root, f)) for f in files)
    return total

result = {"objects": len(sizes), "usable_bytes": sum(sizes), "sides": {}}
for name, port, cls in (("coded", 19970, "EC_4_2"), ("replicated", 19980, "STANDARD")):
    c = client(port)
    c.create_bucket(Bucket="cap")
    digests = {}
    for i, n in enumerate(sizes):
        body = rng.randbytes(n)
        digests[f"o{i}"] = hashlib.sha256(body).hexdigest()
        c.put_object(Bucket="cap", Key=f"o{i}", Body=body, StorageClass=cls)
    # The GC takes the coded objects' replicas (grace 1 s): wait until the bytes settle.
    last, stable = -1, 0
    for _ in range(240):
        now = disk_bytes(name)
        stable = stable + 1 if now == last else 0
        if stable >= 6:
            break
        last = now
        time.sleep(0.5)
    bad = 0
    for k, d in digests.items():
        r = c.get_object(Bucket="cap", Key=k)
        if hashlib.sha256(r["Body"].read()).hexdigest() != d:
            bad += 1
        if r.get("StorageClass", "STANDARD") != cls:
            bad += 1
    on_disk = disk_bytes(name)
    result["sides"][name] = {"class": cls, "disk_bytes": on_disk,
                             "per_usable_byte": round(on_disk / result["usable_bytes"], 4),
                             "bad_reads": bad}
result["what"] = ("Bytes on disk per usable byte: one all-in-one server on six chunk directories, "
                  f"{total_mib} MiB of objects of 1-64 MiB (seed {seed}) PUT with StorageClass EC_4_2, "
                  "against the same PUT STANDARD (three copies); chunk directories' file bytes after "
                  "the GC took the coded objects' replicas; every object read back and compared")
result["command"] = f"SAKER_BIN=... TOTAL_MIB={total_mib} SEED={seed} compat_tests/bench/ec-capacity.sh OUT"
result["target"] = "4+2 at most 1.55 bytes on disk per usable byte (replication: 3.0)"
json.dump(result, open(os.path.join(out, "ec-capacity.json"), "w"), indent=1)
print(json.dumps(result, indent=1))
PY
