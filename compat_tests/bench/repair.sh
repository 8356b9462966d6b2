#!/usr/bin/env bash
# How fast a wiped node's chunks are re-replicated: the 3-node cluster of deploy/local-cluster
# (replication 3) is filled with 1 MiB objects (`saker bench s3 --phases put --keep`, one
# chunk each), node 3 is stopped, its disk wiped and restarted empty, and one repair pass
# (`saker admin repair`) copies every chunk back onto it; the pass's copies, bytes, time and
# MiB/s (wall time of the pass, which lists every chunkstore and checks every referenced
# chunk), RUNS times, and their medians; a second pass must find nothing short. Correctness
# (every object reads back from the repaired node) is the fault tests' job, not this one's.
#
# usage: repair.sh OUT_DIR
# knobs: RUNS (3), FILL (20s of PUTs at c=16).
# needs: a release build of saker (cargo build --release), python3, curl.
set -euo pipefail
OUT=${1:?usage: repair.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
export SAKER_BIN="$SAKER"
RUNS=${RUNS:-3}
FILL=${FILL:-20s}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
run="$repo/deploy/local-cluster/run.sh"
trap '"$run" stop "$OUT/cluster" >/dev/null 2>&1 || true' EXIT
admin() { "$SAKER" admin --admin-endpoint http://127.0.0.1:9901 "$@"; }

for r in $(seq 1 "$RUNS"); do
  echo "round $r"
  rm -rf "$OUT/cluster"
  "$run" start "$OUT/cluster" >/dev/null
  "$SAKER" bench s3 --endpoint 127.0.0.1:9900 --access-key "$SAKER_ACCESS_KEY" \
    --secret-key "$SAKER_SECRET_KEY" --sizes 1MiB --concurrency 16 --phases put \
    --duration "$FILL" --keep --json "$OUT/fill-$r.json" >/dev/null
  "$run" stop "$OUT/cluster" 3 >/dev/null
  "$run" wipe "$OUT/cluster" 3 >/dev/null
  "$run" restart "$OUT/cluster" 3 >/dev/null
  start=$(date +%s.%N)
  admin repair >"$OUT/repair-$r.json"
  end=$(date +%s.%N)
  admin status >"$OUT/status-$r.txt"
  python3 - "$OUT/repair-$r.json" "$start" "$end" <<'PY'
import json, sys
path, start, end = sys.argv[1], float(sys.argv[2]), float(sys.argv[3])
r = json.load(open(path))
r["wall_seconds"] = round(end - start, 3)
r["mib_per_sec"] = round(r["bytes"] / (1 << 20) / (end - start), 1)
json.dump(r, open(path, "w"), indent=1)
print(json.dumps(r))
PY
  # A second pass finds nothing left to copy.
  admin repair >"$OUT/again-$r.json"
  "$run" stop "$OUT/cluster" >/dev/null
done

python3 - "$OUT" "$RUNS" <<'PY'
import json, os, sys
out, runs = sys.argv[1], int(sys.argv[2])
med = lambda xs: sorted(xs)[len(xs) // 2]
rounds = []
for r in range(1, runs + 1):
    rep = json.load(open(os.path.join(out, f"repair-{r}.json")))
    again = json.load(open(os.path.join(out, f"again-{r}.json")))
    fill = json.load(open(os.path.join(out, f"fill-{r}.json")))["results"][0]
    rounds.append({"objects_put": fill["ops"], "put_errors": fill["errors"],
                   "scanned": rep["scanned"], "copied": rep["repaired"], "failed": rep["failed"],
                   "lost": rep["lost"], "mib": round(rep["bytes"] / (1 << 20), 1),
                   "seconds": rep["wall_seconds"], "mib_per_sec": rep["mib_per_sec"],
                   "short_after": again["under_replicated"]})
summary = {"rounds": rounds,
           "median_mib_per_sec": med([x["mib_per_sec"] for x in rounds]),
           "median_seconds": med([x["seconds"] for x in rounds])}
json.dump(summary, open(os.path.join(out, "summary.json"), "w"), indent=1)
print(json.dumps(summary, indent=1))
PY
