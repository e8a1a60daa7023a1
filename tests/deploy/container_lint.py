#!/usr/bin/env python3
"""Structural and cross-reference checks of deploy/kubernetes/ (used by check_container.sh).

kubernetes-validate checks the built-in kinds against the API schemas; this checks
what it cannot: the PodMonitor (a CRD) and the Kustomization, and that the files agree
with each other and with the sidecar design (native sidecar, probes on the admin port,
grace period longer than drain_timeout, loopback proxy listener, env from the
downward API and the Secret, security settings).

  container_lint.py DIR                      checks the manifests in DIR
  container_lint.py --rendered FILE DIR      also: FILE (kubectl kustomize DIR) has every
                                             resource, and the sidecar's image is the one
                                             kustomization.yaml sets
Exit 0 and one line per check group, or 1 with every problem found.
"""
import argparse
import os
import re
import sys

import yaml

problems = []


def check(cond, msg):
    if not cond:
        problems.append(msg)
    return cond


def load(path):
    with open(path) as f:
        return yaml.safe_load(f)


def duration_seconds(text):
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|m|h)", str(text))
    if not m:
        return None
    return float(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def port_of(address_block):
    return address_block["socket_address"]["port_value"]


def lint(directory):
    kust_path = os.path.join(directory, "kustomization.yaml")
    kust = load(kust_path)
    check(kust.get("apiVersion") == "kustomize.config.k8s.io/v1beta1", "kustomization: apiVersion")
    check(kust.get("kind") == "Kustomization", "kustomization: kind")
    check(set(kust) <= {"apiVersion", "kind", "resources", "images", "namespace", "labels",
                        "commonLabels", "patches", "configMapGenerator", "secretGenerator"},
          f"kustomization: unexpected keys {sorted(set(kust))}")
    resources = {}
    for name in kust.get("resources", []):
        path = os.path.join(directory, name)
        if not check(os.path.isfile(path), f"kustomization lists {name}, which does not exist"):
            continue
        docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
        for d in docs:
            check(all(k in d for k in ("apiVersion", "kind", "metadata")) and "name" in d["metadata"],
                  f"{name}: a document without apiVersion/kind/metadata.name")
            resources[d["kind"]] = d
    listed = set(kust.get("resources", []))
    for f in sorted(os.listdir(directory)):
        if f.endswith(".yaml") and f != "kustomization.yaml":
            check(f in listed, f"{f} is not listed in kustomization.yaml resources")
    for kind in ("ConfigMap", "Secret", "Deployment", "PodMonitor"):
        check(kind in resources, f"no {kind} among the kustomization's resources")
    if problems:
        return kust, resources
    print(f"kustomization.yaml: {len(listed)} resources exist and parse: {', '.join(sorted(resources))}")

    cm, secret, dep, pm = (resources[k] for k in ("ConfigMap", "Secret", "Deployment", "PodMonitor"))
    cfg = yaml.safe_load(cm["data"]["h2gate.yaml"])
    admin_port = port_of(cfg["admin"]["address"])
    check(cfg["admin"]["address"]["socket_address"]["address"] == "${POD_IP}",
          "configmap: admin address is not ${POD_IP}")
    listeners = cfg["static_resources"]["listeners"]
    for ln in listeners:
        addrs = [ln["address"]] + [a["address"] for a in ln.get("additional_addresses", [])]
        for a in addrs:
            check(a["socket_address"]["address"] in ("127.0.0.1", "::1"),
                  f"configmap: listener {ln['name']} binds {a['socket_address']['address']}, not loopback")
    proxy_port = port_of(listeners[0]["address"])
    drain = duration_seconds(cfg.get("h2gate", {}).get("drain_timeout", "30s"))

    spec = dep["spec"]["template"]["spec"]
    labels = dep["spec"]["template"]["metadata"]["labels"]
    sidecars = [c for c in spec.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    if not check(len(sidecars) == 1, "deployment: expected one native sidecar (initContainers, restartPolicy: Always)"):
        return kust, resources
    sc = sidecars[0]
    named = {p["name"]: p["containerPort"] for c in spec["initContainers"] + spec["containers"]
             for p in c.get("ports", []) if "name" in p}
    admin_name = next((n for n, p in named.items() if p == admin_port), None)
    check(admin_name is not None, f"deployment: no named containerPort {admin_port} (the admin port)")
    for probe, path in (("startupProbe", "/ready"), ("readinessProbe", "/ready"), ("livenessProbe", "/healthz")):
        p = sc.get(probe, {}).get("httpGet", {})
        check(p.get("path") == path, f"sidecar {probe}: path {p.get('path')!r}, expected {path}")
        check(p.get("port") in (admin_name, admin_port), f"sidecar {probe}: port {p.get('port')!r} is not the admin port")
    grace = spec.get("terminationGracePeriodSeconds", 30)
    check(drain is not None and grace > drain,
          f"terminationGracePeriodSeconds {grace} is not longer than drain_timeout {drain}s")
    env = {e["name"]: e for e in sc.get("env", [])}
    check(env.get("POD_IP", {}).get("valueFrom", {}).get("fieldRef", {}).get("fieldPath") == "status.podIP",
          "sidecar: POD_IP is not from the downward API status.podIP")
    secret_keys = set(secret.get("stringData", {})) | set(secret.get("data", {}))
    for var in ("PROXY_USERNAME", "PROXY_PASSWORD"):
        ref = env.get(var, {}).get("valueFrom", {}).get("secretKeyRef", {})
        check(ref.get("name") == secret["metadata"]["name"] and ref.get("key") in secret_keys,
              f"sidecar: {var} is not a secretKeyRef to a key of Secret {secret['metadata']['name']}")
        check("${" + var + "}" in cm["data"]["h2gate.yaml"], f"configmap: does not use ${{{var}}}")
    sec = sc.get("securityContext", {})
    for key, want in (("runAsNonRoot", True), ("runAsUser", 65532), ("readOnlyRootFilesystem", True),
                      ("allowPrivilegeEscalation", False)):
        check(sec.get(key) == want, f"sidecar securityContext.{key} is {sec.get(key)!r}, expected {want!r}")
    check(sec.get("capabilities", {}).get("drop") == ["ALL"], "sidecar: capabilities.drop is not [ALL]")
    seccomp = sec.get("seccompProfile") or spec.get("securityContext", {}).get("seccompProfile") or {}
    check(seccomp.get("type") == "RuntimeDefault", "seccompProfile is not RuntimeDefault")
    res = sc.get("resources", {})
    check(res.get("requests") and res.get("limits"), "sidecar: resources requests and limits")
    vols = {v["name"]: v for v in spec.get("volumes", [])}
    mounts = {m["name"]: m for m in sc.get("volumeMounts", [])}
    cm_vol = next((n for n, v in vols.items() if v.get("configMap", {}).get("name") == cm["metadata"]["name"]), None)
    check(cm_vol in mounts and mounts[cm_vol]["mountPath"] == "/etc/h2gate",
          "sidecar: the ConfigMap is not mounted at /etc/h2gate (over the baked h2gate.yaml)")
    print(f"deployment: native sidecar '{sc['name']}', probes on admin port {admin_name}={admin_port}, "
          f"grace {grace}s > drain {drain:g}s, env from downward API and Secret, securityContext ok")

    want_url = f"http://127.0.0.1:{proxy_port}"
    for c in spec["containers"]:
        cenv = {e["name"]: e.get("value") for e in c.get("env", [])}
        for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            check(cenv.get(var) == want_url, f"container {c['name']}: {var}={cenv.get(var)!r}, expected {want_url}")
        for var in ("NO_PROXY", "no_proxy"):
            entries = (cenv.get(var) or "").split(",")
            for must in ("localhost", "127.0.0.1", "::1", ".svc", ".cluster.local"):
                check(must in entries, f"container {c['name']}: {var} lacks {must}")
            check(any(re.fullmatch(r"\d+\.\d+\.\d+\.\d+/\d+", e) for e in entries),
                  f"container {c['name']}: {var} has no service CIDR")
    print(f"app containers: HTTP(S)_PROXY in both cases = {want_url}; NO_PROXY in both cases")

    ann = dep["spec"]["template"]["metadata"].get("annotations", {})
    check(ann.get("prometheus.io/scrape") == "true", "pod annotation prometheus.io/scrape is not \"true\"")
    check(ann.get("prometheus.io/port") == str(admin_port), "pod annotation prometheus.io/port is not the admin port")
    check(ann.get("prometheus.io/path") == "/metrics", "pod annotation prometheus.io/path is not /metrics")

    # PodMonitor: not in kubernetes-validate's schemas; checked against the CRD's shape.
    check(pm["apiVersion"] == "monitoring.coreos.com/v1", "podmonitor: apiVersion")
    check(set(pm) <= {"apiVersion", "kind", "metadata", "spec"}, f"podmonitor: unexpected keys {sorted(pm)}")
    pspec = pm.get("spec", {})
    check(set(pspec) <= {"selector", "podMetricsEndpoints", "namespaceSelector", "jobLabel", "podTargetLabels",
                         "sampleLimit", "targetLimit", "labelLimit", "attachMetadata"},
          f"podmonitor: unexpected spec keys {sorted(pspec)}")
    ml = pspec.get("selector", {}).get("matchLabels", {})
    check(ml and all(labels.get(k) == v for k, v in ml.items()),
          f"podmonitor: selector {ml} does not match the pod labels {labels}")
    eps = pspec.get("podMetricsEndpoints", [])
    check(len(eps) >= 1, "podmonitor: no podMetricsEndpoints")
    for ep in eps:
        check(set(ep) <= {"port", "path", "interval", "scrapeTimeout", "scheme", "honorLabels",
                          "relabelings", "metricRelabelings", "params"},
              f"podmonitor endpoint: unexpected keys {sorted(ep)}")
        check(ep.get("port") == admin_name, f"podmonitor endpoint port {ep.get('port')!r} is not {admin_name!r}")
        check(ep.get("path", "/metrics") == "/metrics", "podmonitor endpoint path is not /metrics")
        check(any(r.get("targetLabel") == "job" and r.get("replacement") == "h2gate"
                  for r in ep.get("relabelings", [])),
              "podmonitor endpoint: no relabeling to job=\"h2gate\" (the alerts match up{job=\"h2gate\"})")
        if "interval" in ep:
            check(duration_seconds(ep["interval"]) is not None, f"podmonitor interval {ep['interval']!r}")
    print(f"podmonitor: selects {ml}, scrapes port {admin_name} /metrics; scrape annotations agree")
    return kust, resources


def rendered(path, kust, resources):
    docs = [d for d in yaml.safe_load_all(open(path)) if d is not None]
    kinds = sorted(d["kind"] for d in docs)
    check(kinds == sorted(resources), f"rendered kinds {kinds}, expected {sorted(resources)}")
    img = kust["images"][0]
    want = f"{img['newName']}:{img['newTag']}"
    for d in docs:
        if d["kind"] == "Deployment":
            spec = d["spec"]["template"]["spec"]
            for c in spec.get("initContainers", []):
                if c.get("restartPolicy") == "Always":
                    check(c["image"] == want, f"rendered sidecar image {c['image']}, expected {want}")
    print(f"rendered: {', '.join(kinds)}; sidecar image {want}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rendered")
    ap.add_argument("dir")
    a = ap.parse_args()
    kust, resources = lint(a.dir)
    if a.rendered and not problems:
        rendered(a.rendered, kust, resources)
    if problems:
        for p in problems:
            print("container_lint: " + p, file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
