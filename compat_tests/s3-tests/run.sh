#!/usr/bin/env bash
# Run ceph/s3-tests against a fresh saker server and write a compatibility report.
#
# usage: compat_tests/s3-tests/run.sh S3TESTS_CHECKOUT [extra pytest args...]
#
# S3TESTS_CHECKOUT is a checkout of https://github.com/ceph/s3-tests. This script builds
# nothing: it needs a built saker binary and a Python that has the suite's requirements
# (pip install -r S3TESTS_CHECKOUT/requirements.txt, in a virtualenv; pytest-timeout optional).
#
# Environment:
#   SAKER_BIN      saker binary (default: $CARGO_TARGET_DIR/release/saker, else .../debug/saker,
#                  CARGO_TARGET_DIR defaulting to <repo>/target)
#   S3TESTS_PYTHON Python to run pytest with (default: python3)
#   S3TESTS_OUT    report directory (default: a new /tmp/saker-s3tests.XXXXXX)
#   S3TESTS_TIMEOUT per-test timeout in seconds, used only if pytest-timeout is installed (300)
#   KEEP_DATA=1    keep the server's data directory
#
# Writes to S3TESTS_OUT: junit.xml, summary.txt (counts and failing tests grouped by error),
# failures.tsv, pytest.log, saker.log, s3tests.conf, keys.json (`key list --json`: the users'
# canonical ids and display names). Exits 0 whatever the tests do (a report,
# not a gate); non-zero only when the run itself could not be set up.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"

die() { echo "run.sh: $*" >&2; exit 2; }

[ $# -ge 1 ] || die "usage: $0 S3TESTS_CHECKOUT [extra pytest args...]"
checkout="$(cd "$1" && pwd)" || die "no such directory: $1"
shift
tests_path="s3tests/functional/test_s3.py"
[ -f "$checkout/$tests_path" ] || tests_path="s3tests_boto3/functional/test_s3.py"
[ -f "$checkout/$tests_path" ] || die "$checkout has neither s3tests/functional/test_s3.py nor s3tests_boto3/functional/test_s3.py"

# --- the saker binary -------------------------------------------------------------------------
target="${CARGO_TARGET_DIR:-$repo/target}"
if [ -n "${SAKER_BIN:-}" ]; then
    saker="$SAKER_BIN"
elif [ -x "$target/release/saker" ]; then
    saker="$target/release/saker"
else
    saker="$target/debug/saker"
fi
[ -x "$saker" ] || die "saker binary not found at $saker; build it first (cargo build --release --bin saker) or set SAKER_BIN"

# --- python -----------------------------------------------------------------------------------
python="${S3TESTS_PYTHON:-python3}"
"$python" -c 'import pytest, boto3, munch' 2>/dev/null \
    || die "$python lacks the s3-tests requirements; e.g. python3 -m venv /tmp/s3tests-venv && /tmp/s3tests-venv/bin/pip install -r $checkout/requirements.txt, then S3TESTS_PYTHON=/tmp/s3tests-venv/bin/python"

out="${S3TESTS_OUT:-$(mktemp -d /tmp/saker-s3tests.XXXXXX)}"
mkdir -p "$out"
out="$(cd "$out" && pwd)"

# --- keys -------------------------------------------------------------------------------------
main_ak=s3tests-main;     main_sk=s3tests-main-secret-0123456789
alt_ak=s3tests-alt;       alt_sk=s3tests-alt-secret-0123456789
tenant_ak=s3tests-tenant; tenant_sk=s3tests-tenant-secret-0123456789

free_port() {
    "$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
s3_port="$(free_port)"
admin_port="$(free_port)"
while [ "$admin_port" = "$s3_port" ]; do admin_port="$(free_port)"; done
admin="http://127.0.0.1:$admin_port"

# --- servers ----------------------------------------------------------------------------------
# The server under test, and a second one that is its archive tier (the storage classes
# LUKEWARM and FROZEN of the lifecycle_transition tests).
data="$(mktemp -d /tmp/saker-s3tests-data.XXXXXX)"
tier_data="$(mktemp -d /tmp/saker-s3tests-tier.XXXXXX)"
saker_pid=""
tier_pid=""
stop() { # pid
    if [ -n "$1" ] && kill -0 "$1" 2>/dev/null; then
        kill "$1" 2>/dev/null || true
        for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$1" 2>/dev/null || true
        wait "$1" 2>/dev/null || true
    fi
}
cleanup() {
    stop "$saker_pid"
    stop "$tier_pid"
    if [ "${KEEP_DATA:-0}" = 1 ]; then
        echo "run.sh: server data kept in $data (tier: $tier_data)"
    else
        rm -rf "$data" "$tier_data"
    fi
    rm -rf "${keys:-}"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

tier_port="$(free_port)"
tier_admin_port="$(free_port)"
SAKER_ACCESS_KEY="$main_ak" SAKER_SECRET_KEY="$main_sk" \
    "$saker" server --data-dir "$tier_data" \
    --s3-addr "127.0.0.1:$tier_port" --admin-addr "127.0.0.1:$tier_admin_port" --rpc-addr 127.0.0.1:0 \
    >"$out/saker-tier.log" 2>&1 &
tier_pid=$!

# The SSE-S3 master key and the SSE-KMS keyring (the config's kms_keyid and kms_keyid2), in
# a directory of their own (never inside the data directory).
keys="$(mktemp -d /tmp/saker-s3tests-keys.XXXXXX)"
"$saker" admin master-key "$keys/master.key" >/dev/null || die "cannot create the master key"
for id in testkey-1 testkey-2; do
    "$saker" admin kms-key "$keys/kms.keyring" "$id" >/dev/null || die "cannot create the KMS key $id"
done

echo "run.sh: $saker on 127.0.0.1:$s3_port (admin $admin), data $data, report $out"
SAKER_ACCESS_KEY="$main_ak" SAKER_SECRET_KEY="$main_sk" \
    "$saker" server --data-dir "$data" --sse-key-file "$keys/master.key" --sse-kms-keyring "$keys/kms.keyring" \
    --s3-addr "127.0.0.1:$s3_port" --admin-addr "127.0.0.1:$admin_port" --rpc-addr 127.0.0.1:0 --lifecycle-day-secs 2 \
    >"$out/saker.log" 2>&1 &
saker_pid=$!

for _ in $(seq 300); do
    curl -sf "$admin/health" >/dev/null 2>&1 && break
    kill -0 "$saker_pid" 2>/dev/null || { tail -20 "$out/saker.log" >&2; die "saker exited during startup"; }
    sleep 0.1
done
curl -sf "$admin/health" >/dev/null || { tail -20 "$out/saker.log" >&2; die "saker not healthy after 30s"; }

for _ in $(seq 300); do
    curl -sf "http://127.0.0.1:$tier_admin_port/health" >/dev/null 2>&1 && break
    sleep 0.1
done
for class in LUKEWARM FROZEN; do
    bucket="$(echo "$class" | tr 'A-Z' 'a-z')"
    # (the SHA-256 of an empty body: S3 signatures carry the body's hash)
    curl -sf --aws-sigv4 "aws:amz:us-east-1:s3" --user "$main_ak:$main_sk" -X PUT \
        -H "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855" \
        "http://127.0.0.1:$tier_port/$bucket" >/dev/null || die "cannot create the tier bucket $bucket"
    SAKER_ACCESS_KEY="$main_ak" SAKER_SECRET_KEY="$main_sk" SAKER_TIER_SECRET_KEY="$main_sk" \
        "$saker" admin tier add "$class" --endpoint "http://127.0.0.1:$tier_port" --bucket "$bucket" \
        --access-key "$main_ak" --admin-endpoint "$admin" >/dev/null \
        || die "cannot add the tier $class"
done

for pair in "$alt_ak:$alt_sk" "$tenant_ak:$tenant_sk"; do
    SAKER_ACCESS_KEY="$main_ak" SAKER_SECRET_KEY="$main_sk" \
        "$saker" admin key create --account --policy admin --access-key "${pair%%:*}" --secret-key "${pair#*:}" \
        --display-name "${pair%%:*} user" --admin-endpoint "$admin" >/dev/null \
        || die "cannot create access key ${pair%%:*}"
done

# The canonical user id and display name saker shows for each user's account (what the suite
# expects as Owner ID / DisplayName and grants by id): never the access key.
SAKER_ACCESS_KEY="$main_ak" SAKER_SECRET_KEY="$main_sk" \
    "$saker" admin key list --json --admin-endpoint "$admin" >"$out/keys.json" \
    || die "cannot list the keys"
account() { # access key, field (canonical_id or display_name)
    "$python" -c 'import json, sys
keys = {k["access_key"]: k for k in json.load(open(sys.argv[1]))}
print(keys[sys.argv[2]][sys.argv[3]])' "$out/keys.json" "$1" "$2" \
        || die "key list shows no $2 for $1"
}
main_id="$(account "$main_ak" canonical_id)";     main_name="$(account "$main_ak" display_name)"
alt_id="$(account "$alt_ak" canonical_id)";       alt_name="$(account "$alt_ak" display_name)"
tenant_id="$(account "$tenant_ak" canonical_id)"; tenant_name="$(account "$tenant_ak" display_name)"

# --- config -----------------------------------------------------------------------------------
conf="$out/s3tests.conf"
sed -e "s|@HOST@|127.0.0.1|g" -e "s|@PORT@|$s3_port|g" \
    -e "s|@MAIN_ACCESS_KEY@|$main_ak|g" -e "s|@MAIN_SECRET_KEY@|$main_sk|g" \
    -e "s|@ALT_ACCESS_KEY@|$alt_ak|g" -e "s|@ALT_SECRET_KEY@|$alt_sk|g" \
    -e "s|@TENANT_ACCESS_KEY@|$tenant_ak|g" -e "s|@TENANT_SECRET_KEY@|$tenant_sk|g" \
    -e "s|@MAIN_USER_ID@|$main_id|g" -e "s|@MAIN_DISPLAY_NAME@|$main_name|g" \
    -e "s|@ALT_USER_ID@|$alt_id|g" -e "s|@ALT_DISPLAY_NAME@|$alt_name|g" \
    -e "s|@TENANT_USER_ID@|$tenant_id|g" -e "s|@TENANT_DISPLAY_NAME@|$tenant_name|g" \
    "$here/s3tests.conf.template" >"$conf"
! grep -v '^#' "$conf" | grep -q '@[A-Z_]*@' || die "unrendered placeholder in $conf"

# --- pytest -----------------------------------------------------------------------------------
markers="$(sed -e 's/#.*//' -e 's/[[:space:]]//g' "$here/excluded-markers.txt" | grep -v '^$' | paste -sd'|' - | sed 's/|/ or /g')"
args=(-m "not ($markers)" -p no:cacheprovider -rN --junitxml="$out/junit.xml" -o junit_family=xunit1)
pypath="${PYTHONPATH:-}"
if "$python" -c 'import pytest_timeout' 2>/dev/null; then
    args+=(--timeout="${S3TESTS_TIMEOUT:-300}")
fi

echo "run.sh: cd $checkout && S3TEST_CONF=$conf PYTHONPATH=$pypath $(printf '%q ' "$python" -m pytest "$tests_path" "${args[@]}" "$@")"
set +e
(cd "$checkout" && S3TEST_CONF="$conf" PYTHONPATH="$pypath" "$python" -m pytest "$tests_path" "${args[@]}" "$@") \
    >"$out/pytest.log" 2>&1
rc=$?
set -e
tail -1 "$out/pytest.log"
echo "run.sh: pytest exit status $rc"

if [ -f "$out/junit.xml" ]; then
    "$python" "$here/summarize.py" "$out/junit.xml" "$out/summary.txt" "$out/failures.tsv"
    cat "$out/summary.txt" \
        >"$out/summary.tmp" && mv "$out/summary.tmp" "$out/summary.txt"
    sed -n 2p "$out/summary.txt"
    echo "run.sh: report in $out (summary.txt, failures.tsv, junit.xml, pytest.log, saker.log)"
else
    echo "run.sh: pytest wrote no junit.xml; see $out/pytest.log" >&2
fi
exit 0
