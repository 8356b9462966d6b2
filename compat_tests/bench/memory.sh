#!/usr/bin/env bash
# Server memory per object: an all-in-one release server takes STEPS rounds of 4 KiB PUTs
# (c=64, STEP long each, objects kept); after each round its RSS (VmRSS) and peak (VmHWM) are
# read from /proc, with the objects stored so far. Then the server restarts on the same data
# and lists the whole bucket once: RSS again. Results as JSON lines in OUT_DIR/memory.json.
# With MOUNT=1 the server also mounts the namespace (`--mount`, in the same process) and the
# rounds create 4 KiB files through the mount instead (16 threads, 100 files a directory);
# after the restart every file is stat'ed once through the mount (`find`), so the mount's own
# tables hold every file the kernel looked up.
#
# usage: memory.sh OUT_DIR        knobs: STEPS (3), STEP (20s), MOUNT (0), SAKER_BIN
set -euo pipefail
OUT=${1:?usage: memory.sh OUT_DIR}
SAKER=${SAKER_BIN:-${CARGO_TARGET_DIR:-$(dirname "$0")/../../target}/release/saker}
[ -x "$SAKER" ] || { echo "no saker binary at $SAKER (cargo build --release, or set SAKER_BIN)" >&2; exit 1; }
STEPS=${STEPS:-3}
STEP=${STEP:-20s}
MOUNT=${MOUNT:-0}
export SAKER_ACCESS_KEY=benchak SAKER_SECRET_KEY=benchsecret123
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
rm -rf "$OUT/data" "$OUT/memory.json"
pid=""
MNT=$OUT/mnt
mounted=()
if [ "$MOUNT" = 1 ]; then
  mkdir -p "$MNT"
  mounted=(--mount "$MNT")
fi
stop() {
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  if mountpoint -q "$MNT" 2>/dev/null; then umount -l "$MNT"; fi
}
trap 'stop; rm -rf "$OUT/data"' EXIT
start() {
  "$SAKER" server --data-dir "$OUT/data" --s3-addr 127.0.0.1:19900 \
    --admin-addr 127.0.0.1:19901 --rpc-addr 127.0.0.1:19902 "${mounted[@]}" >>"$OUT/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    if curl -sf http://127.0.0.1:19901/health >/dev/null && { [ "$MOUNT" != 1 ] || mountpoint -q "$MNT"; }; then
      return
    fi
    sleep 0.1
  done
  echo "the server did not start" >&2; exit 1
}
# Creates 4 KiB files under DIR for SECONDS with 16 threads; prints how many.
create_files() { # dir seconds
  python3 - "$1" "$2" <<'PY'
import os, sys, threading, time
root, secs = sys.argv[1], float(sys.argv[2].rstrip("s"))
os.makedirs(root, exist_ok=True)
data, end, counts = os.urandom(4096), time.monotonic() + secs, [0] * 16
def work(t):
    n = 0
    while time.monotonic() < end:
        d = os.path.join(root, f"t{t:02}-d{n // 100:05}")
        if n % 100 == 0:
            os.mkdir(d)
        with open(os.path.join(d, f"f{n % 100:03}"), "wb") as f:
            f.write(data)
        n += 1
    counts[t] = n
ts = [threading.Thread(target=work, args=(t,)) for t in range(16)]
[t.start() for t in ts]
[t.join() for t in ts]
print(sum(counts))
PY
}
kib() { awk -v k="$1" '$1 == k":" {print $2}' "/proc/$pid/status"; }
sample() { # what objects
  echo "{\"when\":\"$1\",\"objects\":$2,\"rss_kib\":$(kib VmRSS),\"hwm_kib\":$(kib VmHWM)}" | tee -a "$OUT/memory.json"
}
bench() { "$SAKER" bench s3 --endpoint 127.0.0.1:19900 --access-key benchak --secret-key benchsecret123 "$@"; }
start
sample start 0
objects=0
for i in $(seq 1 "$STEPS"); do
  if [ "$MOUNT" = 1 ]; then
    [ -d "$MNT/mem" ] || mkdir "$MNT/mem" # a directory at the mount's root is a bucket
    objects=$((objects + $(create_files "$MNT/mem/r$i" "$STEP")))
    sample "after create round $i" "$objects"
    continue
  fi
  # A bucket per round: a round's keys would otherwise overwrite some of the last round's.
  bench --bucket "mem-$i" --sizes 4KiB --concurrency 64 --phases put --duration "$STEP" --keep \
    --json "$OUT/put-$i.json" >/dev/null
  objects=$((objects + $(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['results'][0]['ops'])" "$OUT/put-$i.json")))
  sample "after put round $i" "$objects"
done
stop
start
sample restarted "$objects"
if [ "$MOUNT" = 1 ]; then
  found=$(find "$MNT/mem" -type f -printf "%s\n" | wc -l) # %s: a stat per file
  echo "found $found files"
  sample "restarted, after stat of every file through the mount" "$found"
  exit 0
fi
# One listing of everything, 1,000 keys a page (ListObjectsV2, signed here).
python3 - "$STEPS" <<'PY'
import hashlib, sys, hmac, datetime, urllib.request, urllib.parse, re
ak, sk, host = "benchak", "benchsecret123", "127.0.0.1:19900"
def get(bucket, query):
    t = datetime.datetime.utcnow(); amz = t.strftime("%Y%m%dT%H%M%SZ"); day = amz[:8]
    ph = hashlib.sha256(b"").hexdigest()
    canon = "\n".join(["GET", f"/{bucket}", query, f"host:{host}", f"x-amz-content-sha256:{ph}", f"x-amz-date:{amz}", "", "host;x-amz-content-sha256;x-amz-date", ph])
    scope = f"{day}/us-east-1/s3/aws4_request"
    sts = "\n".join(["AWS4-HMAC-SHA256", amz, scope, hashlib.sha256(canon.encode()).hexdigest()])
    k = ("AWS4" + sk).encode()
    for part in (day, "us-east-1", "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, sts.encode(), hashlib.sha256).hexdigest()
    req = urllib.request.Request(f"http://{host}/{bucket}?{query}", headers={
        "x-amz-date": amz, "x-amz-content-sha256": ph,
        "Authorization": f"AWS4-HMAC-SHA256 Credential={ak}/{scope}, SignedHeaders=host;x-amz-content-sha256;x-amz-date, Signature={sig}"})
    return urllib.request.urlopen(req).read().decode()
n = 0
for i in range(1, int(sys.argv[1]) + 1):
    token = None
    while True:
        q = {"list-type": "2", "max-keys": "1000"}
        if token: q["continuation-token"] = token
        quote = lambda s, *_: urllib.parse.quote(s, safe="-_.~")
        body = get(f"mem-{i}", urllib.parse.urlencode(sorted(q.items()), quote_via=quote))
        n += body.count("<Key>")
        m = re.search(r"<NextContinuationToken>(.*?)</NextContinuationToken>", body)
        if not m: break
        token = m.group(1)
print(f"listed {n} objects")
PY
sample "restarted, after listing everything" "$objects"
