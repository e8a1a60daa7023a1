#!/usr/bin/env python3
"""No include from a lower layer to a higher one, no folders that include each other.

LAYERS below is the rule (gateway/README.md, Layers, shows the same table and
says why). It lists folders only. A source file under config/, filters/ or
gateway/ belongs to the folder of its longest matching prefix (so
gateway/upstream/auth/ is part of gateway/upstream/) and to that folder's
layer; it may include headers of its own layer and of the layers below it
(lower rank), never of one above. A file, or an included header, that no
folder covers is an error too: a new folder gets its row first (add it to
LAYERS here and to the README's table).

Folders of one layer may include each other's headers, but not in a circle:
when folder A includes B and B includes A (or A -> B -> C -> A), neither can
be understood, tested or moved without the other. Each such group of folders
(a strongly connected component of the folder include graph) is reported as
one folder cycle, with one include line for each edge inside it.

  tests/check_layers.py [ROOT]       check ROOT (default: this repository)
  tests/check_layers.py --self-test  prove the check fails: an upward include,
                                     a folder in no layer and two folder
                                     cycles (two folders, three folders), in a
                                     copy of the tree, must all be reported

Only `#include "..."` lines naming config/, filters/ or gateway/ are checked.
Prints one line per problem (FILE:LINE: includes X (layer A may not include
layer B)), each folder cycle (a line naming its folders, then one indented
line per include edge) and a summary; exit status 0 when clean, 1 otherwise.
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# (rank, layer, folders). A file belongs to the folder of its longest
# matching prefix (gateway/upstream/auth/ is part of gateway/upstream/).
LAYERS = [
    (0, "base", ["config/", "gateway/base/", "gateway/metrics/"]),
    (1, "net and HTTP/1", ["gateway/net/", "gateway/http1/"]),
    (2, "matchers", ["gateway/match/"]),
    (3, "upstream", ["gateway/upstream/"]),
    (4, "PAC engine", ["gateway/pac_engine/"]),
    (5, "filters", ["filters/"]),
    (6, "downstream", ["gateway/downstream/"]),
    (7, "worker", ["gateway/worker/"]),
    (8, "check", ["gateway/check/"]),
    (9, "server", ["gateway/server/"]),
]

SOURCE_DIRS = ("config", "filters", "gateway")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """(rank, name, folder) of the longest folder of LAYERS holding `path`, or None."""
    best = None
    for rank, name, folders in LAYERS:
        for folder in folders:
            if path.startswith(folder) and (best is None or len(folder) > len(best[2])):
                best = (rank, name, folder)
    return best


def strongly_connected(nodes, edges):
    """Tarjan's algorithm: the components of more than one node, each sorted,
    in sorted order. `edges` maps a node to the set of nodes it reaches."""
    index = {}
    low = {}
    stack = []
    on_stack = set()
    found = []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(found)


def unplaced(path):
    folder = path.rsplit("/", 1)[0] + "/"
    return (f"{folder} is in no layer: add it to LAYERS in tests/check_layers.py and to "
            f"the table in gateway/README.md (Layers)")


def check(root):
    """(files checked, problems, folder cycles). A cycle is a list of lines."""
    problems = [f"LAYERS lists folders only: {p} does not end in /"
                for _, _, folders in LAYERS for p in folders if not p.endswith("/")]
    files = 0
    # (including folder, included folder) -> the first include line seen.
    edges = {}
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith((".h", ".cc")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")
                files += 1
                own = layer_of(rel)
                if own is None:
                    problems.append(f"{rel}: {unplaced(rel)}")
                    continue
                with open(os.path.join(root, rel), encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or not m.group(1).startswith(tuple(d + "/" for d in SOURCE_DIRS)):
                            continue
                        target = m.group(1)
                        other = layer_of(target)
                        if other is None:
                            problems.append(f"{rel}:{n}: includes {target}: {unplaced(target)}")
                            continue
                        if other[0] > own[0]:
                            problems.append(
                                f"{rel}:{n}: includes {target} (layer {own[0]} {own[1]} may not "
                                f"include layer {other[0]} {other[1]})")
                        if other[2] != own[2]:
                            edges.setdefault((own[2], other[2]), f"{rel}:{n} includes {target}")
    graph = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
    cycles = []
    for component in strongly_connected(graph.keys(), graph):
        lines = ["folder cycle: " + ", ".join(component) + " include each other"]
        for a in component:
            for b in sorted(graph[a]):
                if b in component:
                    lines.append(f"  {a} -> {b}: {edges[(a, b)]}")
        cycles.append(lines)
    return files, problems, cycles


def run_on_copy(root, probes):
    """Runs this script on a copy of the tree with `probes` added: each a
    header (path parts) that includes one file. (exit status, output lines)"""
    with tempfile.TemporaryDirectory() as tmp:
        for top in SOURCE_DIRS:
            shutil.copytree(os.path.join(root, top), os.path.join(tmp, top))
        for parts, target in probes.items():
            os.makedirs(os.path.join(tmp, *parts[:-1]), exist_ok=True)
            with open(os.path.join(tmp, *parts), "w", encoding="utf-8") as f:
                f.write(f'#pragma once\n#include "{target}"\n')
        run = subprocess.run([sys.executable, os.path.abspath(__file__), tmp],
                             capture_output=True, text=True)
    return run.returncode, run.stdout.splitlines() + run.stderr.splitlines()


def self_test(root):
    """Two copies of the tree. In the first, a layer-1 (net) file includes a
    layer-4 (downstream) header, and a file sits in a folder no layer covers.
    In the second, two folders of layer 1 include each other (net <-> http1)
    and three folders of layer 0 include each other in a circle (config ->
    base -> metrics -> config): no include goes up a layer, only the folder
    cycles are wrong. (An upward include usually closes a cycle too, so the
    cycles are proven apart from it.)"""
    cases = [
        ("an upward include and an unplaced folder", {
            ("gateway", "net", "layer_probe.h"): "gateway/downstream/app_socket.h",
            ("gateway", "layer_probe", "x.h"): "gateway/base/log.h",
        }, [
            "gateway/net/layer_probe.h:2: includes gateway/downstream/app_socket.h (layer 1 net "
            "and HTTP/1 may not include layer 6 downstream)",
            "gateway/layer_probe/x.h: gateway/layer_probe/ is in no layer: add it to LAYERS in "
            "tests/check_layers.py and to the table in gateway/README.md (Layers)",
        ]),
        ("two folder cycles within a layer", {
            ("gateway", "net", "cycle_probe.h"): "gateway/http1/cycle_probe.h",
            ("gateway", "http1", "cycle_probe.h"): "gateway/net/cycle_probe.h",
            ("config", "cycle_probe.h"): "gateway/base/cycle_probe.h",
            ("gateway", "base", "cycle_probe.h"): "gateway/metrics/cycle_probe.h",
            ("gateway", "metrics", "cycle_probe.h"): "config/cycle_probe.h",
        }, [
            "folder cycle: gateway/http1/, gateway/net/ include each other",
            "  gateway/net/ -> gateway/http1/: gateway/net/cycle_probe.h:2 includes "
            "gateway/http1/cycle_probe.h",
            "folder cycle: config/, gateway/base/, gateway/metrics/ include each other",
            "  config/ -> gateway/base/: config/cycle_probe.h:2 includes gateway/base/cycle_probe.h",
            "  gateway/base/ -> gateway/metrics/: gateway/base/cycle_probe.h:2 includes "
            "gateway/metrics/cycle_probe.h",
            "  gateway/metrics/ -> config/: gateway/metrics/cycle_probe.h:2 includes "
            "config/cycle_probe.h",
        ]),
    ]
    failed = 0
    for title, probes, expected in cases:
        rc, lines = run_on_copy(root, probes)
        missing = [e for e in expected if e not in lines]
        print(f"self-test: a copy of the tree with {title}: exit {rc}")
        if rc != 1 or missing:
            print("self-test FAILED: not reported:\n  " + "\n  ".join(missing or expected))
            print("\n".join(lines))
            failed = 1
            continue
        for line in expected:
            print("  " + line)
    return failed


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1:] == ["--self-test"]:
        return self_test(here)
    root = sys.argv[1] if len(sys.argv) > 1 else here
    files, problems, cycles = check(root)
    for p in problems:
        print(p)
    for lines in cycles:
        print("\n".join(lines))
    print(f"{files} files checked against the layers of tests/check_layers.py: "
          f"{len(problems)} problem(s), {len(cycles)} folder cycle(s)")
    return 1 if problems or cycles else 0


if __name__ == "__main__":
    sys.exit(main())
