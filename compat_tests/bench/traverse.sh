#!/usr/bin/env bash
# FalconFS §6.4's tree walk, scaled to one machine: `saker bench traverse` against a fresh
# all-in-one server (4 MNode groups) at depth 4 and depth 5 (10x the files) with 4 KiB files,
# and at depth 4 with 64 KiB files. Writes OUT.json with the three reports.
#
#   compat_tests/bench/traverse.sh OUT.json
#
# Uses the release binary (SAKER_BIN, default $CARGO_TARGET_DIR/release/saker).
set -euo pipefail
OUT=${1:?usage: traverse.sh OUT.json}
BIN=${SAKER_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/saker-target}/release/saker}
WORK=$(mktemp -d /tmp/saker-traverse.XXXXXX)
PID=""
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT
cp "$BIN" "$WORK/saker"
SAKER_ACCESS_KEY=traverse SAKER_SECRET_KEY=traverse-secret "$WORK/saker" server \
  --data-dir "$WORK/data" --s3-addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 \
  --rpc-addr 127.0.0.1:0 > "$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do grep -q "RPC (library clients):" "$WORK/server.log" && break; sleep 0.1; done
RPC=$(grep "RPC (library clients):" "$WORK/server.log" | awk '{print $NF}')
[ -n "$RPC" ] || { cat "$WORK/server.log"; exit 1; }
run() { # name depth size
  SAKER_CLUSTER_CREDENTIAL="$WORK/data/cluster-credential.json" "$WORK/saker" bench traverse --cluster "$RPC" --depth "$2" --fanout 10 --files-per-dir 10 \
    --size "$3" --threads 16 --json "$WORK/$1.json"
}
run d4-4k 4 4KiB
run d5-4k 5 4KiB
run d4-64k 4 64KiB
python3 - "$WORK" "$OUT" <<'PY'
import json, sys
work, out = sys.argv[1], sys.argv[2]
runs = {n: json.load(open(f"{work}/{n}.json")) for n in ("d4-4k", "d5-4k", "d4-64k")}
runs["growth_10x"] = {
    "files_per_sec_ratio": runs["d5-4k"]["files_per_sec"] / runs["d4-4k"]["files_per_sec"],
    "client_rss_growth_mib": [runs["d4-4k"]["client_rss_growth_mib"], runs["d5-4k"]["client_rss_growth_mib"]],
    "rpcs_per_op": [runs["d4-4k"]["rpcs_per_op"], runs["d5-4k"]["rpcs_per_op"]],
}
json.dump(runs, open(out, "w"), indent=1)
print(json.dumps(runs["growth_10x"], indent=1))
PY
