"""What reliability/t_metrics.sh asks of a scrape of the exporter (monitoring/).

  metrics_check.py present QUERIES SCRAPE
      every metric QUERIES (the exporter's queries file) defines is in SCRAPE (the text of
      /metrics); names the missing ones.
  metrics_check.py alerts RULES SCRAPE WORKDIR [ALERT:LABEL=VALUE ...]
      feeds RULES (monitoring/alerts.yml) the series of SCRAPE, held for an hour, through
      `promtool test rules`: exactly the alerts named fire, each once, for the series of
      that label (and the scrape's server), and no other alert does. Annotations are left
      out (monitoring/alerts_test.yml tests them): what this checks is that each rule reads
      the metric the exporter fills.
  metrics_check.py cost QUERIES DSN [RUNS [JSON]]
      runs each query of QUERIES on DSN RUNS times (5), prints the median time of each (and
      writes them, in seconds, to the file JSON: bench/metrics.sh).
"""
import json
import math
import re
import subprocess
import sys
import time
from pathlib import Path

import yaml

LINE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scraped(path):
    """(name, labels, value) of each sample in a /metrics text."""
    for line in Path(path).read_text().splitlines():
        m = LINE.match(line)
        if m:
            yield m.group(1), dict(LABEL.findall(m.group(2) or "")), float(m.group(3))


def defined(queries):
    spec = yaml.safe_load(Path(queries).read_text())
    return {f"{ns}_{name}": s for ns, s in spec.items()
            for metric in s["metrics"] for name, opt in metric.items() if opt["usage"] != "LABEL"}


def present(queries, scrape):
    have = {name for name, _, _ in scraped(scrape)}
    missing = sorted(set(defined(queries)) - have)
    if missing:
        sys.exit("metrics of the queries file missing from the scrape: " + ", ".join(missing))
    print(f"all {len(defined(queries))} metrics of the queries file scraped")


def alerts(rules, scrape, work, expected):
    work = Path(work)
    groups = yaml.safe_load(Path(rules).read_text())
    for group in groups["groups"]:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (work / "rules.yml").write_text(yaml.safe_dump(groups))
    series, servers = [], set()
    for name, labels, value in scraped(scrape):
        if not (name.startswith("snowflake_id_") or name == "pg_exporter_last_scrape_error") or math.isnan(value):
            continue
        servers.update(v for k, v in labels.items() if k == "server")
        selector = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
        series.append({"series": f"{name}{{{selector}}}", "values": f"{value!r}x60"})
    (server,) = servers
    want = {}
    for e in expected:   # Alert:label=value, or Alert for a router-wide series
        alert, _, label = e.partition(":")
        labels = dict([label.split("=", 1)]) if label else {}
        want.setdefault(alert, []).append({**labels, "server": server})
    tests = []
    for group in groups["groups"]:
        for rule in group["rules"]:
            exp = [{"exp_labels": {**labels, **rule.get("labels", {})}} for labels in want.pop(rule["alert"], [])]
            tests.append({"eval_time": "60m", "alertname": rule["alert"], "exp_alerts": exp})
    if want:
        sys.exit(f"no such alert in {rules}: {', '.join(want)}")
    (work / "scraped_test.json").write_text(json.dumps({
        "rule_files": ["rules.yml"], "evaluation_interval": "1m",
        "tests": [{"interval": "1m", "input_series": series, "alert_rule_test": tests}]}, indent=1))
    run = subprocess.run(["promtool", "test", "rules", "scraped_test.json"], cwd=work,
                         capture_output=True, text=True)
    if run.returncode != 0:
        print(run.stdout + run.stderr)
        sys.exit("the alerts that fire on the scraped series are not the ones expected (above)")
    print(f"promtool test rules on {len(series)} scraped series: firing exactly "
          + (", ".join(expected) if expected else "nothing"))


def cost(queries, dsn, runs=5, out=None):
    import psycopg2
    conn = psycopg2.connect(dsn)
    conn.autocommit = True
    cur = conn.cursor()
    total = 0.0
    parts, medians = [], {}
    for ns, spec in yaml.safe_load(Path(queries).read_text()).items():
        times = []
        for _ in range(runs):
            t0 = time.perf_counter()
            cur.execute(spec["query"])
            cur.fetchall()
            times.append(time.perf_counter() - t0)
        median = sorted(times)[len(times) // 2]
        medians[ns] = round(median, 4)
        total += median
        cached = f", cached {spec['cache_seconds']} s" if spec.get("cache_seconds") else ""
        parts.append(f"{ns} {median * 1000:.1f} ms{cached}")
    print(f"queries' cost (median of {runs}, as the monitoring role): " + "; ".join(parts)
          + f"; all {total * 1000:.1f} ms")
    if out:
        Path(out).write_text(json.dumps(medians))


if __name__ == "__main__":
    command, args = sys.argv[1], sys.argv[2:]
    if command == "present":
        present(*args)
    elif command == "alerts":
        alerts(args[0], args[1], args[2], args[3:])
    elif command == "cost":
        cost(args[0], args[1], *([int(args[2])] + args[3:4] if len(args) > 2 else []))
    else:
        sys.exit(__doc__)
