#!/usr/bin/env bash
# Checks h2gate's monitoring files, offline:
#   deploy/prometheus/prometheus.yml   promtool check config
#   deploy/prometheus/alerts.yml       promtool check rules, plus metric names and required fields
#   deploy/prometheus/alerts_test.yml  promtool test rules (alert unit tests)
#   deploy/grafana/h2gate.json         matches generate_dashboard.py; every query becomes a
#                                      recording rule checked by promtool; metric names and
#                                      structure checked by monitoring_lint.py
# and a self-test: a copy of the dashboard with a broken query and copies with an unknown
# metric name must be rejected, so this script cannot silently pass everything.
#
# Needs promtool (Debian: prometheus) and python3 with PyYAML (python3-yaml).
# Runs from any directory; CTest: monitoring_config. Env PROMTOOL / PYTHON override the tools.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
PROM_DIR=$ROOT/deploy/prometheus
GRAFANA_DIR=$ROOT/deploy/grafana
LINT=$ROOT/tests/deploy/monitoring_lint.py
PROMTOOL=${PROMTOOL:-promtool}
PYTHON=${PYTHON:-python3}

fail() {
  echo "check_monitoring: FAIL: $*" >&2
  exit 1
}

command -v "$PROMTOOL" >/dev/null 2>&1 ||
  fail "promtool not found (Debian: apt-get install prometheus; or set PROMTOOL=/path/to/promtool)"
command -v "$PYTHON" >/dev/null 2>&1 || fail "python3 not found"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# run LABEL CMD...: runs CMD, keeping its output in $TMP/out; on failure shows it and fails.
run() {
  local label=$1
  shift
  if ! "$@" >"$TMP/out" 2>&1; then
    sed 's/^/    /' "$TMP/out" >&2
    fail "$label"
  fi
}

# check_dashboard_and_alerts DASHBOARD ALERTS RULES_OUT: lint, then promtool on the
# recording rules made from the dashboard's queries. Output in $TMP/out.
check_dashboard_and_alerts() {
  "$PYTHON" "$LINT" --dashboard "$1" --alerts "$2" --metrics "$PROM_DIR/metric_names.txt" \
    --rules-out "$3" >"$TMP/lint" 2>&1 || { cat "$TMP/lint"; return 1; }
  "$PROMTOOL" check rules "$3" >"$TMP/rules" 2>&1 || { cat "$TMP/rules"; return 1; }
  cat "$TMP/lint" "$TMP/rules"
}

# 1. Prometheus configuration, alert rules and their unit tests.
run "promtool check config deploy/prometheus/prometheus.yml" \
  "$PROMTOOL" check config "$PROM_DIR/prometheus.yml"
run "promtool check rules deploy/prometheus/alerts.yml" \
  "$PROMTOOL" check rules "$PROM_DIR/alerts.yml"
run "promtool test rules deploy/prometheus/alerts_test.yml (alert unit tests)" \
  "$PROMTOOL" test rules "$PROM_DIR/alerts_test.yml"
alert_tests=$(grep -c '^  - name:' "$PROM_DIR/alerts_test.yml" || true)

# 2. The dashboard JSON is what its generator produces.
run "deploy/grafana/h2gate.json differs from deploy/grafana/generate_dashboard.py's output" \
  "$PYTHON" "$GRAFANA_DIR/generate_dashboard.py" --check

# 3. Dashboard queries as recording rules through promtool; metric names of dashboard and alerts.
run "dashboard/alerts check (deploy/grafana/h2gate.json, deploy/prometheus/alerts.yml)" \
  check_dashboard_and_alerts "$GRAFANA_DIR/h2gate.json" "$PROM_DIR/alerts.yml" "$TMP/dashboard_rules.yml"
summary=$(head -n 1 "$TMP/lint")
recorded=$(sed -n 's/.*SUCCESS: \([0-9]*\) rules found.*/\1/p' "$TMP/rules")

# 4. Self-test: the checks above must reject broken input.
"$PYTHON" - "$GRAFANA_DIR/h2gate.json" "$PROM_DIR/alerts.yml" "$TMP" <<'EOF'
import json, sys
dashboard, alerts, tmp = sys.argv[1:4]

def mutate_first_target(fn, out):
    """Applies fn to the first target expr it changes; the copy must differ."""
    d = json.load(open(dashboard))
    for p in d["panels"]:
        for t in p.get("targets", []):
            new = fn(t["expr"])
            if new != t["expr"]:
                t["expr"] = new
                json.dump(d, open(out, "w"), indent=1)
                return
    sys.exit("self-test: could not mutate any query for " + out)

# A PromQL syntax error (unbalanced parenthesis): only promtool can notice.
mutate_first_target(lambda e: e + ")", tmp + "/broken_syntax.json")
# A metric that h2gate does not export: promtool accepts it, the name check must not.
mutate_first_target(lambda e: e.replace("h2gate_", "h2gate_no_such_", 1), tmp + "/unknown_metric.json")
text = open(alerts).read()
assert "h2gate_ready ==" in text
open(tmp + "/unknown_metric_alerts.yml", "w").write(text.replace("h2gate_ready ==", "h2gate_readyy ==", 1))
EOF
self_tests=0
for broken in "broken_syntax.json|$PROM_DIR/alerts.yml" \
              "unknown_metric.json|$PROM_DIR/alerts.yml" \
              "h2gate.json|$TMP/unknown_metric_alerts.yml"; do
  dash=${broken%%|*}
  alerts=${broken#*|}
  [[ $dash == h2gate.json ]] && dash=$GRAFANA_DIR/h2gate.json || dash=$TMP/$dash
  if check_dashboard_and_alerts "$dash" "$alerts" "$TMP/broken_rules.yml" >"$TMP/out" 2>&1; then
    fail "self-test: $(basename "$dash") + $(basename "$alerts") should have been rejected but passed"
  fi
  self_tests=$((self_tests + 1))
done

echo "check_monitoring: OK: prometheus.yml valid; alerts.yml valid, ${alert_tests} promtool rule tests pass;" \
  "${summary}; ${recorded} dashboard queries pass promtool; ${self_tests} broken copies rejected"
