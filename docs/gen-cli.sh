#!/usr/bin/env bash
# Writes docs/src/reference/cli.md, the book's command-line reference, from the binary's clap
# definitions (`saker docs cli`). With --check it writes nothing and fails when the committed
# file differs from what the binary prints (CI runs that).
#
#   docs/gen-cli.sh [--check]
#
# The binary: $SAKER_BIN, else the debug build `cargo build -p saker` leaves in
# $CARGO_TARGET_DIR (default target/).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${SAKER_BIN:-${CARGO_TARGET_DIR:-target}/debug/saker}"
[ -x "$bin" ] || { echo "gen-cli: no saker binary at $bin (cargo build -p saker, or set SAKER_BIN)" >&2; exit 2; }
out=docs/src/reference/cli.md
if [ "${1:-}" = --check ]; then
    if ! diff -u "$out" <("$bin" docs cli); then
        echo "gen-cli: $out is not what the binary prints: run docs/gen-cli.sh and commit it" >&2
        exit 1
    fi
    echo "gen-cli: $out matches the binary"
else
    "$bin" docs cli > "$out"
    echo "gen-cli: wrote $out"
fi
