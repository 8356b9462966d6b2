#!/usr/bin/env bash
# A replicated saker cluster on loopback: three `saker server` nodes (configs node1..3.toml next
# to this script), each with a replica of every MNode group (replication 3) and an S3 gateway.
# Node I serves S3 on 127.0.0.1:99(I-1)0, admin on 99(I-1)1 and RPC on 99(I-1)2.
#
#   deploy/local-cluster/run.sh start   WORK_DIR        # every node; exits 0 once all are healthy
#   deploy/local-cluster/run.sh start   WORK_DIR 4      # an empty 4th node (9930-9932), then:
#                                 saker admin node add 127.0.0.1:9932
#   deploy/local-cluster/run.sh stop    WORK_DIR [I]    # SIGTERM, waits for exit (all, or node I)
#   deploy/local-cluster/run.sh kill    WORK_DIR I      # SIGKILL, waits for exit
#   deploy/local-cluster/run.sh restart WORK_DIR I      # starts node I if down, waits until ready
#   deploy/local-cluster/run.sh wipe    WORK_DIR I      # deletes node I's data (refused while it runs)
#
# SAKER_ACCESS_KEY and SAKER_SECRET_KEY are required (the root key, fixed at bootstrap).
# Data directories, logs (nodeI.log), pid files and the cluster credential
# (cluster-credential.json, made at the first start: the cluster CA every node makes its mutual-TLS
# RPC certificate from) go to WORK_DIR. The binary is $SAKER_BIN,
# else target/release/saker (build it: cargo build --release); $SAKER_SERVER_ARGS are added to
# every node's `saker server` command line (tuning flags, e.g. --durability process).
# `start` exits 0 once every node's /health is 200 (every group has a serving leader), 1 after
# 60 s otherwise; `restart` waits the same way for the restarted node.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
usage() { echo "usage: $0 start|stop|kill|restart|wipe WORK_DIR [NODE]" >&2; exit 2; }
[[ $# -ge 2 ]] || usage
cmd="$1"
work="$(mkdir -p "$2" && cd "$2" && pwd)"
node="${3:-}"
bin="${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}"
nodes=(1 2 3)

admin_port() { echo "99$(($1 - 1))1"; }
pid_of() { [[ -f "$work/node$1.pid" ]] && cat "$work/node$1.pid"; }
running() { local p; p="$(pid_of "$1")" && kill -0 "$p" 2>/dev/null; }
healthy() { curl -sf -m 3 "http://127.0.0.1:$(admin_port "$1")/health" >/dev/null 2>&1; }

check_node() {
  [[ "$1" =~ ^[1-4]$ ]] && return
  echo "no node $1 (nodes are 1, 2, 3, and 4 to add)" >&2
  exit 2
}

launch() {
  local i="$1"
  if running "$i"; then return; fi
  [[ -x "$bin" ]] || { echo "no saker binary at $bin (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
  # The cluster's credential, made once: every node and every RPC client needs it. It holds
  # the cluster CA; the RPC between nodes is mutual TLS.
  [[ -f "$work/cluster-credential.json" ]] ||
    "$bin" admin cluster-credential create "$work/cluster-credential.json" >/dev/null
  # shellcheck disable=SC2086 # SAKER_SERVER_ARGS is a list of flags
  (cd "$work" && exec "$bin" server --config "$here/node$i.toml" ${SAKER_SERVER_ARGS:-} >>"node$i.log" 2>&1) &
  echo $! >"$work/node$i.pid"
  echo "started node $i (pid $!)"
}

# Waits until every node in "$@" runs and answers /health with 200.
wait_healthy() {
  local deadline=$((SECONDS + 60)) i
  for i in "$@"; do
    while ! healthy "$i"; do
      if ! running "$i"; then
        echo "node $i exited:" >&2; tail -20 "$work/node$i.log" >&2; exit 1
      fi
      if ((SECONDS >= deadline)); then
        echo "node $i not healthy after 60 s:" >&2
        curl -s -m 3 "http://127.0.0.1:$(admin_port "$i")/health" >&2 || true
        tail -5 "$work/node$i.log" >&2; exit 1
      fi
      sleep 0.2
    done
  done
}

# Sends signal $1 to node $2 and waits until it is gone.
signal() {
  local sig="$1" i="$2" p
  p="$(pid_of "$i")" || return 0
  if kill -0 "$p" 2>/dev/null; then
    kill "-$sig" "$p" 2>/dev/null || true
    while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
    echo "node $i ($p) ended by SIG$sig"
  fi
  rm -f "$work/node$i.pid"
}

require_key() {
  if [[ -z "${SAKER_ACCESS_KEY:-}" || -z "${SAKER_SECRET_KEY:-}" ]]; then
    echo "set SAKER_ACCESS_KEY and SAKER_SECRET_KEY (the cluster's root key)" >&2
    exit 2
  fi
}

case "$cmd" in
  start)
    require_key
    if [[ -n "$node" ]]; then check_node "$node"; launch "$node"; wait_healthy "$node"; exit 0; fi
    for i in "${nodes[@]}"; do launch "$i"; done
    wait_healthy "${nodes[@]}"
    echo "cluster ready: S3 on http://127.0.0.1:9900, :9910, :9920"
    ;;
  stop)
    if [[ -n "$node" ]]; then check_node "$node"; signal TERM "$node"; exit 0; fi
    for i in "${nodes[@]}" 4; do signal TERM "$i"; done
    ;;
  kill)
    [[ -n "$node" ]] || usage
    check_node "$node"; signal KILL "$node"
    ;;
  restart)
    [[ -n "$node" ]] || usage
    require_key; check_node "$node"; launch "$node"; wait_healthy "$node"
    ;;
  wipe)
    [[ -n "$node" ]] || usage
    check_node "$node"
    if running "$node"; then echo "node $node is running; stop or kill it first" >&2; exit 1; fi
    rm -rf "$work/node$node"
    echo "wiped node $node's data directory"
    ;;
  *) usage ;;
esac
