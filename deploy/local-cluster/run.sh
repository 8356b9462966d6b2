#!/usr/bin/env bash
# Starts (or stops) a local multi-process saker cluster on loopback: 1 coordinator, 3 MNodes
# (one group each), 1 chunkstore and 1 gateway, each a `saker server --config FILE` process
# with the configs next to this script.
#
#   deploy/local-cluster/run.sh start [WORK_DIR]   # default WORK_DIR: ./saker-local-cluster
#   deploy/local-cluster/run.sh stop  [WORK_DIR]
#
# Data directories (relative paths in the configs), logs and pid files go to WORK_DIR.
# The binary is $SAKER_BIN, else target/release/saker (build it: cargo build --release).
# S3 is then served on 127.0.0.1:9900 with the root key from SAKER_ACCESS_KEY/SAKER_SECRET_KEY
# (generated and printed in WORK_DIR/gateway.log when unset).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
cmd="${1:-start}"
work="$(mkdir -p "${2:-./saker-local-cluster}" && cd "${2:-./saker-local-cluster}" && pwd)"
bin="${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}"
roles=(coordinator mnode1 mnode2 mnode3 chunkstore gateway)

stop() {
  for r in "${roles[@]}"; do
    if [[ -f "$work/$r.pid" ]]; then
      pid="$(cat "$work/$r.pid")"
      kill "$pid" 2>/dev/null && echo "stopped $r ($pid)" || true
      rm -f "$work/$r.pid"
    fi
  done
}

start() {
  [[ -x "$bin" ]] || { echo "no saker binary at $bin (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
  cd "$work"
  for r in "${roles[@]}"; do
    if [[ -f "$r.pid" ]] && kill -0 "$(cat "$r.pid")" 2>/dev/null; then
      echo "$r is already running (pid $(cat "$r.pid"))" >&2; exit 1
    fi
    "$bin" server --config "$here/$r.toml" >"$r.log" 2>&1 &
    echo $! >"$r.pid"
    # A process prints its data dir last, once everything it runs is listening.
    for _ in $(seq 1 300); do
      grep -q "data dir:" "$r.log" && break
      kill -0 "$(cat "$r.pid")" 2>/dev/null || { echo "$r failed:" >&2; cat "$r.log" >&2; stop; exit 1; }
      sleep 0.1
    done
    grep -q "data dir:" "$r.log" || { echo "$r did not become ready" >&2; cat "$r.log" >&2; stop; exit 1; }
    echo "started $r (pid $(cat "$r.pid"))"
  done
  echo
  cat gateway.log
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop [WORK_DIR]" >&2; exit 2 ;;
esac
