#!/usr/bin/env python3
"""Generates h2gate.json, the Grafana dashboard for h2gate's Prometheus metrics.

    python3 deploy/grafana/generate_dashboard.py          # rewrite h2gate.json
    python3 deploy/grafana/generate_dashboard.py --check  # exit 1 if h2gate.json is stale

Edit this script, not the JSON, then regenerate and commit both;
tests/deploy/check_monitoring.sh fails when they disagree and checks every query
with promtool. Metric names: deploy/prometheus/metric_names.txt. Python 3 standard
library only.

Grafana target: schemaVersion 38 (Grafana 9.4+/10). The data source is the template
variable DS_PROMETHEUS, so the file works both through Dashboards > Import and
through file provisioning. Filters: instance, cluster, listener (multi-select,
"All" = .*); a panel applies only those its metric has as labels.
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "h2gate.json")

DS = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
RATE = "$__rate_interval"

# Label filters, by which labels a metric family has.
I = 'instance=~"$instance"'
C = 'cluster=~"$cluster"'
L = 'listener=~"$listener"'
IC = I + ", " + C
IL = I + ", " + L
ILC = I + ", " + L + ", " + C


def sel(metric, matchers, extra=""):
    inner = ", ".join(m for m in (matchers, extra) if m)
    return "%s{%s}" % (metric, inner)


def rate(metric, matchers, extra=""):
    return "rate(%s[%s])" % (sel(metric, matchers, extra), RATE)


def quantiles(histogram, matchers, by, legend):
    """p50/p90/p99 targets of one histogram family, aggregated by `by` (without le)."""
    group = ", ".join(["le"] + by)
    out = []
    for q in ("0.5", "0.9", "0.99"):
        name = "p" + str(int(float(q) * 100))
        expr = "histogram_quantile(%s, sum by (%s) (%s))" % (
            q, group, rate(histogram + "_bucket", matchers))
        out.append(target(expr, name + (" " + legend if legend else "")))
    return out


def target(expr, legend):
    return {"expr": expr, "legendFormat": legend}


class Layout:
    """Places panels left to right in a 24-column grid, rows of panels of one height."""

    def __init__(self):
        self.panels = []
        self.next_id = 1
        self.x = 0
        self.y = 0
        self.row_h = 0

    def _id(self):
        i = self.next_id
        self.next_id += 1
        return i

    def row(self, title):
        self._newline()
        self.panels.append({
            "collapsed": False,
            "gridPos": {"h": 1, "w": 24, "x": 0, "y": self.y},
            "id": self._id(),
            "panels": [],
            "title": title,
            "type": "row",
        })
        self.y += 1

    def _newline(self):
        if self.x:
            self.y += self.row_h
            self.x = 0
            self.row_h = 0

    def add(self, panel, w, h):
        if self.x + w > 24:
            self._newline()
        panel = dict(panel)
        panel["gridPos"] = {"h": h, "w": w, "x": self.x, "y": self.y}
        panel["id"] = self._id()
        targets = []
        for n, t in enumerate(panel.pop("targets")):
            t = dict(t)
            targets.append({
                "datasource": DS,
                "editorMode": "code",
                "expr": t["expr"],
                "legendFormat": t.get("legendFormat", ""),
                "range": True,
                "refId": chr(ord("A") + n),
            })
        panel["targets"] = targets
        self.panels.append(panel)
        self.x += w
        self.row_h = max(self.row_h, h)


def timeseries(title, description, targets, unit, stack=False, min0=True, decimals=None):
    defaults = {
        "color": {"mode": "palette-classic"},
        "custom": {
            "axisPlacement": "auto",
            "drawStyle": "line",
            "fillOpacity": 20 if stack else 5,
            "gradientMode": "none",
            "lineWidth": 1,
            "showPoints": "never",
            "spanNulls": False,
            "stacking": {"group": "A", "mode": "normal" if stack else "none"},
        },
        "unit": unit,
    }
    if min0:
        defaults["min"] = 0
    if decimals is not None:
        defaults["decimals"] = decimals
    return {
        "datasource": DS,
        "description": description,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "legend": {"calcs": ["mean", "max", "lastNotNull"], "displayMode": "table",
                       "placement": "bottom", "showLegend": True},
            "tooltip": {"mode": "multi", "sort": "desc"},
        },
        "targets": targets,
        "title": title,
        "type": "timeseries",
    }


def stat(title, description, expr, unit, thresholds=None, legend="", decimals=None):
    steps = [{"color": "green", "value": None}]
    for value, color in thresholds or []:
        steps.append({"color": color, "value": value})
    defaults = {
        "color": {"mode": "thresholds"},
        "thresholds": {"mode": "absolute", "steps": steps},
        "unit": unit,
    }
    if decimals is not None:
        defaults["decimals"] = decimals
    return {
        "datasource": DS,
        "description": description,
        "fieldConfig": {"defaults": defaults, "overrides": []},
        "options": {
            "colorMode": "value",
            "graphMode": "area",
            "justifyMode": "auto",
            "orientation": "auto",
            "reduceOptions": {"calcs": ["lastNotNull"], "fields": "", "values": False},
            "textMode": "auto",
        },
        "targets": [target(expr, legend)],
        "title": title,
        "type": "stat",
    }


def state_timeline(title, description, targets):
    return {
        "datasource": DS,
        "description": description,
        "fieldConfig": {
            "defaults": {
                "color": {"mode": "thresholds"},
                "mappings": [{"options": {"0": {"color": "red", "index": 0, "text": "down"},
                                          "1": {"color": "green", "index": 1, "text": "up"}},
                              "type": "value"}],
                "thresholds": {"mode": "absolute",
                               "steps": [{"color": "red", "value": None},
                                         {"color": "green", "value": 1}]},
            },
            "overrides": [],
        },
        "options": {
            "alignValue": "left",
            "legend": {"displayMode": "list", "placement": "bottom", "showLegend": False},
            "mergeValues": True,
            "rowHeight": 0.9,
            "showValue": "never",
            "tooltip": {"mode": "single", "sort": "none"},
        },
        "targets": targets,
        "title": title,
        "type": "state-timeline",
    }


def build_panels():
    g = Layout()

    # ---------------------------------------------------------------- overview
    g.row("Overview")
    g.add(stat("Instances up",
               "h2gate admin endpoints Prometheus scraped successfully (job h2gate).",
               'sum(up{job="h2gate", %s})' % I, "none"), 4, 4)
    g.add(stat("Instances ready",
               "Instances whose /ready answers 200 (h2gate_ready). Fewer than 'up': "
               "draining, or a cluster without a usable upstream proxy.",
               "sum(%s)" % sel("h2gate_ready", I), "none"), 4, 4)
    g.add(stat("Active tunnels", "Open CONNECT tunnels (h2gate_requests_active{kind=\"connect\"}).",
               "sum(%s)" % sel("h2gate_requests_active", IL, 'kind="connect"'), "none"), 4, 4)
    g.add(stat("Throughput", "Payload bytes relayed per second, both directions.",
               "sum(%s)" % rate("h2gate_relayed_bytes_total", ILC), "Bps"), 4, 4)
    g.add(stat("Failed requests",
               "Share of finished requests/tunnels with a result other than ok, rejected, "
               "downstream_reset or drained (what the H2gateRequestErrors alert uses).",
               "sum(%s) / sum(%s)" % (
                   rate("h2gate_requests_finished_total", ILC,
                        'result!~"ok|rejected|downstream_reset|drained"'),
                   rate("h2gate_requests_finished_total", ILC, 'result!="rejected"')),
               "percentunit", thresholds=[(0.05, "orange"), (0.1, "red")], decimals=1), 4, 4)
    g.add(stat("Uptime (youngest instance)", "Time since the most recent h2gate start.",
               "min(time() - %s)" % sel("h2gate_start_time_seconds", I), "s"), 4, 4)

    # ----------------------------------------------------------------- traffic
    g.row("Traffic")
    g.add(timeseries(
        "Throughput by cluster and direction",
        "Payload bytes relayed per second (h2gate_relayed_bytes_total). direction "
        "upstream = app to proxy/destination (uploads), downstream = to the app (downloads).",
        [target("sum by (cluster, direction) (%s)" % rate("h2gate_relayed_bytes_total", ILC),
                "{{cluster}} {{direction}}")],
        "Bps"), 12, 8)
    g.add(timeseries(
        "Active tunnels and requests",
        "Open requests by kind (connect = CONNECT tunnels, forward = absolute-form "
        "requests) and open app connections.",
        [target("sum by (listener, kind) (%s)" % sel("h2gate_requests_active", IL),
                "{{listener}} {{kind}}"),
         target("sum by (listener) (%s)" % sel("h2gate_downstream_connections_active", IL),
                "{{listener}} app connections")],
        "none"), 12, 8)
    g.add(timeseries(
        "Requests started / app connections accepted",
        "Requests and tunnels whose head was parsed, and app connections accepted, per second.",
        [target("sum by (listener, kind) (%s)" % rate("h2gate_requests_started_total", IL),
                "{{listener}} {{kind}} started"),
         target("sum by (listener) (%s)" % rate("h2gate_downstream_connections_total", IL),
                "{{listener}} connections accepted")],
        "reqps"), 8, 8)
    g.add(timeseries(
        "Requests finished by result",
        "Requests/tunnels ended per second, by result (ok, rejected, connect_failed, "
        "upstream_reset, ...). cluster \"none\": ended before a route was chosen.",
        [target("sum by (result) (%s)" % rate("h2gate_requests_finished_total", ILC),
                "{{result}}")],
        "reqps", stack=True), 8, 8)
    g.add(timeseries(
        "Error replies by status",
        "HTTP error replies h2gate itself generated to apps, per second "
        "(h2gate_downstream_errors_total), by status.",
        [target("sum by (status) (%s)" % rate("h2gate_downstream_errors_total", IL),
                "{{status}}")],
        "reqps", stack=True), 8, 8)

    # ----------------------------------------------------------------- latency
    g.row("Latency")
    g.add(timeseries(
        "Tunnel setup time",
        "CONNECT received to 200 sent to the app "
        "(h2gate_tunnel_setup_duration_seconds), percentiles per cluster.",
        quantiles("h2gate_tunnel_setup_duration_seconds", ILC, ["cluster"], "{{cluster}}"),
        "s"), 12, 8)
    g.add(timeseries(
        "Time to first byte",
        "Request head received to first response byte to the app "
        "(h2gate_time_to_first_byte_seconds), percentiles per kind.",
        quantiles("h2gate_time_to_first_byte_seconds", ILC, ["kind"], "{{kind}}"),
        "s"), 12, 8)
    g.add(timeseries(
        "Upstream connect time (DNS + TCP)",
        "h2gate_upstream_connect_duration_seconds percentiles per cluster.",
        quantiles("h2gate_upstream_connect_duration_seconds", IC, ["cluster"], "{{cluster}}"),
        "s"), 8, 8)
    g.add(timeseries(
        "Upstream TLS handshake time",
        "h2gate_upstream_tls_handshake_duration_seconds percentiles per cluster.",
        quantiles("h2gate_upstream_tls_handshake_duration_seconds", IC, ["cluster"],
                  "{{cluster}}"),
        "s"), 8, 8)
    g.add(timeseries(
        "HTTP/2 PING RTT",
        "Round trips of HTTP/2 PINGs to the upstream proxies (h2gate_upstream_ping_rtt_seconds) "
        "per endpoint, and the highest last RTT of any live connection.",
        quantiles("h2gate_upstream_ping_rtt_seconds", IC, ["endpoint"], "{{endpoint}}")
        + [target("max by (endpoint) (%s)" % sel("h2gate_upstream_connection_ping_rtt_seconds", IC),
                  "last, worst connection {{endpoint}}")],
        "s"), 8, 8)

    # ---------------------------------------------------------------- upstream
    g.row("Upstream proxies")
    g.add(state_timeline(
        "Endpoint up",
        "h2gate_upstream_endpoint_up: up when the last connection attempt worked. The "
        "lowest value across the selected instances: down if any instance sees it down "
        "(or has not tried it yet).",
        [target("min by (cluster, endpoint) (%s)" % sel("h2gate_upstream_endpoint_up", IC),
                "{{cluster}} {{endpoint}}")]), 12, 8)
    g.add(timeseries(
        "Upstream connections by protocol",
        "Open connections to upstream proxies by negotiated protocol (h2, http1).",
        [target("sum by (cluster, protocol) (%s)" % sel("h2gate_upstream_connections_active", IC),
                "{{cluster}} {{protocol}}")],
        "none"), 12, 8)
    g.add(timeseries(
        "Upstream connections opened / failed",
        "Connections opened per second by protocol, and failed attempts by result "
        "(dns_failed, connect_failed, connect_timeout, tls_failed).",
        [target("sum by (cluster, protocol) (%s)" % rate("h2gate_upstream_connections_opened_total", IC),
                "{{cluster}} opened {{protocol}}"),
         target("sum by (cluster, result) (%s)" % rate("h2gate_upstream_connect_failures_total", IC),
                "{{cluster}} failed {{result}}")],
        "ops"), 8, 8)
    g.add(timeseries(
        "Upstream streams active",
        "Open HTTP/2 streams per upstream endpoint (h2gate_upstream_streams_active).",
        [target("sum by (cluster, endpoint) (%s)" % sel("h2gate_upstream_streams_active", IC),
                "{{cluster}} {{endpoint}}")],
        "none"), 8, 8)
    g.add(timeseries(
        "GOAWAY received",
        "GOAWAY frames from upstream proxies per second (restarts, stream-reset limits).",
        [target("sum by (cluster, endpoint) (%s)" % rate("h2gate_upstream_goaways_total", IC),
                "{{cluster}} {{endpoint}}")],
        "ops"), 8, 8)
    g.add(timeseries(
        "Stalled streams (now)",
        "HTTP/2 streams currently blocked by flow control (h2gate_upstream_streams_stalled). "
        "upstream: waiting for the proxy's window; downstream: the app reads slowly.",
        [target("sum by (cluster, direction) (%s)" % sel("h2gate_upstream_streams_stalled", IC),
                "{{cluster}} {{direction}}")],
        "none"), 12, 8)
    g.add(timeseries(
        "Stalled stream-seconds per second",
        "rate(h2gate_upstream_stream_stalled_seconds_total): the average number of streams "
        "blocked by flow control over the interval.",
        [target("sum by (cluster, direction) (%s)" % rate("h2gate_upstream_stream_stalled_seconds_total", IC),
                "{{cluster}} {{direction}}")],
        "none", decimals=2), 12, 8)
    g.add(timeseries(
        "Pool: requests waiting for a connection",
        "Requests queued because every allowed upstream connection is busy "
        "(h2gate_upstream_pool_waiting).",
        [target("sum by (cluster) (%s)" % sel("h2gate_upstream_pool_waiting", IC), "{{cluster}}")],
        "none"), 8, 8)
    g.add(timeseries(
        "Pool: requests refused (503)",
        "Requests answered 503 per second because their wait for a connection timed out, "
        "or, refused at once, the wait queue was full or the cluster's max_requests were "
        "in progress.",
        [target("sum by (cluster) (%s)" % rate("h2gate_upstream_pool_queue_timeouts_total", IC),
                "{{cluster}} queue timeout"),
         target("sum by (cluster) (%s)" % rate("h2gate_upstream_pool_overflows_total", IC),
                "{{cluster}} queue full / max_requests")],
        "reqps"), 8, 8)
    g.add(timeseries(
        "Upstream socket send buffer",
        "SO_SNDBUF of live upstream connections (h2gate_upstream_connection_send_buffer_bytes), "
        "average and smallest per endpoint.",
        [target("avg by (endpoint) (%s)" % sel("h2gate_upstream_connection_send_buffer_bytes", IC),
                "avg {{endpoint}}"),
         target("min by (endpoint) (%s)" % sel("h2gate_upstream_connection_send_buffer_bytes", IC),
                "min {{endpoint}}")],
        "bytes"), 8, 8)
    g.add(timeseries(
        "Route fallbacks",
        "Requests per second that left a cluster none of whose proxies could be reached for "
        "the route's next cluster (fallback=direct: DIRECT), from forward_proxy's "
        "fallback_clusters / direct_fallback (h2gate_route_fallbacks_total).",
        [target("sum by (cluster, fallback) (%s)" % rate("h2gate_route_fallbacks_total", IC),
                "{{cluster}} -> {{fallback}}")],
        "reqps"), 24, 8)
    g.add(timeseries(
        "Proxy authentication",
        "Authentications to upstream proxies per second by scheme (basic, negotiate, ntlm) "
        "and result (h2gate_upstream_auth_total): success; rejected, the proxy answered 407 to "
        "the credentials; failed, h2gate could not make them (no Kerberos ticket, an expired "
        "one, an unknown service principal: h2gate's log says which); mutual_failed, the "
        "proxy's Kerberos answer did not verify.",
        [target("sum by (cluster, scheme, result) (%s)" % rate("h2gate_upstream_auth_total", IC),
                "{{cluster}} {{scheme}} {{result}}")],
        "ops"), 24, 8)

    # ----------------------------------------------------------------- process
    g.row("Process")
    g.add(timeseries(
        "CPU (cores)",
        "CPU time used per second (process_cpu_seconds_total; 1 = one core busy).",
        [target("sum by (instance) (%s)" % rate("process_cpu_seconds_total", I), "{{instance}}")],
        "none", decimals=2), 6, 8)
    g.add(timeseries(
        "Resident memory",
        "process_resident_memory_bytes.",
        [target("sum by (instance) (%s)" % sel("process_resident_memory_bytes", I), "{{instance}}")],
        "bytes"), 6, 8)
    g.add(timeseries(
        "Open file descriptors",
        "process_open_fds: app connections, upstream connections, listeners.",
        [target("sum by (instance) (%s)" % sel("process_open_fds", I), "{{instance}}")],
        "none"), 6, 8)
    g.add(timeseries(
        "Config reloads and versions",
        "Config reloads by result, and how many instances run each version.",
        [target("sum by (result) (increase(%s[%s]))" % (sel("h2gate_config_reloads_total", I), RATE),
                "reload {{result}}"),
         target("count by (version) (%s)" % sel("h2gate_build_info", I), "version {{version}}")],
        "none"), 6, 8)
    return g.panels


def query_variable(name, label, query):
    return {
        "allValue": ".*",
        "current": {"selected": True, "text": ["All"], "value": ["$__all"]},
        "datasource": DS,
        "definition": query,
        "hide": 0,
        "includeAll": True,
        "label": label,
        "multi": True,
        "name": name,
        "options": [],
        "query": query,
        "refresh": 2,
        "regex": "",
        "skipUrlSync": False,
        "sort": 1,
        "type": "query",
    }


def dashboard():
    return {
        "annotations": {"list": [{
            "builtIn": 1,
            "datasource": {"type": "grafana", "uid": "-- Grafana --"},
            "enable": True,
            "hide": True,
            "iconColor": "rgba(0, 211, 255, 1)",
            "name": "Annotations & Alerts",
            "type": "dashboard",
        }]},
        "description": "h2gate forward-proxy sidecar: traffic, latency, upstream proxies, process. "
                       "Generated by deploy/grafana/generate_dashboard.py.",
        "editable": True,
        "fiscalYearStartMonth": 0,
        "graphTooltip": 1,
        "id": None,
        "links": [],
        "liveNow": False,
        "panels": build_panels(),
        "refresh": "30s",
        "schemaVersion": 38,
        "tags": ["h2gate", "proxy"],
        "templating": {"list": [
            {
                "current": {},
                "hide": 0,
                "includeAll": False,
                "label": "Data source",
                "multi": False,
                "name": "DS_PROMETHEUS",
                "options": [],
                "query": "prometheus",
                "refresh": 1,
                "regex": "",
                "skipUrlSync": False,
                "type": "datasource",
            },
            query_variable("instance", "Instance", "label_values(h2gate_build_info, instance)"),
            query_variable("cluster", "Cluster",
                           "label_values(h2gate_requests_finished_total{instance=~\"$instance\"}, cluster)"),
            query_variable("listener", "Listener",
                           "label_values(h2gate_requests_started_total{instance=~\"$instance\"}, listener)"),
        ]},
        "time": {"from": "now-6h", "to": "now"},
        "timepicker": {},
        "timezone": "",
        "title": "h2gate",
        "uid": "h2gate",
        "version": 1,
        "weekStart": "",
    }


def render():
    return json.dumps(dashboard(), indent=2, ensure_ascii=False) + "\n"


def main(argv):
    text = render()
    if argv[1:] == ["--check"]:
        try:
            with open(OUT, encoding="utf-8") as f:
                current = f.read()
        except FileNotFoundError:
            current = None
        if current != text:
            sys.stderr.write("%s is out of date: run python3 %s and commit the result\n"
                             % (os.path.relpath(OUT), os.path.relpath(os.path.abspath(__file__))))
            return 1
        return 0
    if argv[1:]:
        sys.stderr.write("usage: %s [--check]\n" % argv[0])
        return 2
    with open(OUT, "w", encoding="utf-8") as f:
        f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
