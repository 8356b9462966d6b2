#!/usr/bin/env bash
# POSIX conformance report: runs a built pjdfstest (github.com/pjd/pjdfstest, built outside
# this repository: autoreconf -ifs && ./configure && make pjdfstest) against a fresh
# `saker server --mount`, and optionally a reference directory, and writes per-syscall-group
# pass/fail counts as JSON (a failing test marked TODO, which pjdfstest uses for what Linux
# itself does otherwise, is counted apart as an expected failure, as TAP and prove do). Not a
# CI gate: a report.
#
#   PJDFSTEST=/path/to/pjdfstest compat_tests/bench/pjdfstest.sh [OUT.json] [REFERENCE_DIR]
#
# Needs root (pjdfstest switches users) and the release binary (SAKER_BIN, default
# $CARGO_TARGET_DIR/release/saker).
set -euo pipefail
PJD=${PJDFSTEST:?set PJDFSTEST to a built pjdfstest checkout}
OUT=${1:-pjdfstest.json}
REF=${2:-}
BIN=${SAKER_BIN:-${CARGO_TARGET_DIR:-$HOME/.cache/saker-target}/release/saker}
WORK=$(mktemp -d /tmp/saker-pjd.XXXXXX)
PID=""
cleanup() {
  [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null || true
  umount -l "$WORK/mnt" 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# run_suite DIR LOGDIR: every .t file, cwd in a fresh directory under DIR, one log each.
run_suite() {
  local dir=$1 logs=$2
  mkdir -p "$logs" "$dir/pjd-run"
  (cd "$dir/pjd-run" && for t in $(cd "$PJD/tests" && ls */*.t | sort); do
     timeout 300 prove -v "$PJD/tests/$t" > "$logs/$(echo "$t" | tr / _).log" 2>&1 || true
   done)
  rm -rf "$dir/pjd-run"
}

mkdir -p "$WORK/mnt"
SAKER_ACCESS_KEY=pjdfstest SAKER_SECRET_KEY=pjdfstest-secret "$BIN" server \
  --data-dir "$WORK/data" --s3-addr 127.0.0.1:0 --admin-addr 127.0.0.1:0 \
  --rpc-addr 127.0.0.1:0 --mount "$WORK/mnt" > "$WORK/server.log" 2>&1 &
PID=$!
for _ in $(seq 100); do grep -q "mounted at" "$WORK/server.log" && break; sleep 0.1; done
grep -q "mounted at" "$WORK/server.log" || { cat "$WORK/server.log"; exit 1; }
mkdir "$WORK/mnt/pjdfstest" && chmod 777 "$WORK/mnt/pjdfstest"
start=$(date +%s)
run_suite "$WORK/mnt/pjdfstest" "$WORK/logs-saker"
secs=$(( $(date +%s) - start ))
if [ -n "$REF" ]; then run_suite "$REF" "$WORK/logs-ref"; fi

python3 - "$WORK" "$OUT" "$secs" "$REF" <<'PY'
import json, os, re, sys
work, out, secs, ref = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
def summary(logs):
    groups = {}
    for f in sorted(os.listdir(logs)):
        g = f.split('_')[0]
        ok = bad = todo = 0
        for line in open(os.path.join(logs, f), errors='replace'):
            if re.match(r'^ok \d+', line): ok += 1
            # TAP: a failing test marked TODO is an expected failure (pjdfstest marks what
            # Linux itself does differently), not a failure of the file; prove passes it.
            elif re.match(r'^not ok \d+.*#\s*TODO', line): todo += 1
            elif re.match(r'^not ok \d+', line): bad += 1
        e = groups.setdefault(g, {"pass": 0, "fail": 0, "todo": 0, "failed_files": []})
        e["pass"] += ok; e["fail"] += bad; e["todo"] += todo
        if bad: e["failed_files"].append(f"{f[len(g)+1:-4]}({bad})")
    total = {k: sum(v[k] for v in groups.values()) for k in ("pass", "fail", "todo")}
    return {"total": total, "groups": groups}
report = {"saker": summary(os.path.join(work, "logs-saker")), "saker_seconds": secs}
if ref:
    report["reference"] = {"dir": ref, **summary(os.path.join(work, "logs-ref"))}
json.dump(report, open(out, "w"), indent=1)
for name in ("saker", "reference"):
    if name in report:
        t = report[name]["total"]
        n = t['pass'] + t['fail'] + t['todo']
        print(f"{name}: {t['pass']} passed, {t['fail']} failed, {t['todo']} expected failures (TODO) of {n}")
PY
