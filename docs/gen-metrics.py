#!/usr/bin/env python3
"""Writes the table of Prometheus series in docs/src/reference/metrics.md from the source.

Every series saker registers is named by a string literal `"saker_…"` followed by its help text
(and, for a vector, its labels `&["a", "b"]`) in the production sources (`*/src`, benchmarks and
tests left out). The table between the `metrics:begin` and `metrics:end` markers of the page is
made from those; `--check` writes nothing and fails when the page's table differs (CI runs
it). Series rendered by hand (`saker_chunk_pass_*`, `saker_sse_tag_failures_total`) are
described above the table.

    docs/gen-metrics.py [--check]
"""

import glob
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGE = os.path.join(ROOT, "docs", "src", "reference", "metrics.md")
BEGIN, END = "<!-- metrics:begin -->", "<!-- metrics:end -->"
SERIES = re.compile(
    r'"(saker_[a-z0-9_]+)",\s*(?:"(?:counter|gauge|histogram)",\s*)?'
    r'((?:"(?:[^"\\]|\\.)*"\s*)+)(?:,\s*&\[([^\]]*)\])?',
    re.S,
)


def table():
    rows = {}
    for path in sorted(glob.glob(os.path.join(ROOT, "*", "src", "**", "*.rs"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        if "/bench/" in rel or rel.endswith("tests.rs") or "/tests/" in rel:
            continue
        with open(path, encoding="utf-8") as f:
            text = f.read()
        for m in SERIES.finditer(text):
            help_ = re.sub(r"\\\n\s*", "", m.group(2))
            help_ = re.sub(r'"\s*"', "", help_).strip().strip('"').replace('\\"', '"')
            labels = ", ".join(x.strip().strip('"') for x in (m.group(3) or "").split(",") if x.strip())
            rows.setdefault(m.group(1), (rel.split("/")[0], labels, help_.replace("|", "\\|")))
    out = ["| series | labels | crate | what |", "|---|---|---|---|"]
    for name, (crate, labels, help_) in sorted(rows.items()):
        out.append(f"| `{name}` | {f'`{labels}`' if labels else ''} | {crate} | {help_} |")
    return "\n".join(out) + "\n"


def main():
    with open(PAGE, encoding="utf-8") as f:
        page = f.read()
    head, rest = page.split(BEGIN + "\n", 1)
    _, tail = rest.split(END, 1)
    new = head + BEGIN + "\n" + table() + END + tail
    if "--check" in sys.argv[1:]:
        if new != page:
            print("gen-metrics: the series table in docs/src/reference/metrics.md is stale "
                  "(run docs/gen-metrics.py and commit)", file=sys.stderr)
            return 1
        print("gen-metrics: the series table matches the source")
        return 0
    with open(PAGE, "w", encoding="utf-8") as f:
        f.write(new)
    print("gen-metrics: wrote the series table")
    return 0


if __name__ == "__main__":
    sys.exit(main())
