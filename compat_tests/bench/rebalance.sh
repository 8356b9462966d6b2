#!/usr/bin/env bash
# Origami's comparison on one machine: `saker bench rebalance` for every workload (hotdir,
# hotname, shift, uniform) under every policy (none, even, benefit), side by side in each
# round, each run on a fresh all-in-one server of 4 groups limited to OPS_LIMIT operations
# per second each (--group-ops-limit). Medians of RUNS rounds, and the ratios of benefit
# against even and against none, into OUT_DIR/rebalance.json.
#
# usage: rebalance.sh OUT_DIR
# knobs: RUNS (3), SCALE (1.0), OPS_LIMIT (300), WORKLOADS, POLICIES
# needs: a release build of saker (cargo build --release --bins).
set -euo pipefail
OUT=${1:?usage: rebalance.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
[ -x "$SAKER" ] || { echo "no binary at $SAKER (cargo build --release --bins)" >&2; exit 1; }
RUNS=${RUNS:-3}
SCALE=${SCALE:-1.0}
OPS_LIMIT=${OPS_LIMIT:-300}
WORKLOADS=${WORKLOADS:-"hotname shift hotdir uniform"}
POLICIES=${POLICIES:-"none even benefit"}
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
for i in $(seq 1 "$RUNS"); do
  for w in $WORKLOADS; do
    for p in $POLICIES; do
      echo "== run $i: $w $p"
      "$SAKER" bench rebalance --workload "$w" --policy "$p" --scale "$SCALE" \
        --ops-limit "$OPS_LIMIT" --seed "$i" --json "$OUT/$w-$p-$i.json" >/dev/null 2>"$OUT/$w-$p-$i.log"
    done
  done
done

python3 - "$OUT" "$RUNS" "$WORKLOADS" "$POLICIES" <<'PY'
import json, statistics, sys
out, runs, workloads, policies = sys.argv[1], int(sys.argv[2]), sys.argv[3].split(), sys.argv[4].split()
report = {"what": "saker bench rebalance: job completion time and ops/s per workload and policy, "
                  "4 groups with a fixed capacity each (--group-ops-limit), medians of the rounds",
          "runs": runs, "workloads": []}
for w in workloads:
    row = {"workload": w}
    for p in policies:
        rs = [json.load(open(f"{out}/{w}-{p}-{i}.json")) for i in range(1, runs + 1)]
        med = lambda k: statistics.median(r[k] for r in rs)
        row[p] = {"jct_secs": med("jct_secs"), "ops_per_sec": med("ops_per_sec"),
                  "migrations": med("migrations"), "migrated_inodes": med("migrated_inodes"),
                  "errors": sum(r["errors"] for r in rs),
                  "balancer_round_secs": med("balancer_round_secs"),
                  "balancer_plan_secs": med("balancer_plan_secs"),
                  "per_group_ops": rs[0]["per_group_ops"],
                  "exceptions": rs[0]["exceptions"]}
        errs = [r[k] for r in rs for k in ("prediction_error_ewma", "prediction_error_model") if r.get(k) is not None]
        if p == "benefit" and errs:
            row[p]["prediction_error_ewma"] = statistics.median(r["prediction_error_ewma"] for r in rs)
            row[p]["prediction_error_model"] = statistics.median(r["prediction_error_model"] for r in rs)
    if "benefit" in row:
        for base in ("none", "even"):
            if base in row:
                row[f"benefit_vs_{base}_jct"] = row[base]["jct_secs"] / row["benefit"]["jct_secs"]
                row[f"benefit_vs_{base}_ops"] = row["benefit"]["ops_per_sec"] / row[base]["ops_per_sec"]
    report["workloads"].append(row)
json.dump(report, open(f"{out}/rebalance.json", "w"), indent=2)
for r in report["workloads"]:
    cells = "  ".join(f"{p} {r[p]['jct_secs']:6.2f}s {r[p]['ops_per_sec']:6.0f}/s" for p in policies)
    ratios = "  ".join(f"{k[8:]} {v:.2f}x" for k, v in r.items() if k.startswith("benefit_vs_"))
    print(f"{r['workload']:8} {cells}  {ratios}")
PY
