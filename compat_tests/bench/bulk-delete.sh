#!/usr/bin/env bash
# Emptying a prefix, side by side: for each server build, a fresh all-in-one server, a PUT
# phase of 4 KiB objects at c=16 (FILL long), then `saker bench s3`'s `empty` phase (ListObjectsV2
# pages of 1,000 keys, one DeleteObjects each, until the prefix is empty); builds alternate,
# RUNS rounds each; medians of objects/s and their ratio to the first build.
#
# usage: bulk-delete.sh OUT_DIR LABEL=SAKER_BINARY [LABEL=SAKER_BINARY ...]
# knobs: RUNS (3), FILL (10s). The bench client is the last binary named.
set -euo pipefail
OUT=${1:?usage: bulk-delete.sh OUT_DIR LABEL=BIN ...}
shift
[ $# -ge 1 ] || { echo "name at least one LABEL=SAKER_BINARY" >&2; exit 1; }
RUNS=${RUNS:-3}
FILL=${FILL:-10s}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
client="${*: -1}"
client="${client#*=}"
pid=""
trap '[ -n "$pid" ] && kill $pid 2>/dev/null || true' EXIT
round() { # label binary out.json
  rm -rf "$OUT/data"
  "$2" server --data-dir "$OUT/data" --s3-addr 127.0.0.1:19900 \
    --admin-addr 127.0.0.1:19901 --rpc-addr 127.0.0.1:19902 >"$OUT/server-$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do curl -sf http://127.0.0.1:19901/health >/dev/null && break; sleep 0.1; done
  "$client" bench s3 --endpoint 127.0.0.1:19900 --access-key benchak \
    --secret-key benchsecret123 --sizes 4KiB --concurrency 16 --phases put,empty \
    --bucket bench-empty --duration "$FILL" --label "$1" --json "$3" >/dev/null
  kill $pid; wait $pid 2>/dev/null || true
  pid=""
}
for r in $(seq 1 "$RUNS"); do
  for pair in "$@"; do
    label="${pair%%=*}"
    echo "round $r: $label"
    round "$label" "${pair#*=}" "$OUT/$label-$r.json"
  done
done
python3 - "$OUT" "$RUNS" "$@" <<'PY'
import json, statistics, sys
out, runs, pairs = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
labels = [p.split("=", 1)[0] for p in pairs]
summary = {}
for label in labels:
    rates, objects, errors = [], [], 0
    for r in range(1, runs + 1):
        res = json.load(open(f"{out}/{label}-{r}.json"))["results"]
        empty = next(x for x in res if x["phase"] == "empty")
        put = next(x for x in res if x["phase"] == "put")
        rates.append(empty["ops_per_sec"])
        objects.append(empty["ops"])
        errors += empty["errors"] + put["errors"]
        if empty["ops"] != put["ops"]:
            errors += abs(put["ops"] - empty["ops"])
    summary[label] = {"objects_per_sec": rates, "median": statistics.median(rates),
                      "objects_per_round": objects, "errors": errors}
base = summary[labels[0]]["median"]
for label in labels:
    summary[label]["ratio_to_" + labels[0]] = summary[label]["median"] / base
json.dump(summary, open(f"{out}/bulk-delete.json", "w"), indent=2)
for label in labels:
    s = summary[label]
    print(f"{label}: {s['median']:.0f} objects/s (rounds {[round(x) for x in s['objects_per_sec']]}), "
          f"{s['ratio_to_' + labels[0]]:.2f}x, errors {s['errors']}")
PY
