#!/usr/bin/env python3
"""The man pages h2gate(1) and h2gate.yaml(5) cannot drift from the program.

  tests/deploy/check_man.py BUILD_DIR   (CTest man_pages, -L deploy)

- every flag and command in `BUILD_DIR/h2gate --help` appears in h2gate(1);
- every key the config loader accepts appears in h2gate.yaml(5). The keys are
  read from the code, not from a list kept by hand: every NodeReader::allowOnly
  call in config/*.cc and filters/*.cc (string literals, and k... constants
  resolved to their string), plus the filter names of filters/registry.h;
- `MANWIDTH=80 man --warnings -l PAGE` renders both pages without a warning.

Pages are BUILD_DIR/man/h2gate.1 and h2gate.yaml.5 (pandoc, cmake/packaging.cmake);
words are looked up in the rendered text. Before judging, the check proves it
can fail: a rendered page with one known word removed must be reported.
Exit 0 when clean, 1 with one line per problem.
"""
import glob
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def render(page, width):
    env = dict(os.environ, MANWIDTH=str(width), MAN_KEEP_FORMATTING="", LC_ALL="C.UTF-8")
    r = subprocess.run(["man", "--warnings", "-l", page], capture_output=True, text=True, env=env)
    # Overstrike (bold/underline) removed, hyphenation joined, whitespace collapsed.
    text = re.sub(r".\x08", "", r.stdout)
    text = text.replace("\u2010", "-").replace("\u2212", "-")
    text = re.sub(r"-\n\s*", "-", text)
    return r.returncode, r.stderr, re.sub(r"\s+", " ", text)


def help_words(binary):
    out = subprocess.run([binary, "--help"], capture_output=True, text=True, check=True).stdout
    flags = set(re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*|-[a-zA-Z])\b", out))
    commands = set()
    in_commands = False
    for line in out.splitlines():
        if line.startswith("Commands:"):
            in_commands = True
            continue
        if in_commands and re.match(r"^  [a-z]", line):
            commands.add(line.split()[0])
        elif in_commands and line and not line.startswith(" "):
            in_commands = False
    return flags, commands


def config_keys():
    sources = glob.glob(os.path.join(ROOT, "config", "*.cc")) + glob.glob(
        os.path.join(ROOT, "filters", "*.cc"))
    headers = glob.glob(os.path.join(ROOT, "config", "*.h")) + glob.glob(
        os.path.join(ROOT, "filters", "*.h"))
    constants = {}
    for f in sources + headers:
        for name, value in re.findall(r'\b(k[A-Z]\w*)\s*(?:\[\])?\s*=\s*"([^"]*)"', open(f).read()):
            constants[name] = value
    keys = set()
    calls = 0
    for f in sources:
        for m in re.finditer(r"allowOnly\(\s*\{(.*?)\}\s*\)", open(f).read(), re.S):
            calls += 1
            body = m.group(1)
            keys.update(re.findall(r'"([^"]+)"', body))
            for ident in re.findall(r"\b(k[A-Z]\w*)\b", body):
                if ident not in constants:
                    raise SystemExit(f"check_man: cannot resolve {ident} in an allowOnly call of {f}")
                keys.add(constants[ident])
    registry = open(os.path.join(ROOT, "filters", "registry.h")).read()
    filters = set(re.findall(r'constexpr const char\* k\w+ = "(h2gate\.filters\.[a-z_]+)"', registry))
    if calls < 20 or len(keys) < 50 or len(filters) < 4:
        raise SystemExit(f"check_man: found only {calls} allowOnly calls, {len(keys)} keys, "
                         f"{len(filters)} filters: has the loader changed shape?")
    return keys | filters


def missing(words, text):
    return sorted(w for w in words if not re.search(r"(?<![\w.-])" + re.escape(w) + r"(?![\w-])", text))


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    build = sys.argv[1]
    problems = []
    pages = {"h2gate.1": os.path.join(build, "man", "h2gate.1"),
             "h2gate.yaml.5": os.path.join(build, "man", "h2gate.yaml.5")}
    wide = {}
    for name, path in pages.items():
        if not os.path.exists(path):
            problems.append(f"{path}: missing (is pandoc installed? cmake --build {build})")
            continue
        rc, err, _ = render(path, 80)
        if rc != 0 or err.strip():
            problems.append(f"MANWIDTH=80 man --warnings -l {name}: exit {rc}: {err.strip()}")
        else:
            print(f"check_man: ok: MANWIDTH=80 man --warnings -l {name}: no warning")
        wide[name] = render(path, 1000)[2]
    if problems:
        print("\n".join(problems))
        return 1

    flags, commands = help_words(os.path.join(build, "h2gate"))
    keys = config_keys()
    # The check can fail: a word it knows is there, removed, is reported.
    probe = sorted(keys)[0]
    if not missing([probe], wide["h2gate.yaml.5"].replace(probe, "")):
        problems.append(f"self-test: removing '{probe}' from h2gate.yaml(5) went unnoticed")
    for w in missing(flags | commands, wide["h2gate.1"]):
        problems.append(f"h2gate(1) lacks '{w}' (in h2gate --help): add it to deploy/man/h2gate.1.md")
    for w in missing(keys, wide["h2gate.yaml.5"]):
        problems.append(f"h2gate.yaml(5) lacks '{w}' (the config loader accepts it): "
                        "add it to deploy/man/h2gate.yaml.5.md")
    if problems:
        print("\n".join(problems))
        return 1
    print(f"check_man: ok: h2gate(1) has all {len(flags)} flags and {len(commands)} command(s) of "
          f"--help; h2gate.yaml(5) has all {len(keys)} keys and filter names the loader accepts")
    return 0


if __name__ == "__main__":
    sys.exit(main())
