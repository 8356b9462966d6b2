#!/usr/bin/env python3
"""Checks the links of the book (docs/src/**/*.md) and of README.md, without the network.

Every relative link must name a file or directory of the repository, and every `#anchor`
(in the same page or another) a heading of the Markdown page it points to, as mdBook makes
heading ids (and GitHub nearly so). Every page of docs/src must be in SUMMARY.md, and every
page SUMMARY.md names must exist. External links (http:, https:, mailto:) are not fetched.

    docs/check-links.py          # exit 0 when every link resolves, 1 with a list otherwise
"""

import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "docs", "src")

FENCE = re.compile(r"^(```|~~~)")
# [text](target) and ![alt](target); the target ends at whitespace or the closing parenthesis.
INLINE = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFDEF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
HTML_ID = re.compile(r"""<a\s+(?:name|id)=["']([^"']+)["']""")
CODE_SPAN = re.compile(r"(`+)(.+?)\1")


def strip_code_spans(line):
    return CODE_SPAN.sub("", line)


def heading_text(raw):
    """The text of a heading as rendered: links to their text, markup and HTML tags gone."""
    t = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", raw)
    t = re.sub(r"<[^>]+>", "", t)
    t = t.replace("`", "")
    t = re.sub(r"(\*\*|__|\*|_)(\S.*?\S|\S)\1", r"\2", t)
    return t


def slug(text):
    """mdBook's normalize_id: alphanumerics, '_' and '-' kept (lower case), spaces to '-'."""
    out = []
    for ch in text.strip():
        if ch.isalnum() or ch in "_-":
            out.append(ch.lower())
        elif ch.isspace():
            out.append("-")
    return "".join(out)


def lines_outside_code(path):
    fenced = False
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if FENCE.match(line.lstrip()):
                fenced = not fenced
                continue
            if not fenced:
                yield n, line.rstrip("\n")


_anchors = {}


def anchors(path):
    if path not in _anchors:
        ids, seen = set(), {}
        for _, line in lines_outside_code(path):
            m = HEADING.match(line)
            if m:
                base = slug(heading_text(m.group(2)))
                k = seen.get(base, 0)
                seen[base] = k + 1
                ids.add(base if k == 0 else f"{base}-{k}")
            ids.update(HTML_ID.findall(line))
        _anchors[path] = ids
    return _anchors[path]


def links(path):
    for n, line in lines_outside_code(path):
        text = strip_code_spans(line)
        for m in INLINE.finditer(text):
            yield n, m.group(1)
        m = REFDEF.match(text)
        if m:
            yield n, m.group(1)


def check_file(path, errors):
    rel = os.path.relpath(path, ROOT)
    for n, target in links(path):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target, re.I):
            continue  # external: http(s), mailto, …
        where, _, anchor = target.partition("#")
        dest = path if where == "" else os.path.normpath(os.path.join(os.path.dirname(path), where))
        if not os.path.exists(dest):
            errors.append(f"{rel}:{n}: {target}: no such file")
            continue
        if not dest.startswith(ROOT + os.sep) and dest != ROOT:
            errors.append(f"{rel}:{n}: {target}: outside the repository")
            continue
        if anchor and dest.endswith(".md") and anchor not in anchors(dest):
            errors.append(f"{rel}:{n}: {target}: no heading #{anchor} in {os.path.relpath(dest, ROOT)}")


def check_summary(errors):
    summary = os.path.join(SRC, "SUMMARY.md")
    listed = set()
    for _, target in links(summary):
        listed.add(os.path.normpath(os.path.join(SRC, target.partition("#")[0])))
    for dirpath, _, files in os.walk(SRC):
        for name in files:
            p = os.path.join(dirpath, name)
            if name.endswith(".md") and name != "SUMMARY.md" and p not in listed:
                errors.append(f"{os.path.relpath(p, ROOT)}: not in docs/src/SUMMARY.md")


def main():
    pages = [os.path.join(ROOT, "README.md")]
    for dirpath, _, files in os.walk(SRC):
        pages += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".md")]
    errors = []
    for p in pages:
        check_file(p, errors)
    check_summary(errors)
    for e in errors:
        print(e)
    sys.stdout.flush()
    print(f"check-links: {len(pages)} pages, {len(errors)} broken", file=sys.stderr)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
