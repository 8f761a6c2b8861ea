#!/usr/bin/env python3
"""Checks the monitoring files of deploy/ (Python 3 standard library only).

  python3 tests/launch/grafana_check.py [SOURCE_DIR]

deploy/grafana/kvferry.json: a Grafana dashboard with panels, each with a
unique id and a gridPos; every panel but a row has a data source and at least
one target with a PromQL expr; every kvferry_* metric named in an expr or a
template variable's query is one kvferry exports (KNOWN_METRICS below); the
dashboard has a Prometheus datasource variable that panels can name.

deploy/prometheus/*.yml: prometheus.yml and kubernetes-scrape.yml exist, and
each .yml holds scrape_configs: and a /metrics path (no YAML parser in the
standard library: text checks only).

Exits 0 when all holds; otherwise prints every problem (naming the file, the
panel and the bad value) and exits 1. SOURCE_DIR defaults to the checkout this
script is in.
"""

import json
import os
import re
import sys

# The metrics kvferry-launch serves on /metrics. This list MUST match
# docs/METRICS.md: a metric renamed or added there is renamed or added here.
COUNTERS = {
    "kvferry_rooms_total",
    "kvferry_room_failures_total",
    "kvferry_fast_fail_total",
    "kvferry_transfer_bytes_total",
    "kvferry_transfer_batches_total",
    "kvferry_transfer_failed_batches_total",
    "kvferry_heartbeat_misses_total",
    "kvferry_staging_waits_total",
    "kvferry_transfer_staged_waits_total",
}
GAUGES = {
    "kvferry_rooms_in_flight",
    "kvferry_transfer_bandwidth_bytes_per_second",
    "kvferry_peer_up",
    "kvferry_peer_generation",
    "kvferry_staging_ring_bytes",
    "kvferry_staging_ring_used_bytes",
    "kvferry_process_resident_bytes",
    "kvferry_process_open_fds",
    "kvferry_process_open_connections",
    "kvferry_node_ranks",
}
HISTOGRAMS = {
    "kvferry_room_seconds",
    "kvferry_verdict_seconds",
}
KNOWN_METRICS = COUNTERS | GAUGES | HISTOGRAMS
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")

METRIC = re.compile(r"\bkvferry_[A-Za-z0-9_]+")
# A Prometheus range selector without rate()/increase() on a counter is
# allowed (e.g. in a table), so only the grossest mistake is checked: rate()
# of a gauge.
RATE_OF = re.compile(r"\b(?:rate|irate|increase)\s*\(\s*(kvferry_[A-Za-z0-9_]+)")


def metric_base(name):
    """The exported metric a series name belongs to (a histogram's series
    carry _bucket, _sum and _count); None when it belongs to none."""
    if name in KNOWN_METRICS:
        return name
    for suffix in HISTOGRAM_SUFFIXES:
        if name.endswith(suffix) and name[: -len(suffix)] in HISTOGRAMS:
            return name[: -len(suffix)]
    return None


def all_panels(panels):
    """Every panel, those nested in collapsed rows included."""
    for p in panels:
        yield p
        yield from all_panels(p.get("panels") or [])


def describe(p):
    return 'panel {} "{}"'.format(p.get("id"), p.get("title", "(untitled)"))


def check_dashboard(path, problems, used):
    def bad(msg):
        problems.append("{}: {}".format(path, msg))

    try:
        with open(path, encoding="utf-8") as f:
            dash = json.load(f)
    except OSError as e:
        bad("cannot read: {}".format(e))
        return
    except json.JSONDecodeError as e:
        bad("not valid JSON: {}".format(e))
        return
    if not isinstance(dash, dict):
        bad("not a dashboard: the top level is a {}, expected an object".format(
            type(dash).__name__))
        return
    dash = dash.get("dashboard", dash)  # an API export wraps it
    for key in ("title", "uid", "schemaVersion"):
        if key not in dash:
            bad('not a dashboard: no "{}"'.format(key))
    if isinstance(dash.get("schemaVersion"), int) and dash["schemaVersion"] < 37:
        bad("schemaVersion {}: expected 37 or later".format(dash["schemaVersion"]))
    panels = dash.get("panels")
    if not isinstance(panels, list) or not panels:
        bad('not a dashboard with panels: "panels" is {!r}'.format(panels))
        return

    # Template variables: a Prometheus datasource variable, and the metrics
    # the query variables read.
    variables = (dash.get("templating") or {}).get("list") or []
    ds_vars = {v.get("name") for v in variables
               if v.get("type") == "datasource" and v.get("query") == "prometheus"}
    if not ds_vars:
        bad("no Prometheus datasource template variable "
            '(templating.list: type "datasource", query "prometheus")')
    for v in variables:
        if v.get("type") != "query":
            continue
        q = v.get("query")
        q = q.get("query") if isinstance(q, dict) else q
        where = 'template variable "{}"'.format(v.get("name"))
        if not q:
            bad("{}: no query".format(where))
            continue
        for name in METRIC.findall(q):
            if metric_base(name) is None:
                bad("{}: {} in {!r} is not a kvferry metric (see docs/METRICS.md)".format(
                    where, name, q))
            else:
                used.add(metric_base(name))

    def check_ds(ds, where):
        """A datasource names a Prometheus one: ${var} of a datasource
        variable, or a fixed uid."""
        if isinstance(ds, str):
            uid = ds
        elif isinstance(ds, dict):
            if ds.get("type") not in (None, "prometheus"):
                bad("{}: datasource type {!r}, expected prometheus".format(
                    where, ds.get("type")))
            uid = ds.get("uid")
        else:
            bad("{}: no datasource".format(where))
            return
        if not uid:
            bad("{}: datasource {!r} has no uid".format(where, ds))
            return
        m = re.fullmatch(r"\$\{?(\w+)\}?", uid)
        if m and m.group(1) not in ds_vars:
            bad("{}: datasource {!r} names no datasource template variable".format(where, uid))

    ids = {}
    for p in all_panels(panels):
        where = describe(p)
        pid = p.get("id")
        if not isinstance(pid, int):
            bad("{}: id {!r} is not an integer".format(where, pid))
        elif pid in ids:
            bad("{}: id {} already belongs to {}".format(where, pid, ids[pid]))
        else:
            ids[pid] = where
        g = p.get("gridPos")
        if not isinstance(g, dict) or not all(isinstance(g.get(k), int) for k in "hwxy"):
            bad("{}: gridPos {!r}: expected integers h, w, x, y".format(where, g))
        elif g["x"] < 0 or g["w"] <= 0 or g["h"] <= 0 or g["x"] + g["w"] > 24:
            bad("{}: gridPos {!r} is outside the 24 columns".format(where, g))
        if p.get("type") == "row":
            continue  # a row holds panels, not queries
        if not p.get("type"):
            bad("{}: no type".format(where))
        check_ds(p.get("datasource"), where)
        targets = p.get("targets")
        if not isinstance(targets, list) or not targets:
            bad("{}: no targets".format(where))
            continue
        exprs = 0
        refs = set()
        for i, t in enumerate(targets):
            twhere = "{}, target {}".format(where, t.get("refId", i))
            if t.get("refId") in refs:
                bad("{}: refId repeated".format(twhere))
            refs.add(t.get("refId"))
            if "datasource" in t:
                check_ds(t["datasource"], twhere)
            expr = t.get("expr")
            if not isinstance(expr, str) or not expr.strip():
                continue
            exprs += 1
            if expr.count("(") != expr.count(")") or expr.count("{") != expr.count("}"):
                bad("{}: unbalanced brackets in {!r}".format(twhere, expr))
            names = METRIC.findall(expr)
            if not names:
                bad("{}: expr {!r} reads no kvferry_ metric".format(twhere, expr))
            for name in names:
                base = metric_base(name)
                if base is None:
                    bad("{}: {} in {!r} is not a kvferry metric (see docs/METRICS.md)".format(
                        twhere, name, expr))
                    continue
                used.add(base)
                if base in HISTOGRAMS and name == base:
                    bad("{}: {} is a histogram: read its _bucket, _sum or _count".format(
                        twhere, name))
            for name in RATE_OF.findall(expr):
                if name in GAUGES:
                    bad("{}: rate of the gauge {} in {!r}".format(twhere, name, expr))
            if "histogram_quantile" in expr and not re.search(r"\ble\b", expr):
                bad("{}: histogram_quantile without le in {!r}".format(twhere, expr))
        if exprs == 0:
            bad("{}: no target has an expr".format(where))


def check_prometheus(directory, problems):
    for required in ("prometheus.yml", "kubernetes-scrape.yml"):
        if not os.path.isfile(os.path.join(directory, required)):
            problems.append("{}: missing".format(os.path.join(directory, required)))
    try:
        names = sorted(os.listdir(directory))
    except OSError as e:
        problems.append("{}: cannot list: {}".format(directory, e))
        return
    for name in names:
        if not name.endswith(".yml"):
            continue
        path = os.path.join(directory, name)
        with open(path, encoding="utf-8") as f:
            text = f.read()
        if "\t" in text:
            problems.append("{}: holds a tab (YAML indents with spaces)".format(path))
        if not re.search(r"^scrape_configs:", text, re.M):
            problems.append("{}: no top-level scrape_configs:".format(path))
        if "/metrics" not in text and "metrics_path" not in text:
            problems.append("{}: scrapes no /metrics (no /metrics, no metrics_path)".format(path))
        for m in METRIC.finditer(text):
            if metric_base(m.group(0)) is None:
                problems.append("{}: {} is not a kvferry metric (see docs/METRICS.md)".format(
                    path, m.group(0)))


def main(argv):
    root = argv[1] if len(argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                      "..", "..")
    root = os.path.normpath(root)
    problems = []
    used = set()
    dashboard = os.path.join(root, "deploy", "grafana", "kvferry.json")
    check_dashboard(dashboard, problems, used)
    check_prometheus(os.path.join(root, "deploy", "prometheus"), problems)
    if problems:
        for p in problems:
            print("grafana_check: " + p, file=sys.stderr)
        print("grafana_check: FAILED ({} problems)".format(len(problems)), file=sys.stderr)
        return 1
    unused = sorted(KNOWN_METRICS - used)
    if unused:
        print("grafana_check: note: no panel shows " + ", ".join(unused))
    print("grafana_check: OK ({}: {} metrics of {} shown; deploy/prometheus)".format(
        os.path.relpath(dashboard, root), len(used), len(KNOWN_METRICS)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
