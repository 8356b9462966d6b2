#!/usr/bin/env bash
# What tracing costs: `saker bench s3` PUT/GET 4 KiB at c=16 against an all-in-one server,
# alternating RUNS rounds of three modes, each on a fresh data directory: `off` (no OTLP
# endpoint: the spans are disabled at their call sites), `ratio-0.01` (exporting at the
# default sample ratio) and `ratio-1` (every trace exported); the endpoint is a local sink
# that only counts spans (compat_tests/examples/otlp_sink.rs). Medians and ratios to `off`.
# With SAKER_NOTRACE_BIN (a build whose debug spans are compiled out: `cargo build --release
# -p saker --features tracing/release_max_level_info` into another target dir) a fourth mode,
# `compiled-out`, shows what `off` costs against no tracing code at all.
#
# usage: otel-overhead.sh OUT_DIR
# knobs: RUNS (3), DURATION (10s)
# needs: release builds of saker (cargo build --release -p saker) and of the sink
# (cargo build --release -p saker-compat-tests --example otlp_sink), curl, python3.
set -euo pipefail
OUT=${1:?usage: otel-overhead.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
target=${CARGO_TARGET_DIR:-$repo/target}
SAKER=${SAKER_BIN:-$target/release/saker}
SINK=${SINK_BIN:-$target/release/examples/otlp_sink}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release -p saker)" >&2; exit 1; }
[ -x "$SINK" ] || { echo "no sink at $SINK (cargo build --release -p saker-compat-tests --example otlp_sink)" >&2; exit 1; }
RUNS=${RUNS:-3}
DURATION=${DURATION:-10s}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"

"$SINK" 127.0.0.1:14317 >"$OUT/sink.count" 2>"$OUT/sink.log" &
sink=$!
server=""
trap 'kill $server $sink 2>/dev/null || true' EXIT

run() { # mode round
  local args=()
  local bin=$SAKER
  case "$1" in
    off) ;;
    compiled-out) bin=$SAKER_NOTRACE_BIN ;;
    ratio-0.01) args=(--otlp-endpoint http://127.0.0.1:14317 --otlp-sample-ratio 0.01) ;;
    ratio-1) args=(--otlp-endpoint http://127.0.0.1:14317 --otlp-sample-ratio 1) ;;
  esac
  rm -rf "$OUT/data"
  "$bin" server --data-dir "$OUT/data" --s3-addr 127.0.0.1:19900 \
    --admin-addr 127.0.0.1:19901 --rpc-addr 127.0.0.1:19902 "${args[@]}" \
    >"$OUT/server-$1-$2.log" 2>&1 &
  server=$!
  for _ in $(seq 1 100); do curl -sf http://127.0.0.1:19901/health >/dev/null && break; sleep 0.1; done
  "$SAKER" bench s3 --endpoint 127.0.0.1:19900 --access-key benchak \
    --secret-key benchsecret123 --sizes 4KiB --concurrency 16 --phases put,get \
    --duration "$DURATION" --json "$OUT/$1-$2.json" >/dev/null
  kill -TERM "$server"
  wait "$server" || true
  server=""
}

MODES="off ratio-0.01 ratio-1"
if [ -n "${SAKER_NOTRACE_BIN:-}" ]; then
  [ -x "$SAKER_NOTRACE_BIN" ] || { echo "no binary at $SAKER_NOTRACE_BIN" >&2; exit 1; }
  MODES="compiled-out $MODES"
fi
for r in $(seq 1 "$RUNS"); do
  for mode in $MODES; do
    echo "round $r: $mode"
    run "$mode" "$r"
  done
done
kill -TERM "$sink"
wait "$sink" || true

python3 - "$OUT" "$RUNS" "$(cat "$OUT/sink.count")" "$MODES" <<'PY'
import json, os, sys
out, runs, spans = sys.argv[1], int(sys.argv[2]), int(sys.argv[3] or 0)
med = lambda xs: sorted(xs)[len(xs) // 2]
modes = tuple(m for m in sys.argv[4].split() if m != "off")
modes = ("off",) + modes
result = {"spans_exported": spans}
for phase in ("put", "get"):
    row = {}
    for mode in modes:
        docs = [json.load(open(os.path.join(out, f"{mode}-{r}.json"))) for r in range(1, runs + 1)]
        rs = [x for d in docs for x in d["results"] if x["phase"] == phase]
        row[mode] = {"ops_per_s": round(med([x["ops_per_sec"] for x in rs])),
                     "runs_ops_per_s": [round(x["ops_per_sec"]) for x in rs],
                     "p50_ms": med([x["p50_ms"] for x in rs]),
                     "p99_ms": med([x["p99_ms"] for x in rs]),
                     "errors": sum(x["errors"] for x in rs)}
    for mode in modes[1:]:
        row[f"{mode}_over_off"] = round(row[mode]["ops_per_s"] / row["off"]["ops_per_s"], 3)
    result[f"{phase} 4096 c16"] = row
json.dump(result, open(os.path.join(out, "otel-overhead.json"), "w"), indent=1)
print(json.dumps(result, indent=1))
PY
