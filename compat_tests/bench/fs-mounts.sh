#!/usr/bin/env bash
# The mounts fs-vs-juicefs.sh compares, started and stopped by name: saker, saker_process,
# juicefs, juicefs_sync. Sourced by fs-vs-juicefs.sh; run as `fs-mounts.sh restart TARGET`
# by `saker bench fs --restart-cmd` (COLD=1), which stops the mount's serving process and
# starts it again on the same data and mount point, so its in-process caches are cold.
# Needs WORK, OUT, SAKER, JFS and SAKER_PORT in the environment. A serving process is started
# detached (its parent is not this shell), its pid kept in $WORK/TARGET.pid.

mnt_of() {
  case $1 in
  saker) echo "$WORK/saker-mnt" ;;
  saker_process) echo "$WORK/saker-process-mnt" ;;
  *) echo "$WORK/$1-mnt" ;;
  esac
}

jfs_meta() { # juicefs | juicefs_sync
  if [ "$1" = juicefs_sync ]; then echo "sqlite3://$WORK/$1.db?_sync=FULL"; else echo "sqlite3://$WORK/$1.db"; fi
}

wait_mounted() { # dir name pid
  for _ in $(seq 300); do
    mountpoint -q "$1" && return 0
    kill -0 "$3" 2>/dev/null || { echo "$2 exited before mounting (log in $OUT)" >&2; exit 1; }
    sleep 0.1
  done
  echo "$2 did not mount $1 (log in $OUT)" >&2
  exit 1
}

start_target() { # target
  local t=$1 mnt pid
  mnt=$(mnt_of "$t")
  mkdir -p "$mnt"
  # In a subshell that exits at once: the serving process is nobody's child here, so it is
  # reaped when it ends (a stop can wait for it by pid from any shell).
  case $t in
  saker | saker_process)
    local base=$SAKER_PORT data=$WORK/saker-data extra=()
    if [ "$t" = saker_process ]; then
      base=$((SAKER_PORT + 5)) data=$WORK/saker-process-data extra=(--durability process)
    fi
    mkdir -p "$data"
    (SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123 "$SAKER" server --data-dir "$data" \
      --s3-addr 127.0.0.1:$base --admin-addr 127.0.0.1:$((base + 1)) \
      --rpc-addr 127.0.0.1:$((base + 2)) --mount "$mnt" "${extra[@]}" >>"$OUT/$t.log" 2>&1 &
      echo $! >"$WORK/$t.pid")
    ;;
  juicefs | juicefs_sync)
    local port=$((SAKER_PORT + 3))
    [ "$t" = juicefs_sync ] && port=$((SAKER_PORT + 4))
    ("$JFS" mount "$(jfs_meta "$t")" "$mnt" --cache-dir "$WORK/$t-cache" --no-usage-report \
      --metrics 127.0.0.1:$port >>"$OUT/$t.log" 2>&1 &
      echo $! >"$WORK/$t.pid")
    ;;
  esac
  pid=$(cat "$WORK/$t.pid")
  wait_mounted "$mnt" "$t" "$pid"
}

stop_target() { # target: its serving process ends, its mount point is detached
  local t=$1 pid mnt
  mnt=$(mnt_of "$t")
  pid=$(cat "$WORK/$t.pid" 2>/dev/null) || return 0
  case $t in
  juicefs*) if mountpoint -q "$mnt"; then umount "$mnt" || true; fi ;;
  *) kill "$pid" 2>/dev/null || true ;; # the saker server unmounts at shutdown
  esac
  for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
  if mountpoint -q "$mnt"; then umount -l "$mnt" || true; fi
  rm -f "$WORK/$t.pid"
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
  set -euo pipefail
  case ${1:-} in
  restart) stop_target "$2" && start_target "$2" ;;
  *) echo "usage: fs-mounts.sh restart TARGET" >&2; exit 2 ;;
  esac
fi
