#!/usr/bin/env python3
"""No include from a lower layer to a higher one.

The layers are the table between the markers "layers:begin" and "layers:end"
in gateway/README.md (one source of truth: the document states the rule, this
script enforces it). Each row: | rank | name | path prefixes, comma-separated |.
A source file belongs to the layer of its longest matching prefix; it may
include its own layer and those below (lower rank), never one above. A file
under config/, filters/ or gateway/ that no row covers is an error too: a new
folder gets its place in the table first.

  tests/check_layers.py [ROOT]     check ROOT (default: the repository)
  tests/check_layers.py --self-test  prove the check fails on a violation

Exit status 0 when clean, 1 with one line per problem (file:line: why).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE_DIRS = ("config", "filters", "gateway")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
ROW = re.compile(r"^\|\s*(\d+)\s*\|\s*([^|]+?)\s*\|\s*([^|]+?)\s*\|")


def read_layers(root):
    path = os.path.join(root, "gateway", "README.md")
    with open(path, encoding="utf-8") as f:
        text = f.read()
    m = re.search(r"layers:begin(.*?)layers:end", text, re.S)
    if not m:
        sys.exit(f"{path}: no layer table (markers layers:begin / layers:end)")
    layers = []  # (prefix, rank, name)
    for line in m.group(1).splitlines():
        row = ROW.match(line.strip())
        if not row:
            continue
        rank, name = int(row.group(1)), row.group(2)
        for prefix in row.group(3).split(","):
            prefix = prefix.strip().strip("`")
            if prefix:
                layers.append((prefix, rank, name))
    if not layers:
        sys.exit(f"{path}: the layer table has no rows")
    # Longest prefix first.
    layers.sort(key=lambda e: -len(e[0]))
    return layers


def layer_of(layers, path):
    for prefix, rank, name in layers:
        if path.startswith(prefix):
            return rank, name
    return None


def check(root):
    layers = read_layers(root)
    problems = []
    files = 0
    for top in SOURCE_DIRS:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames.sort()
            for fn in sorted(filenames):
                if not fn.endswith((".h", ".cc")):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, fn), root).replace(os.sep, "/")
                files += 1
                own = layer_of(layers, rel)
                if own is None:
                    problems.append(f"{rel}: in no layer of gateway/README.md's table")
                    continue
                with open(os.path.join(root, rel), encoding="utf-8") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m or not m.group(1).startswith(tuple(d + "/" for d in SOURCE_DIRS)):
                            continue
                        target = m.group(1)
                        other = layer_of(layers, target)
                        if other is None:
                            problems.append(f"{rel}:{n}: includes {target}, which is in no layer")
                        elif other[0] > own[0]:
                            problems.append(
                                f"{rel}:{n}: includes {target}: layer {other[0]} ({other[1]}) "
                                f"from layer {own[0]} ({own[1]}), a lower one")
    return files, problems


def self_test(root):
    """A copy of the tree plus one file of layer 1 (net) that includes a
    layer-4 (downstream) header must fail, naming that include."""
    with tempfile.TemporaryDirectory() as tmp:
        for top in SOURCE_DIRS:
            shutil.copytree(os.path.join(root, top), os.path.join(tmp, top))
        probe = os.path.join(tmp, "gateway", "net", "layer_probe.h")
        with open(probe, "w", encoding="utf-8") as f:
            f.write('#pragma once\n#include "gateway/downstream/app_socket.h"\n')
        run = subprocess.run([sys.executable, __file__, tmp], capture_output=True, text=True)
    expected = ("gateway/net/layer_probe.h:2: includes gateway/downstream/app_socket.h: "
                "layer 4 (downstream) from layer 1 (net and HTTP/1), a lower one")
    print(f"self-test: a copy of the tree with gateway/net/layer_probe.h including "
          f"gateway/downstream/app_socket.h: exit {run.returncode}")
    if run.returncode != 1 or expected not in run.stdout.splitlines():
        print("self-test FAILED: the upward include was not reported as\n  " + expected)
        print(run.stdout)
        return 1
    print("  " + expected)
    return 0


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1:] == ["--self-test"]:
        return self_test(here)
    root = sys.argv[1] if len(sys.argv) > 1 else here
    files, problems = check(root)
    for p in problems:
        print(p)
    print(f"{files} files checked against gateway/README.md's layers: "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
