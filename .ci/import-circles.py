#!/usr/bin/env python3
"""Import circles inside each crate: groups of modules (files) that reach each other through
`crate::` and `super::` paths (a strongly connected component of the module graph). The
redesign (issue 61) allows none of more than 3 files; crates still being untangled are named
with --allow and only reported.

    .ci/import-circles.py [--allow CRATE ...]     # exit 1 if another crate has one
"""
import os
import re
import sys


def modules(src):
    """Module path ('a::b', '' for the crate root) -> file."""
    mods = {}
    for root, _, files in os.walk(src):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            parts = os.path.relpath(path, src)[:-3].split("/")
            if parts[-1] in ("mod", "lib", "main"):
                parts = parts[:-1]
            mods["::".join(parts)] = path
    return mods


def refs(text, me, mods):
    """The modules of this crate that `text` (module `me`) names."""
    text = re.sub(r"//.*", "", text)
    named = set()
    for m in re.finditer(r"crate::\{([^}]*)\}", text):
        named.update(i.strip() for i in m.group(1).split(",") if i.strip())
    named.update(m.group(1) for m in re.finditer(r"crate::((?:\w+::)*\w+)", text))
    parent = "::".join(me.split("::")[:-1])
    prefix = parent + "::" if parent else ""
    named.update(prefix + m.group(1) for m in re.finditer(r"\bsuper::((?:\w+::)*\w+)", text))
    if re.search(r"\bsuper::(\{|\*)", text):
        named.add(parent)
    out = set()
    for name in named:
        parts = name.split("::")
        for k in range(len(parts), 0, -1):
            candidate = "::".join(parts[:k])
            if candidate in mods:
                out.add(candidate)
                break
    out.discard(me)
    out.discard("")  # the crate root re-exports; it is not a module's dependency
    return out


def components(graph):
    """Strongly connected components (Tarjan, iterative)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    for start in graph:
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                out.append(sorted(comp))
    return out


def main():
    args = sys.argv[1:]
    allowed = set(args[args.index("--allow") + 1:]) if "--allow" in args else set()
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    failed = False
    for crate in sorted(os.listdir(root)):
        src = os.path.join(root, crate, "src")
        if not os.path.isfile(os.path.join(root, crate, "Cargo.toml")) or not os.path.isdir(src):
            continue
        mods = modules(src)
        graph = {m: refs(open(p, encoding="utf-8").read(), m, mods) for m, p in mods.items()}
        for comp in components(graph):
            if len(comp) > 3:
                allowed_here = crate in allowed
                failed |= not allowed_here
                note = " (allowed for now)" if allowed_here else ""
                print(f"{crate}: a circle of {len(comp)} files{note}: {', '.join(comp)}")
    if failed:
        print("import-circles: a crate has an import circle of more than 3 files", file=sys.stderr)
        sys.exit(1)
    print("import-circles: no circle of more than 3 files outside the allowed crates")


if __name__ == "__main__":
    main()
