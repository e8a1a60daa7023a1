#!/usr/bin/env python3
"""Every relative link and anchor in the repository's Markdown files resolves.

  tests/check_links.py [ROOT]        check every *.md under ROOT (git ls-files)
  tests/check_links.py --self-test   prove it reports a broken file link and anchor

Links are [text](target) and [label]: target outside code blocks and inline
code. A target with a scheme (https:, mailto:) is not checked; any other is a
path relative to the file (or, starting with /, to ROOT), optionally with
#anchor, or #anchor alone for the same file. The file (or directory) must
exist; an anchor must be a heading of the target Markdown file, slugged the
way GitHub does (lower case, punctuation but '-' and '_' dropped, spaces to
'-', repeated headings get -1, -2, ...) or an explicit <a id="..."> / name.
Exit 0 when all resolve, 1 with one line per broken link (file:line: why).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

LINK = re.compile(r"(?<!\!)\[(?:[^\]\[]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
IMAGE = re.compile(r"!\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REF = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
HEADING = re.compile(r"^\s{0,3}(#{1,6})\s+(.*?)\s*#*\s*$")
EXPLICIT = re.compile(r"<a\s+(?:id|name)=\"([^\"]+)\"")


def slug(text):
    text = re.sub(r"`([^`]*)`", r"\1", text)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links keep their text
    text = re.sub(r"<[^>]+>", "", text)
    text = text.strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def strip_code(lines):
    """The lines with fenced code blocks blanked and inline code removed."""
    out = []
    fence = None
    for line in lines:
        m = re.match(r"^\s{0,3}(`{3,}|~{3,})", line)
        if fence:
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence):
                fence = None
            out.append("")
            continue
        if m:
            fence = m.group(1)
            out.append("")
            continue
        out.append(re.sub(r"(`+)(?:(?!\1).)+?\1", "", line))
    return out


_anchor_cache = {}


def anchors(path):
    if path not in _anchor_cache:
        seen = {}
        found = set()
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        for raw, line in zip(lines, strip_code(lines)):
            if raw.strip() and not line.strip():
                continue  # inside a fenced code block
            for a in EXPLICIT.findall(raw):
                found.add(a)
            m = HEADING.match(raw)
            if not m:
                continue
            s = slug(m.group(2))
            n = seen.get(s, 0)
            seen[s] = n + 1
            found.add(s if n == 0 else f"{s}-{n}")
        _anchor_cache[path] = found
    return _anchor_cache[path]


def markdown_files(root):
    try:
        out = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard", "*.md"],
                             capture_output=True, text=True, check=True).stdout.split()
        files = [os.path.join(root, f) for f in out]
    except (subprocess.CalledProcessError, FileNotFoundError):
        files = []
        for d, dirs, names in os.walk(root):
            dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build")]
            files += [os.path.join(d, n) for n in names if n.endswith(".md")]
    return sorted(f for f in files if os.path.isfile(f))


def check(root):
    problems = []
    files = markdown_files(root)
    links = 0
    for path in files:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
        rel = os.path.relpath(path, root)
        for no, line in enumerate(strip_code(lines), 1):
            targets = LINK.findall(line) + IMAGE.findall(line)
            m = REF.match(line)
            if m:
                targets.append(m.group(1))
            for t in targets:
                if re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", t):
                    continue  # https:, mailto:, ...
                links += 1
                file_part, _, anchor = t.partition("#")
                if file_part:
                    base = root if file_part.startswith("/") else os.path.dirname(path)
                    target = os.path.normpath(os.path.join(base, file_part.lstrip("/")))
                    if not os.path.exists(target):
                        problems.append(f"{rel}:{no}: {t}: no such file {os.path.relpath(target, root)}")
                        continue
                else:
                    target = path
                if anchor:
                    if os.path.isdir(target) or not target.endswith(".md"):
                        problems.append(f"{rel}:{no}: {t}: an anchor into a file that is not Markdown")
                    elif anchor not in anchors(target):
                        problems.append(f"{rel}:{no}: {t}: no heading #{anchor} in "
                                        f"{os.path.relpath(target, root)}")
    return files, links, problems


def self_test():
    d = tempfile.mkdtemp()
    try:
        os.makedirs(os.path.join(d, "sub"))
        with open(os.path.join(d, "README.md"), "w") as f:
            f.write("# Top\n\n## A `code` heading, with: punctuation\n\n## Top\n\n"
                    "[ok](#a-code-heading-with-punctuation) [ok](#top-1) [ok](sub/x.md#x)\n"
                    "[bad](#nowhere) [bad](sub/missing.md) [bad](sub/x.md#nope)\n"
                    "```\n[in code](#ignored)\n```\n`[inline](#ignored)` [web](https://x.invalid/)\n")
        with open(os.path.join(d, "sub", "x.md"), "w") as f:
            f.write("# X\n")
        _, links, problems = check(d)
        want = ["#nowhere", "sub/missing.md", "sub/x.md#nope"]
        got = [p.split(": ")[1] for p in problems]
        if links != 6 or got != want:
            print(f"self-test FAILED: {links} links checked, problems {problems}")
            return 1
        print("self-test passed: 3 good links resolved, 3 broken ones reported, code ignored")
        return 0
    finally:
        shutil.rmtree(d)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--self-test":
        return self_test()
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                           os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
    files, links, problems = check(root)
    for p in problems:
        print(p)
    print(f"{len(files)} Markdown files, {links} relative links: {len(problems)} broken")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
