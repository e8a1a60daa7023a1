#!/usr/bin/env python3
"""Static checks of h2gate's Grafana dashboard and Prometheus alert rules.

Used by check_monitoring.sh (which also runs promtool):

    monitoring_lint.py --dashboard D.json --alerts A.yml --metrics metric_names.txt \
                       --rules-out OUT.yml

* turns every dashboard query (panel targets and label_values() variable queries)
  into a recording rule in OUT.yml, with Grafana's variables substituted, for
  `promtool check rules OUT.yml`;
* checks that every metric a query, an alert rule or an annotation/description names
  is in metric_names.txt (histograms by base name: only their _bucket/_sum/_count
  series are accepted; `up` is allowed);
* checks the dashboard's structure: unique panel ids and refIds, every panel and
  target on the ${DS_PROMETHEUS} data source, variables defined, range selectors
  using $__rate_interval, histogram_quantile() aggregations keeping `le`.

Prints one summary line on success; on failure prints every problem to stderr and
exits 1. Python 3 standard library, plus PyYAML for the alert rules.
"""

import argparse
import json
import re
import sys

BUILTIN_VARS = {
    "__rate_interval": "1m",
    "__interval": "1m",
    "__interval_ms": "60000",
    "__range": "1h",
    "__range_s": "3600",
    "__range_ms": "3600000",
}
ALWAYS_ALLOWED_METRICS = {"up"}
DATASOURCE_UID = "${DS_PROMETHEUS}"

# $var, ${var}, ${var:format}, [[var]], [[var:format]]
VAR_RE = re.compile(r"\$\{(\w+)(?::[^}]*)?\}|\$(\w+)|\[\[(\w+)(?::[^\]]*)?\]\]")
STRING_RE = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
            "group_right", "bool", "offset", "inf", "nan"}
METRIC_WORD_RE = re.compile(r"\b(?:h2gate|process)_[a-z0-9_]+\b")

problems = []


def problem(msg):
    problems.append(msg)


# ----------------------------------------------------------------- metric names
def load_metric_names(path):
    plain, histograms = set(), set()
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            body, _, comment = line.partition("#")
            name = body.strip()
            if not name:
                continue
            if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", name):
                problem("%s:%d: not a metric name: %r" % (path, n, name))
                continue
            (histograms if comment.strip() == "histogram" else plain).add(name)
    if not plain and not histograms:
        problem("%s: no metric names" % path)
    return plain, histograms


def metric_known(name, plain, histograms):
    if name in plain or name in ALWAYS_ALLOWED_METRICS:
        return True
    for suffix in ("_bucket", "_sum", "_count"):
        if name.endswith(suffix) and name[: -len(suffix)] in histograms:
            return True
    return False


def metric_names_in(expr):
    """Metric names a PromQL expression selects (identifiers that are not functions,
    keywords, label names or strings)."""
    s = STRING_RE.sub('""', expr)
    s = re.sub(r"#[^\n]*", " ", s)
    s = re.sub(r"\{[^}]*\}", "{}", s)          # label matchers
    s = re.sub(r"\[[^\]]*\]", "[]", s)         # ranges, subqueries
    s = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", s)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*|\d[\w.]*|\.\d[\w.]*|\S", s):
        tok = m.group(0)
        if not re.match(r"[A-Za-z_:]", tok) or tok.lower() in KEYWORDS:
            continue
        if s[m.end():].lstrip().startswith("("):
            continue  # function call or aggregation
        names.add(tok)
    return names


def check_names(where, expr, plain, histograms):
    names = metric_names_in(expr)
    if not names:
        problem("%s: no metric name found in %r" % (where, expr))
    for name in sorted(names):
        if not metric_known(name, plain, histograms):
            hint = ""
            if name in histograms:
                hint = " (a histogram: use %s_bucket/_sum/_count)" % name
            problem("%s: unknown metric %r%s in %r" % (where, name, hint, expr))
    return names


def check_names_in_text(where, text, plain, histograms):
    for name in sorted(set(METRIC_WORD_RE.findall(text))):
        if not metric_known(name, plain, histograms) and name not in histograms:
            problem("%s: text names unknown metric %r" % (where, name))


def check_histogram_quantiles(where, expr):
    for m in re.finditer(r"histogram_quantile\s*\(", expr):
        rest = expr[m.end():]
        g = re.search(r"\b(?:by)\s*\(([^)]*)\)", rest)
        if not g or "le" not in [x.strip() for x in g.group(1).split(",")]:
            problem("%s: histogram_quantile() without an aggregation `by (le, ...)`: %r"
                    % (where, expr))
        if "_bucket" not in rest:
            problem("%s: histogram_quantile() over no _bucket series: %r" % (where, expr))


# ------------------------------------------------------------ Grafana variables
def substitute(where, expr, variables):
    """Grafana variables -> something promtool can parse: built-in intervals to
    durations, template variables inside a regex matcher (=~, !~) to .*, inside
    other strings to a literal. Anything else is a problem."""
    def in_string(m):
        lit = m.group(0)
        before = expr[: m.start()].rstrip()
        regex_ctx = before.endswith("=~") or before.endswith("!~")

        def repl(v):
            name = v.group(1) or v.group(2) or v.group(3)
            if name in BUILTIN_VARS:
                return BUILTIN_VARS[name]
            if name not in variables:
                problem("%s: undefined variable $%s in %r" % (where, name, expr))
            return ".*" if regex_ctx else "value"
        return VAR_RE.sub(repl, lit)

    out, pos = [], 0
    for m in STRING_RE.finditer(expr):
        out.append(expr[pos:m.start()])
        out.append(in_string(m))
        pos = m.end()
    out.append(expr[pos:])
    s = "".join(out)

    def outside(v):
        name = v.group(1) or v.group(2) or v.group(3)
        if name in BUILTIN_VARS:
            return BUILTIN_VARS[name]
        problem("%s: variable $%s outside a label matcher cannot be checked: %r"
                % (where, name, expr))
        return v.group(0)
    # Only outside strings now (strings were rewritten above and hold no '$').
    return VAR_RE.sub(outside, s)


def check_ranges(where, expr):
    for r in re.findall(r"\[([^\]]*)\]", STRING_RE.sub('""', expr)):
        if r.strip() not in ("$__rate_interval", "${__rate_interval}", "$__interval", "$__range"):
            problem("%s: range [%s] should be [$__rate_interval] so it follows the "
                    "scrape interval and zoom: %r" % (where, r, expr))


# ------------------------------------------------------------------ dashboard
def walk_panels(panels):
    for p in panels or []:
        yield p
        yield from walk_panels(p.get("panels"))


def check_datasource(where, ds):
    uid = ds.get("uid") if isinstance(ds, dict) else ds
    if uid != DATASOURCE_UID:
        problem("%s: datasource %r, expected uid %s" % (where, ds, DATASOURCE_UID))


def dashboard_queries(path, plain, histograms, stats):
    """(record name, substituted expr) of every query of the dashboard."""
    with open(path, encoding="utf-8") as f:
        try:
            d = json.load(f)
        except json.JSONDecodeError as e:
            problem("%s: not JSON: %s" % (path, e))
            return []
    if not isinstance(d.get("schemaVersion"), int) or d["schemaVersion"] < 36:
        problem("%s: schemaVersion %r (expected >= 36)" % (path, d.get("schemaVersion")))
    templating = d.get("templating", {}).get("list", [])
    variables = {v.get("name"): v for v in templating}
    ds_vars = [v for v in templating if v.get("type") == "datasource"]
    if not any(v.get("name") == "DS_PROMETHEUS" and v.get("query") == "prometheus"
               for v in ds_vars):
        problem("%s: no datasource variable DS_PROMETHEUS of type prometheus" % path)
    for required in ("cluster", "listener"):
        if required not in variables:
            problem("%s: no template variable %r" % (path, required))

    rules = []
    for v in templating:
        if v.get("type") != "query":
            continue
        where = "%s: variable %s" % (path, v.get("name"))
        check_datasource(where, v.get("datasource"))
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        m = re.fullmatch(r"\s*label_values\((.*),\s*(\w+)\s*\)\s*", q or "", re.S)
        if not m:
            problem("%s: only label_values(selector, label) queries are checked, got %r"
                    % (where, q))
            continue
        check_names(where, m.group(1), plain, histograms)
        rules.append(("dashboard:variable_%s" % v["name"], substitute(where, m.group(1), variables)))
        stats["variables"] += 1

    seen_ids = set()
    for p in walk_panels(d.get("panels")):
        pid = p.get("id")
        where = "%s: panel %s %r" % (path, pid, p.get("title"))
        if pid in seen_ids or not isinstance(pid, int):
            problem("%s: missing or duplicate panel id" % where)
        seen_ids.add(pid)
        if "gridPos" not in p:
            problem("%s: no gridPos" % where)
        check_names_in_text(where + " description", p.get("description", ""), plain, histograms)
        if p.get("type") == "row":
            continue
        stats["panels"] += 1
        check_datasource(where, p.get("datasource"))
        targets = p.get("targets") or []
        if not targets:
            problem("%s: no targets" % where)
        refs = set()
        for n, t in enumerate(targets, 1):
            tw = "%s target %s" % (where, t.get("refId", n))
            if t.get("refId") in refs:
                problem("%s: duplicate refId" % tw)
            refs.add(t.get("refId"))
            check_datasource(tw, t.get("datasource"))
            expr = t.get("expr", "")
            if not expr.strip():
                problem("%s: empty expr" % tw)
                continue
            check_names(tw, expr, plain, histograms)
            check_ranges(tw, expr)
            check_histogram_quantiles(tw, expr)
            rules.append(("dashboard:panel_%s_target_%d" % (pid, n), substitute(tw, expr, variables)))
            stats["queries"] += 1
    if stats["panels"] == 0:
        problem("%s: no panels" % path)
    return rules


# --------------------------------------------------------------------- alerts
def check_alerts(path, plain, histograms, stats):
    try:
        import yaml
    except ImportError:
        problem("python3 has no yaml module (Debian: apt-get install python3-yaml; pip: PyYAML)")
        return
    with open(path, encoding="utf-8") as f:
        try:
            doc = yaml.safe_load(f)
        except yaml.YAMLError as e:
            problem("%s: not YAML: %s" % (path, e))
            return
    for group in (doc or {}).get("groups", []):
        for rule in group.get("rules", []):
            name = rule.get("alert") or rule.get("record")
            where = "%s: %s" % (path, name)
            check_names(where, str(rule.get("expr", "")), plain, histograms)
            check_histogram_quantiles(where, str(rule.get("expr", "")))
            for key, text in (rule.get("annotations") or {}).items():
                check_names_in_text("%s annotation %s" % (where, key), str(text), plain, histograms)
            if rule.get("alert"):
                stats["alerts"] += 1
                if not rule.get("for"):
                    problem("%s: no `for:`" % where)
                if not (rule.get("labels") or {}).get("severity"):
                    problem("%s: no severity label" % where)
                ann = rule.get("annotations") or {}
                for key in ("summary", "description"):
                    if not ann.get(key):
                        problem("%s: no %s annotation" % (where, key))
    if stats["alerts"] == 0:
        problem("%s: no alert rules" % path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dashboard", required=True)
    ap.add_argument("--alerts", required=True)
    ap.add_argument("--metrics", required=True)
    ap.add_argument("--rules-out", required=True)
    a = ap.parse_args()

    stats = {"panels": 0, "queries": 0, "variables": 0, "alerts": 0}
    plain, histograms = load_metric_names(a.metrics)
    rules = dashboard_queries(a.dashboard, plain, histograms, stats)
    check_alerts(a.alerts, plain, histograms, stats)

    # JSON strings are valid YAML scalars: no yaml module needed to write.
    with open(a.rules_out, "w", encoding="utf-8") as f:
        f.write("groups:\n  - name: dashboard\n    rules:\n")
        for record, expr in rules:
            f.write("      - record: %s\n        expr: %s\n" % (record, json.dumps(expr)))

    if problems:
        for p in problems:
            sys.stderr.write("  " + p + "\n")
        sys.stderr.write("%d problem(s) in the dashboard/alerts\n" % len(problems))
        return 1
    print("%(panels)d dashboard panels, %(queries)d panel queries, %(variables)d variable "
          "queries, %(alerts)d alerts" % stats + ", %d metric families known"
          % (len(plain) + len(histograms)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
