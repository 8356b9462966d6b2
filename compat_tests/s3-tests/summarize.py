#!/usr/bin/env python3
"""Summarize a pytest JUnit XML report of ceph/s3-tests.

usage: summarize.py JUNIT_XML SUMMARY_TXT FAILURES_TSV

SUMMARY_TXT: passed/failed/errors/skipped counts, then the failing tests grouped by the S3 error
(ClientError code + operation) or the assertion they failed on, largest group first.
FAILURES_TSV: one line per failing test: outcome, phase, test name, group, first message line.
A test counts as "failed" when its body failed and as "error" when only its setup or
teardown did (pytest reports a teardown error of a passing test as an error too).
"""
import collections
import re
import sys
import xml.etree.ElementTree as ET

CLIENT_ERROR = re.compile(
    r"An error occurred \(([^)]*)\) when calling the (\w+) operation")


def first_line(text):
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""


def normalize(msg):
    """A grouping key for one failure message."""
    m = CLIENT_ERROR.search(msg)
    if m:
        return "ClientError {} in {}".format(m.group(1), m.group(2))
    msg = re.sub(r"^failed on (setup|teardown) with ", "", msg).strip('"')
    # drop object reprs, bucket names, long numbers and ids so similar failures group together
    msg = re.sub(r" at 0x[0-9a-f]+", "", msg)
    msg = re.sub(r"saker-[a-z0-9]+-\d+", "<bucket>", msg)
    msg = re.sub(r"\b[0-9a-fA-F]{16,}\b", "<hex>", msg)
    msg = re.sub(r"\d{5,}", "<n>", msg)
    return msg[:160]


def main():
    junit, summary_path, tsv_path = sys.argv[1:4]
    root = ET.parse(junit).getroot()
    counts = collections.Counter()
    groups = collections.defaultdict(list)
    rows = []
    for case in root.iter("testcase"):
        name = case.get("name")
        failure = case.find("failure")
        error = case.find("error")
        skipped = case.find("skipped")
        if failure is not None:
            outcome, node, phase = "failed", failure, "call"
        elif error is not None:
            outcome, node = "error", error
            m = re.match(r"failed on (setup|teardown)", error.get("message") or "")
            phase = m.group(1) if m else "collect"
        elif skipped is not None:
            counts["skipped"] += 1
            continue
        else:
            counts["passed"] += 1
            continue
        counts[outcome] += 1
        msg = first_line(node.get("message")) or first_line(node.text)
        key = normalize(msg)
        if phase != "call":
            key = "[{}] {}".format(phase, key)
        groups[key].append(name)
        rows.append((outcome, phase, name, key, msg[:400]))
        # a test whose body failed may also have errored in teardown
        if failure is not None and error is not None:
            counts["also_teardown_error"] += 1

    with open(summary_path, "w") as out:
        total = sum(counts[k] for k in ("passed", "failed", "error", "skipped"))
        out.write("total {}  passed {}  failed {}  errors {}  skipped {}\n".format(
            total, counts["passed"], counts["failed"], counts["error"], counts["skipped"]))
        if counts["also_teardown_error"]:
            out.write("({} of the failed tests also errored in teardown)\n".format(
                counts["also_teardown_error"]))
        out.write("\nFailing tests grouped by error ({} groups, largest first):\n".format(
            len(groups)))
        for key, names in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0])):
            out.write("\n## {} -- {} tests\n".format(key, len(names)))
            for n in sorted(names):
                out.write("    {}\n".format(n))
    with open(tsv_path, "w") as out:
        out.write("outcome\tphase\ttest\tgroup\tmessage\n")
        for row in rows:
            out.write("\t".join(c.replace("\t", " ").replace("\n", " ") for c in row) + "\n")


if __name__ == "__main__":
    main()
