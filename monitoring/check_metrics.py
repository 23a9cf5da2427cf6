"""Checks that monitoring/'s files agree (run by monitoring/check): every metric the alerting
rules, their unit tests and the Grafana dashboard name is one monitoring/queries.yaml
defines (or one the exporter itself exports), and every label they match or print is one
that metric carries. The dashboard must parse as JSON. Exits non-zero, naming each
mismatch."""
import json
import re
import sys
from pathlib import Path

import yaml

here = Path(__file__).resolve().parent
# The exporter's own metrics (postgres_exporter 0.11), with no label of ours.
BUILTIN = {"pg_up", "pg_exporter_last_scrape_error", "pg_exporter_last_scrape_duration_seconds",
           "pg_exporter_scrapes_total"}
ALWAYS = {"server", "job", "instance"}   # the exporter's and Prometheus's own labels


def defined_metrics():
    """metric name -> its labels, from the queries file."""
    metrics = {m: set(ALWAYS) for m in BUILTIN}
    for ns, spec in yaml.safe_load((here / "queries.yaml").read_text()).items():
        columns = [(name, opt["usage"]) for m in spec["metrics"] for name, opt in m.items()]
        labels = {name for name, usage in columns if usage == "LABEL"}
        for name, usage in columns:
            if usage not in ("LABEL", "DISCARD"):
                metrics[f"{ns}_{name}"] = labels | ALWAYS
    return metrics


SELECTOR = re.compile(r"\b((?:snowflake_id|pg)_[a-z0-9_]+)\b(\s*\{([^}]*)\})?")
MATCHER = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")


def check_expr(where, expr, metrics, problems, printed=()):
    """Each metric of expr is defined; its matchers and the labels printed (legend,
    annotations) are among its labels."""
    names, seen = [], False
    for m in SELECTOR.finditer(expr):
        name, matchers = m.group(1), m.group(3) or ""
        seen = True
        if name not in metrics:
            problems.append(f"{where}: {name} is not a metric of queries.yaml")
            continue
        names.append(name)
        for label in MATCHER.findall(matchers):
            if label not in metrics[name]:
                problems.append(f"{where}: {name} has no label {label}")
    for label in printed:
        if names and not any(label in metrics[n] for n in names):
            problems.append(f"{where}: prints label {label}, which none of {', '.join(names)} has")
    if not seen:
        problems.append(f"{where}: names no metric of queries.yaml: {expr}")


def main():
    metrics = defined_metrics()
    problems = []
    rules = yaml.safe_load((here / "alerts.yml").read_text())
    for group in rules["groups"]:
        for rule in group["rules"]:
            printed = re.findall(r"\$labels\.(\w+)", json.dumps(rule.get("annotations", {})))
            check_expr(f"alerts.yml {rule['alert']}", rule["expr"], metrics, problems, printed)
    for test in yaml.safe_load((here / "alerts_test.yml").read_text())["tests"]:
        for s in test["input_series"]:
            check_expr("alerts_test.yml series", s["series"], metrics, problems)
    try:
        dashboard = json.loads((here / "grafana-dashboard.json").read_text())
    except ValueError as e:
        sys.exit(f"grafana-dashboard.json does not parse: {e}")
    exprs = 0
    for panel in dashboard["panels"]:
        for t in panel.get("targets", []):
            printed = re.findall(r"\{\{\s*(\w+)\s*\}\}", t.get("legendFormat", ""))
            check_expr(f"dashboard panel {panel['title']!r}", t["expr"], metrics, problems, printed)
            exprs += 1
    for v in dashboard["templating"]["list"]:
        if v["type"] == "query":
            check_expr(f"dashboard variable {v['name']}", v["query"], metrics, problems)
    if problems:
        print("\n".join(problems))
        sys.exit(1)
    used = sum(1 for m in metrics if m not in BUILTIN)
    print(f"monitoring: {used} metrics defined; the rules, their tests and {exprs} dashboard queries name only those")


main()
