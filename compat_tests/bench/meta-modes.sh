#!/usr/bin/env bash
# `saker bench meta` against a fresh 4-group server (release build), for each
# --parent-updates mode and two directory depths. Usage: meta-modes.sh [OUT_DIR]
# Needs ports 29900-29902 free. Results: OUT_DIR/{async,sync}-d{1,4}.{txt,json}.
BIN=${SAKER_BIN:-${CARGO_TARGET_DIR:-$(dirname "$0")/../../target}/release/saker}
OUT=${1:-/tmp/meta_bench}; rm -rf $OUT; mkdir -p $OUT
for mode in async sync; do
 for depth in 1 4; do
  d=$OUT/data-$mode-$depth; mkdir -p $d
  SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=sk12345678 $BIN server --data-dir $d --s3-addr 127.0.0.1:29900 --admin-addr 127.0.0.1:29901 --rpc-addr 127.0.0.1:29902 --mnodes 4 --parent-updates $mode > $OUT/srv-$mode-$depth.log 2>&1 &
  pid=$!
  for i in $(seq 100); do curl -sf http://127.0.0.1:29901/health >/dev/null && break; sleep 0.1; done
  SAKER_CLUSTER_CREDENTIAL=$d/cluster-credential.json $BIN bench meta --cluster 127.0.0.1:29902 --threads 16 --files 10000 --depth $depth --json $OUT/$mode-d$depth.json > $OUT/$mode-d$depth.txt 2>&1
  kill $pid; wait $pid
 done
done
