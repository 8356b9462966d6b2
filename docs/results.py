#!/usr/bin/env python3
"""Makes the book's pages from the benchmark results in compat_tests/bench/results: the charts
of the benchmarks chapter (SVG) and the index of every results file (development/results.md).

Plain Python, no plotting library: each chart is a horizontal bar chart of ratios (or times),
grouped by the cell of the benchmark, with a line at 1.0 where a ratio is shown. The output is
committed under docs/src/development/; CI runs `docs/results.py --check`, which fails when a
committed file differs from what the results make (after a new results file, or a change
here: run the script and commit its output).

    docs/results.py            # (re)write every chart and the index
    docs/results.py --check    # write nothing; exit 1 when one is missing or stale
"""

import json
import os
import sys
from xml.sax.saxutils import escape

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "compat_tests", "bench", "results")
OUT = os.path.join(ROOT, "docs", "src", "development", "charts")

COLORS = ["#2b6cb0", "#dd6b20", "#38a169", "#805ad5", "#718096"]
FONT = "font-family='sans-serif' font-size='12'"


def load(name):
    with open(os.path.join(RESULTS, name), encoding="utf-8") as f:
        return json.load(f)


def size_label(n):
    if isinstance(n, str):
        return n
    for unit, div in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= div and n % div == 0:
            return f"{n // div} {unit}"
    return f"{n} B"


def bars(title, subtitle, groups, series, unit="x", reference=1.0):
    """groups: [(label, [value per series or None])]; series: [name]. Returns SVG text."""
    bar_h, gap, left, right, top = 14, 10, 150, 70, 58
    width = 720
    plot_w = width - left - right
    vmax = max(v for _, vals in groups for v in vals if v is not None)
    if reference is not None:
        vmax = max(vmax, reference)
    vmax *= 1.05
    group_h = bar_h * len(series) + gap
    height = top + group_h * len(groups) + 40 + 18 * ((len(series) + 3) // 4)

    def x(v):
        return left + plot_w * v / vmax

    out = [
        f"<svg xmlns='http://www.w3.org/2000/svg' width='{width}' height='{height}' "
        f"viewBox='0 0 {width} {height}' {FONT}>",
        f"<rect width='{width}' height='{height}' fill='white'/>",
        f"<text x='10' y='20' font-size='15' font-weight='bold'>{escape(title)}</text>",
        f"<text x='10' y='38' fill='#4a5568'>{escape(subtitle)}</text>",
    ]
    # grid and scale
    step = nice_step(vmax)
    t = 0.0
    axis_y = top + group_h * len(groups)
    while t <= vmax:
        out.append(f"<line x1='{x(t):.1f}' y1='{top - 4}' x2='{x(t):.1f}' y2='{axis_y}' "
                   f"stroke='#e2e8f0'/>")
        out.append(f"<text x='{x(t):.1f}' y='{axis_y + 14}' text-anchor='middle' "
                   f"fill='#4a5568'>{fmt(t)}{unit}</text>")
        t += step
    for gi, (label, vals) in enumerate(groups):
        y0 = top + gi * group_h
        out.append(f"<text x='{left - 8}' y='{y0 + bar_h * len(series) / 2 + 4:.1f}' "
                   f"text-anchor='end'>{escape(label)}</text>")
        for si, v in enumerate(vals):
            if v is None:
                continue
            y = y0 + si * bar_h
            out.append(f"<rect x='{left}' y='{y}' width='{max(x(v) - left, 1):.1f}' "
                       f"height='{bar_h - 2}' fill='{COLORS[si % len(COLORS)]}'>"
                       f"<title>{escape(series[si])}: {fmt(v)}{unit}</title></rect>")
            out.append(f"<text x='{x(v) + 4:.1f}' y='{y + bar_h - 4}' "
                       f"fill='#1a202c'>{fmt(v)}{unit}</text>")
    if reference is not None:
        out.append(f"<line x1='{x(reference):.1f}' y1='{top - 6}' x2='{x(reference):.1f}' "
                   f"y2='{axis_y}' stroke='#c53030' stroke-dasharray='4 3'/>")
    ly = axis_y + 34
    for si, name in enumerate(series):
        lx = 10 + (si % 4) * 175
        yy = ly + (si // 4) * 18
        out.append(f"<rect x='{lx}' y='{yy - 10}' width='12' height='12' "
                   f"fill='{COLORS[si % len(COLORS)]}'/>")
        out.append(f"<text x='{lx + 18}' y='{yy}'>{escape(name)}</text>")
    out.append("</svg>")
    return "\n".join(out) + "\n"


def nice_step(vmax):
    for s in (0.1, 0.2, 0.25, 0.5, 1, 2, 5, 10, 20, 50, 100):
        if vmax / s <= 8:
            return s
    return vmax / 5


def fmt(v):
    if abs(v - round(v)) < 1e-9 and abs(v) >= 1:
        return str(int(round(v)))
    return f"{v:.2f}".rstrip("0").rstrip(".") if v < 10 else f"{v:.1f}"


def side_by_side():
    d = load("2026-11-29-side-by-side.json")
    order = {"put": 0, "get": 1, "empty": 2}
    cells = sorted(d["cells"], key=lambda c: (order.get(c["phase"], 9), c["size"]))
    groups = [(f"{c['phase'].upper()} {size_label(c['size'])}",
               [c["ratio_saker_to"]["seaweedfs"], c["ratio_saker_to"]["minio"]]) for c in cells]
    return bars("S3 side by side: saker's ops/s over its peers'",
                f"{d['date']}, saker bench s3, c=16, medians of 3 alternating runs, no errors "
                "(EMPTY: listing + DeleteObjects)",
                groups, ["over SeaweedFS", "over MinIO"])


def replication():
    d = load("2026-11-28-replication-and-idle.json")["replication_cost_medians_of_3"]
    groups = []
    for key, v in d["summary"]["s3"].items():
        phase, size, _ = key.split()
        groups.append((f"{phase.upper()} {size_label(int(size))}", [v["ratio"]]))
    return bars("Replication 3 on three nodes: share of the all-in-one server's ops/s",
                "2026-11-28, saker bench s3 c=16, 3 alternating rounds, medians; three nodes "
                "and the client on 2 cores",
                groups, ["3 nodes / all-in-one"])


def tikv():
    d = load("2026-11-29-tikv.json")
    groups = [(f"S3 {c['phase'].upper()} {c['size']}", [c["tikv_vs_fjall"]]) for c in d["s3"]]
    groups += [(c["op"], [c["tikv_vs_fjall"]]) for c in d["meta"]]
    return bars("Metadata on TiKV (simulator): share of the embedded engine's ops/s",
                "2026-11-29, medians of 3; the simulator keeps everything in memory: the "
                "engine's own overhead",
                groups, ["TiKV engine / fjall"])


def fs_vs_juicefs():
    groups = []
    build = load("2026-11-29-fs-build.json")["results"]
    for r in build:
        groups.append((f"build, {r['threads']} thr", [r["saker_vs_juicefs"],
                                                       r["saker_vs_juicefs_sync"]]))
    for r in load("2026-11-29-fs-rmtree.json")["results"]:
        groups.append((f"{r['phase']}, {r['threads']} thr",
                       [r["saker_vs_juicefs"], r["saker_vs_juicefs_sync"]]))
    return bars("bench fs: saker mount over JuiceFS (files/s)",
                "2026-11-29, medians; JuiceFS on SQLite as installed, and with ?_sync=FULL "
                "(every metadata transaction synced, as saker's disk durability)",
                groups, ["over JuiceFS as installed", "over JuiceFS ?_sync=FULL"])


def fs_cold():
    d = load("2026-11-29-fs-cold.json")
    warm = {(r["threads"], r["phase"]): r["saker_vs_juicefs"] for r in d["warm"]["results"]}
    cold = {(r["threads"], r["phase"]): r["saker_vs_juicefs"] for r in d["cold"]["results"]}
    groups = [(f"{p}, {t} thr", [warm.get((t, p)), cold.get((t, p))])
              for (t, p) in sorted(cold, key=lambda k: (k[1], k[0]))]
    return bars("bench fs, warm and cold: saker mount over JuiceFS (ops/s)",
                "2026-11-29, 10,000 files, 3 rounds, medians; kernel caches dropped in both; "
                "cold: serving processes restarted too",
                groups, ["warm", "cold"])


def rebalance():
    d = load("2026-11-28-rebalance.json")
    groups = []
    for w in d["workloads"]:
        groups.append((w["workload"], [w[p]["jct_secs"] for p in ("none", "even", "benefit")]))
    return bars("Rebalancing: job completion time by policy (lower is better)",
                "2026-11-28, saker bench rebalance, 4 groups at 300 ops/s each, medians of 3",
                groups, ["none", "even", "benefit"], unit=" s", reference=None)


CHARTS = {
    "s3-side-by-side.svg": side_by_side,
    "replication.svg": replication,
    "tikv.svg": tikv,
    "fs-vs-juicefs.svg": fs_vs_juicefs,
    "fs-cold.svg": fs_cold,
    "rebalance.svg": rebalance,
}


def describe(name):
    """One line for the index: the file's own `what`, cut at its first sentence."""
    path = os.path.join(RESULTS, name)
    if not name.endswith(".json"):
        return "text"
    with open(path, encoding="utf-8") as f:
        d = json.load(f)
    what = d.get("what") if isinstance(d, dict) else None
    if not isinstance(what, str):
        if isinstance(d, dict):
            return "fields: " + ", ".join(f"`{k}`" for k in list(d)[:6])
        return f"a list of {len(d)} runs"
    what = " ".join(what.split())
    for stop in (". ", "; "):
        i = what.find(stop)
        if 0 < i < 200:
            what = what[:i]
            break
    if len(what) > 200:
        what = what[:197].rsplit(" ", 1)[0] + " …"
    return what.replace("|", "\\|").replace("<", "&lt;").replace(">", "&gt;")


def index():
    out = [
        "# Results files",
        "",
        "<!-- Generated by `docs/results.py` from compat_tests/bench/results. Do not edit. -->",
        "",
        "Every results file in `compat_tests/bench/results/`, oldest first, with the first line "
        "of what it measured. Each file names its command, its build and its machine; the "
        "current numbers are in [Benchmarks](benchmarks.md). The `session…` files are the lab "
        "notebook of the FUSE work (issue 4): experiments kept or dropped, with why.",
        "",
        "| file | what |",
        "|---|---|",
    ]
    for name in sorted(os.listdir(RESULTS)):
        out.append(f"| [`{name}`](../../../compat_tests/bench/results/{name}) | {describe(name)} |")
    return "\n".join(out) + "\n"


def main():
    check = "--check" in sys.argv[1:]
    stale = []
    os.makedirs(OUT, exist_ok=True)
    outputs = [(os.path.join(OUT, name), draw) for name, draw in CHARTS.items()]
    outputs.append((os.path.join(os.path.dirname(OUT), "results.md"), index))
    for path, draw in outputs:
        name = os.path.relpath(path, ROOT)
        svg = draw()
        old = open(path, encoding="utf-8").read() if os.path.exists(path) else None
        if old == svg:
            continue
        if check:
            stale.append(name)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(svg)
            print(f"results: wrote {name}")
    if stale:
        print("results: stale or missing: " + ", ".join(stale) +
              " (run docs/results.py and commit)", file=sys.stderr)
        return 1
    if check:
        print(f"results: {len(outputs)} files up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
