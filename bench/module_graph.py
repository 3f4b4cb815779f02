#!/usr/bin/env python3
"""The shape of src/ in figures: modules, their imports, upward imports, cycles, the longest functions.

A module is a folder directly under src/ (src/backends/ counts as one). Module A imports B when a file of
A includes "B/...". The order is the module table of docs/ARCHITECTURE.md (dependencies point down it):
an import of a module listed below the importer is upward. File-level cycles are cycles among the
translation units (x.h and x.cpp of one folder are one unit) through their includes of project headers.
The longest functions come from Universal Ctags (its end: field), lambdas left out.

    python3 bench/module_graph.py [REPO]      (default: the current folder)
"""
import os
import re
import subprocess
import sys
from collections import defaultdict

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def module_of(path):
    parts = path.split(os.sep)
    return parts[1] if len(parts) > 2 else None


def table_rank(repo):
    """Each module's row in the table (folders sharing a row share its rank)."""
    rank = {}
    with open(os.path.join(repo, "docs", "ARCHITECTURE.md")) as f:
        text = f.read()
    section = text.split("## Modules", 1)[1].split("\n## ", 1)[0]
    for row, line in enumerate(section.splitlines()):
        for m in re.finditer(r"`src/([a-z_]+)/`", line.split("|")[1] if line.startswith("|") else ""):
            rank.setdefault(m.group(1), row)
    return rank


def strongly_connected(nodes, edges):
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]
    sys.setrecursionlimit(100000)

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
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
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return out


def main():
    repo = sys.argv[1] if len(sys.argv) > 1 else "."
    os.chdir(repo)
    files = []
    for root, _, names in os.walk("src"):
        if "node_modules" in root:
            continue
        files += [os.path.join(root, n) for n in names if n.endswith((".cpp", ".h"))]
    modules = sorted({module_of(f) for f in files if module_of(f)})
    mod_edges = defaultdict(set)
    unit_edges = defaultdict(set)
    lines = 0
    for f in files:
        a = module_of(f)
        with open(f, errors="replace") as fh:
            text = fh.read().splitlines()
        lines += len(text)
        for line in text:
            m = INCLUDE.match(line)
            if not m:
                continue
            target = m.group(1)
            b = target.split("/")[0]
            if a and b in modules and b != a:
                mod_edges[a].add(b)
            header = os.path.join("src", target)
            if os.path.exists(header):
                unit_edges[os.path.splitext(f)[0]].add(os.path.splitext(header)[0])
    for u in list(unit_edges):
        unit_edges[u].discard(u)
    rank = table_rank(".")
    upward = sorted((a, b) for a in mod_edges for b in mod_edges[a] if a in rank and b in rank and rank[b] > rank[a])
    unlisted = [m for m in modules if m not in rank]
    print(f"src/: {len(files)} files, {lines} lines")
    print(f"modules: {len(modules)} ({', '.join(modules)})")
    print(f"imports between modules: {sum(len(v) for v in mod_edges.values())}")
    print(f"upward imports (against docs/ARCHITECTURE.md's table order): {len(upward)}"
          + "".join(f"\n  {a} -> {b}" for a, b in upward))
    if unlisted:
        print(f"modules missing from the table: {', '.join(unlisted)}")
    mc = strongly_connected(modules, mod_edges)
    print(f"module cycles: {len(mc)}" + "".join("\n  " + " <-> ".join(c) for c in mc))
    fc = strongly_connected(set(unit_edges) | {w for v in unit_edges.values() for w in v}, unit_edges)
    print(f"file cycles (x.h + x.cpp as one unit): {len(fc)}" + "".join("\n  " + " <-> ".join(c) for c in fc))
    tags = subprocess.run(["ctags", "-R", "--c++-kinds=fcs", "--fields=+Kne", "--exclude=node_modules", "-o", "-",
                           "src"], capture_output=True, text=True).stdout
    funcs, classes = [], []
    for t in tags.splitlines():
        fields = t.split("\t")
        name, path, kind = fields[0], fields[1], fields[3] if len(fields) > 3 else ""
        if name.startswith("__anon"):
            continue
        start = re.search(r"\tline:(\d+)", t)
        end = re.search(r"\tend:(\d+)", t)
        if start and end:
            row = (int(end.group(1)) - int(start.group(1)) + 1, f"{path}:{start.group(1)} {name}")
            (funcs if kind == "function" else classes).append(row)
    funcs.sort(reverse=True)
    classes.sort(reverse=True)
    print("ten longest functions (lines):" + "".join(f"\n  {n:4d}  {w}" for n, w in funcs[:10]))
    print("five longest classes and structs (lines):" + "".join(f"\n  {n:4d}  {w}" for n, w in classes[:5]))


if __name__ == "__main__":
    main()
