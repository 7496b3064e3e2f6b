#!/usr/bin/env python3
"""Checks that engine/src's folders import one another in one direction only.

Counts `crate::X` paths in each top-level folder (or file) of engine/src, outside the
`#[cfg(test)]` part of each file, and reports every strongly connected component of more than
one folder: a cycle in the dependency direction (docs/DESIGN.md, "The parts and who owns
what"). Exits 1 when there is one. `--edges` also prints every edge with the files that make it.
"""
import collections
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "engine", "src")


def unit(rel):
    parts = rel.split(os.sep)
    return parts[0][:-3] if len(parts) == 1 else parts[0]


def edges():
    out = collections.defaultdict(lambda: collections.defaultdict(set))
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if not f.endswith(".rs"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ROOT)
            src = open(path, encoding="utf-8").read()
            cut = src.find("#[cfg(test)]")
            if cut >= 0:
                src = src[:cut]
            u = unit(rel)
            for m in re.finditer(r"crate::([a-z_]+)", src):
                if m.group(1) != u:
                    out[u][m.group(1)].add(rel)
    return out


def components(graph):
    names = sorted(set(graph) | {v for u in graph for v in graph[u]})
    index, low, stack, on, found, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(10000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, {}):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            found.append(sorted(comp))

    for v in names:
        if v not in index:
            visit(v)
    return [c for c in found if len(c) > 1 and c != ["fs"]]


def main():
    graph = edges()
    if "--edges" in sys.argv:
        for u in sorted(graph):
            for v in sorted(graph[u]):
                print(f"{u} -> {v}: {', '.join(sorted(graph[u][v]))}")
    cycles = components(graph)
    for c in cycles:
        print("import cycle between:", ", ".join(c))
    if not cycles:
        print("engine/src: no import cycle between folders")
    return 1 if cycles else 0


if __name__ == "__main__":
    sys.exit(main())
