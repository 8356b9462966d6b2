"""Compares `saker bench s3` runs of two modes, RUNS rounds each (OUT/<mode>-<round>.json):
for every phase, size and concurrency, each mode's median ops/s and p50, its errors, and
the ratio OTHER/BASE as `<other>_over_<base>`. Writes OUT/NAME and prints it.

usage: compare-modes.py OUT RUNS BASE OTHER NAME
"""
import json
import os
import sys

out, runs, base, other, name = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5]


def med(xs):
    return sorted(xs)[len(xs) // 2]


def lines(mode):
    got = {}
    for r in range(1, runs + 1):
        for x in json.load(open(os.path.join(out, f"{mode}-{r}.json")))["results"]:
            got.setdefault(f'{x["phase"]} {x["size"]} c{x["concurrency"]}', []).append(x)
    return got


modes = {m: lines(m) for m in (base, other)}
result = {}
for line in modes[base]:
    row = {}
    for m in (base, other):
        rs = modes[m][line]
        row[m] = {"ops_per_s": round(med([x["ops_per_sec"] for x in rs])),
                  "p50_ms": med([x["p50_ms"] for x in rs]),
                  "errors": sum(x["errors"] for x in rs)}
    row[f"{other}_over_{base}"] = round(row[other]["ops_per_s"] / row[base]["ops_per_s"], 3)
    result[line] = row
json.dump(result, open(os.path.join(out, name), "w"), indent=1)
print(json.dumps(result, indent=1))
