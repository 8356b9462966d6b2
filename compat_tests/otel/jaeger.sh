#!/usr/bin/env bash
# Checks saker's trace export against a real Jaeger (v2: OTLP/gRPC in on 4317, query API on
# 16686). Starts Jaeger ($JAEGER_BIN), the replicated 3-node local cluster
# (deploy/local-cluster/run.sh) exporting every trace, PUTs one object larger than the inline
# threshold through node 1, then asks Jaeger's query API for the PutObject trace and checks
# that it holds the gateway's, the MNode's (batch, raft commit, journal append) and the
# chunkstore's spans, from more than one process, every parent inside the trace. Writes
# OUT_DIR/jaeger.json; exits 1 if a check fails.
#
# usage: jaeger.sh OUT_DIR
# needs: JAEGER_BIN (built in a scratch Go module:
#          go mod init scratch && go get -tool github.com/jaegertracing/jaeger/cmd/jaeger@v1.76.0
#          && go build -o jaeger github.com/jaegertracing/jaeger/cmd/jaeger),
#        (JAEGER_VERSION=v1.76.0 names it in the results), a release saker (SAKER_BIN, else target/release/saker), aws (awscli), curl, python3.
set -euo pipefail
OUT=${1:?usage: jaeger.sh OUT_DIR}
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
JAEGER=${JAEGER_BIN:?set JAEGER_BIN to a Jaeger v2 binary (see the usage above)}
export SAKER_BIN=${SAKER_BIN:-${CARGO_TARGET_DIR:-$repo/target}/release/saker}
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
work="$OUT/cluster"
rm -rf "$work"

export SAKER_ACCESS_KEY=jaegerak SAKER_SECRET_KEY=jaegersecret123
export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:4317 SAKER_OTLP_SAMPLE_RATIO=1
# Export every 200 ms instead of every 5 s.
export OTEL_BSP_SCHEDULE_DELAY=200

"$JAEGER" >"$OUT/jaeger.log" 2>&1 &
jaeger=$!
trap '"$repo/deploy/local-cluster/run.sh" stop "$work" >/dev/null 2>&1 || true; kill $jaeger 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do curl -sf http://127.0.0.1:16686/api/services >/dev/null && break; sleep 0.1; done
curl -sf http://127.0.0.1:16686/api/services >/dev/null || { echo "Jaeger did not start" >&2; exit 1; }

"$repo/deploy/local-cluster/run.sh" start "$work" >/dev/null

s3() {
  env -u AWS_CA_BUNDLE AWS_ACCESS_KEY_ID=$SAKER_ACCESS_KEY AWS_SECRET_ACCESS_KEY=$SAKER_SECRET_KEY \
    AWS_DEFAULT_REGION=us-east-1 aws --endpoint-url http://127.0.0.1:9900 s3api "$@"
}
s3 create-bucket --bucket jaeger >/dev/null
head -c 102400 /dev/urandom >"$OUT/object.bin"
s3 put-object --bucket jaeger --key traced/object.bin --body "$OUT/object.bin" >/dev/null
s3 get-object --bucket jaeger --key traced/object.bin "$OUT/back.bin" >/dev/null
cmp "$OUT/object.bin" "$OUT/back.bin"

# Polls the query API until the PutObject trace holds every span wanted (30 s at most).
# (A Jaeger built from a module reports no version: JAEGER_VERSION names it in the results.)
version=${JAEGER_VERSION:-$("$JAEGER" version 2>/dev/null | head -c 300 || true)}
python3 - "$OUT" "$version" <<'PY'
import json, sys, time, urllib.request
out, version = sys.argv[1], sys.argv[2]
want = ["s3.request", "client.meta", "rpc.meta", "mnode.batch", "raft.commit", "raft.append",
        "client.chunk_put", "rpc.chunk", "chunk.write"]
url = "http://127.0.0.1:16686/api/traces?service=saker&operation=s3.request&limit=200&lookback=1h"
deadline = time.time() + 30
while True:
    traces = json.load(urllib.request.urlopen(url))["data"] or []
    found = None
    for t in traces:
        puts = [s for s in t["spans"] if s["operationName"] == "s3.request"
                and {"key": "op", "type": "string", "value": "PutObject"} in s["tags"]]
        if puts:
            found = t
    names = {s["operationName"] for s in found["spans"]} if found else set()
    if found and all(w in names for w in want):
        break
    if time.time() > deadline:
        print(f"no complete PutObject trace in Jaeger; names seen: {sorted(names)}", file=sys.stderr)
        sys.exit(1)
    time.sleep(0.5)

ids = {s["spanID"] for s in found["spans"]}
orphans = [s["operationName"] for s in found["spans"]
           for r in s["references"] if r["refType"] == "CHILD_OF" and r["spanID"] not in ids]
def proc(s):
    p = found["processes"][s["processID"]]
    tags = {t["key"]: t["value"] for t in p["tags"]}
    return p["serviceName"], tags.get("service.instance.id"), tags.get("saker.roles")
by_name = {}
for s in found["spans"]:
    by_name.setdefault(s["operationName"], set()).add(proc(s)[1])
instances = {proc(s)[1] for s in found["spans"]}
services = {proc(s)[0] for s in found["spans"]}
checks = {
    "every_wanted_span": all(w in by_name for w in want),
    "parents_inside_trace": not orphans,
    "processes_in_trace": len(instances),
    "more_than_one_process": len(instances) > 1,
    "service_name_saker": services == {"saker"},
}
result = {
    "jaeger": version.strip(),
    "trace_id": found["traceID"],
    "spans": len(found["spans"]),
    "span_names_by_instance": {k: sorted(v) for k, v in sorted(by_name.items())},
    "orphans": orphans,
    "checks": checks,
}
json.dump(result, open(f"{out}/jaeger.json", "w"), indent=1)
print(json.dumps(result, indent=1))
ok = checks["every_wanted_span"] and checks["parents_inside_trace"] \
    and checks["more_than_one_process"] and checks["service_name_saker"]
sys.exit(0 if ok else 1)
PY
