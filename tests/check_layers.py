#!/usr/bin/env python3
"""No include from a lower layer to a higher one.

LAYERS below is the rule (gateway/README.md, Layers, shows the same table and
says why). A source file under config/, filters/ or gateway/ belongs to the
layer of its longest matching folder; it may include headers of its own
layer and of the layers below it (lower rank), never of one above. A file, or
an included header, that no prefix covers is an error too: a new folder gets
its row first (add the prefix to LAYERS here and to the README's table).

  tests/check_layers.py [ROOT]       check ROOT (default: this repository)
  tests/check_layers.py --self-test  prove the check fails: an upward include
                                     and a folder in no layer, in a copy of
                                     the tree, must both be reported

Only `#include "..."` lines naming config/, filters/ or gateway/ are checked.
Prints one line per problem (FILE:LINE: includes X (layer A may not include
layer B)) and a summary; exit status 0 when clean, 1 otherwise.
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
    (2, "upstream", ["gateway/upstream/"]),
    (3, "filters and PAC", ["filters/", "gateway/pac/"]),
    (4, "downstream", ["gateway/downstream/"]),
    (5, "worker", ["gateway/worker/"]),
    (6, "check", ["gateway/check/"]),
    (7, "server", ["gateway/server/"]),
]

SOURCE_DIRS = ("config", "filters", "gateway")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    """(rank, name) of the longest prefix matching `path`, or None."""
    best = None
    for rank, name, prefixes in LAYERS:
        for prefix in prefixes:
            if path.startswith(prefix) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), rank, name)
    return best[1:] if best else None


def unplaced(path):
    folder = path.rsplit("/", 1)[0] + "/"
    return (f"{folder} is in no layer: add it to LAYERS in tests/check_layers.py and to "
            f"the table in gateway/README.md (Layers)")


def check(root):
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
                        elif other[0] > own[0]:
                            problems.append(
                                f"{rel}:{n}: includes {target} (layer {own[0]} {own[1]} may not "
                                f"include layer {other[0]} {other[1]})")
    return files, problems


def self_test(root):
    """In a copy of the tree: a layer-1 (net) file including a layer-4
    (downstream) header, and a file in a folder no layer covers."""
    with tempfile.TemporaryDirectory() as tmp:
        for top in SOURCE_DIRS:
            shutil.copytree(os.path.join(root, top), os.path.join(tmp, top))
        with open(os.path.join(tmp, "gateway", "net", "layer_probe.h"), "w",
                  encoding="utf-8") as f:
            f.write('#pragma once\n#include "gateway/downstream/app_socket.h"\n')
        os.mkdir(os.path.join(tmp, "gateway", "layer_probe"))
        with open(os.path.join(tmp, "gateway", "layer_probe", "x.h"), "w",
                  encoding="utf-8") as f:
            f.write('#pragma once\n#include "gateway/base/log.h"\n')
        run = subprocess.run([sys.executable, os.path.abspath(__file__), tmp],
                             capture_output=True, text=True)
    expected = [
        "gateway/net/layer_probe.h:2: includes gateway/downstream/app_socket.h (layer 1 net "
        "and HTTP/1 may not include layer 4 downstream)",
        "gateway/layer_probe/x.h: gateway/layer_probe/ is in no layer: add it to LAYERS in "
        "tests/check_layers.py and to the table in gateway/README.md (Layers)",
    ]
    lines = run.stdout.splitlines()
    missing = [e for e in expected if e not in lines]
    print(f"self-test: a copy of the tree with an upward include and an unplaced folder: "
          f"exit {run.returncode}")
    if run.returncode != 1 or missing:
        print("self-test FAILED: not reported:\n  " + "\n  ".join(missing or expected))
        print(run.stdout + run.stderr)
        return 1
    for e in expected:
        print("  " + e)
    return 0


def main():
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    if sys.argv[1:] == ["--self-test"]:
        return self_test(here)
    root = sys.argv[1] if len(sys.argv) > 1 else here
    files, problems = check(root)
    for p in problems:
        print(p)
    print(f"{files} files checked against the layers of tests/check_layers.py: "
          f"{len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
