#!/usr/bin/env bash
# The all-in-one server's own CPU per S3 operation: starts SAKER_BIN's server, runs a PUT phase
# and then a GET phase of the same keys with `saker bench s3`, and prints each phase's ops/s and
# the server's user+system CPU time per operation (from /proc). On a 2-core machine where the
# client shares the cores, this separates two builds when their throughput does not.
#
# usage: SAKER_BIN=<saker> cpu-per-op.sh [size (1MiB)] [concurrency (16)] [duration (10s)]
set -euo pipefail
SAKER=${SAKER_BIN:?set SAKER_BIN to a release saker}
SIZE=${1:-1MiB}
CONC=${2:-16}
DUR=${3:-10s}
PORT=${SAKER_PORT:-19960}
D=$(mktemp -d /tmp/saker-cpu-per-op.XXXXXX)
SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123 setsid "$SAKER" server --data-dir "$D/data" \
  --s3-addr 127.0.0.1:$PORT --admin-addr 127.0.0.1:$((PORT + 1)) --rpc-addr 127.0.0.1:$((PORT + 2)) \
  >"$D/server.log" 2>&1 &
SP=$!
trap 'kill -- -$SP 2>/dev/null; wait $SP 2>/dev/null; rm -rf "$D"' EXIT
for _ in $(seq 1 120); do curl -s -o /dev/null http://127.0.0.1:$PORT/ && break; sleep 0.5; done
ticks() { awk '{print $14 + $15}' /proc/$SP/stat; }
hz=$(getconf CLK_TCK)
for phase in put get; do
  t0=$(ticks)
  "$SAKER" bench s3 --endpoint 127.0.0.1:$PORT --access-key benchak --secret-key benchsecret123 \
    --sizes "$SIZE" --concurrency "$CONC" --duration "$DUR" --phases $phase --keep --keys "$D/keys" \
    --json "$D/$phase.json" >"$D/$phase.log" 2>&1
  t1=$(ticks)
  python3 - "$D/$phase.json" $((t1 - t0)) "$hz" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"][0]
cpu = int(sys.argv[2]) / int(sys.argv[3])
print(f'{r["phase"]} size={r["size"]} ops/s={r["ops_per_sec"]:.0f} errors={r["errors"]} '
      f'bad_bodies={r["bad_bodies"]} server_cpu_ms_per_op={1000 * cpu / max(r["ops"], 1):.3f}')
PY
done
