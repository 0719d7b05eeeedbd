#!/usr/bin/env python3
"""The Grafana dashboard (infra/grafana/seckill.dashboard.json) against the alert rules
(infra/prometheus/seckill.rules.yml) and what a running host exports.

- Every alert has its panel: a panel whose description names the alert, whose queries read every
  metric the alert reads, and whose threshold line is the alert's threshold.
- Every panel query names only metrics that are exported: the `seckill_` ones by the scrapes
  given with --exported (the host's /metrics and the app's /admin/metrics, in the text format),
  the `redis_` ones by redis_exporter, which is not run here: those the alert rules read.

    check-dashboard.py --exported host.txt admin.txt

Prints each problem and exits 1 if there is any. tests/tests/sale/dashboard.rs runs it over a
running app's scrapes.
"""
import argparse
import json
import re
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
DASHBOARD = ROOT / "infra/grafana/seckill.dashboard.json"
RULES = ROOT / "infra/prometheus/seckill.rules.yml"
PROMQL_WORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left",
                "group_right", "bool", "offset", "inf", "nan"}


def metric_names(expr: str) -> set:
    """The metric names a PromQL expression reads."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)          # string literals
    expr = re.sub(r"\{[^}]*\}", "", expr)                    # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)                   # range selectors
    expr = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    names = set()
    for m in re.finditer(r"[A-Za-z_:][A-Za-z0-9_:]*", expr):
        word, rest = m.group(0), expr[m.end():].lstrip()
        if word.lower() in PROMQL_WORDS or rest.startswith("("):
            continue
        names.add(word)
    return names


def alert_threshold(expr: str):
    """The number the alert's first comparison compares with."""
    m = re.search(r"(?:>|<|>=|<=|==|!=)\s*(-?[0-9.]+(?:e-?[0-9]+)?)", expr)
    return float(m.group(1)) if m else None


def exported_names(texts) -> set:
    """Every series name a text-format exposition offers, with the suffixes its types add."""
    suffixes = {"counter": ["_total"], "histogram": ["_bucket", "_sum", "_count"],
                "summary": ["_sum", "_count"], "gauge": [""], "unknown": [""], "info": ["_info"]}
    names = set()
    for text in texts:
        for line in text.splitlines():
            m = re.match(r"# TYPE (\S+) (\S+)", line)
            if m:
                names.update(m.group(1) + s for s in suffixes.get(m.group(2), [""]))
            elif line and not line.startswith("#"):
                names.add(re.match(r"[^{\s]+", line).group(0))
    return names


def panels(dashboard: dict):
    for p in dashboard["panels"]:
        if p["type"] == "row":
            yield from p.get("panels", [])
        else:
            yield p


def alerts(rules: dict):
    for group in rules["groups"]:
        yield from (rule for rule in group["rules"] if rule.get("alert"))


def check(dashboard: dict, rules: dict, exported: set) -> list:
    problems = []
    shown = list(panels(dashboard))
    # redis_exporter's series: the ones the rules alert on.
    redis_exporter = {n for rule in alerts(rules) for n in metric_names(rule["expr"])
                      if n.startswith("redis_")}
    for p in shown:
        if not p.get("targets"):
            problems.append(f"panel {p['title']!r}: no query")
        for t in p.get("targets", []):
            for name in sorted(metric_names(t["expr"])):
                if name.startswith("redis_"):
                    if name not in redis_exporter:
                        problems.append(f"panel {p['title']!r}: {name} is not a redis_exporter series the alert rules read")
                elif name not in exported:
                    problems.append(f"panel {p['title']!r}: {name} is not exported by the host or the app")
    for rule in alerts(rules):
        alert = rule["alert"]
        mine = [p for p in shown if re.search(rf"\b{alert}\b", p.get("description", ""))]
        if len(mine) != 1:
            problems.append(f"alert {alert}: {len(mine)} panels name it in their description, not one")
            continue
        p = mine[0]
        read = set().union(*(metric_names(t["expr"]) for t in p["targets"]))
        missing = metric_names(rule["expr"]) - read
        if missing:
            problems.append(f"alert {alert}: its panel {p['title']!r} does not read {sorted(missing)}")
        steps = p["fieldConfig"]["defaults"].get("thresholds", {}).get("steps", [])
        lines = [s["value"] for s in steps if s.get("value") is not None]
        if lines != [alert_threshold(rule["expr"])]:
            problems.append(f"alert {alert}: its panel {p['title']!r} draws {lines}, not the alert's threshold {alert_threshold(rule['expr'])}")
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--exported", nargs="+", required=True, type=Path,
                        help="text-format scrapes of a running host's /metrics and /admin/metrics")
    args = parser.parse_args()
    exported = exported_names(f.read_text() for f in args.exported)
    problems = check(json.loads(DASHBOARD.read_text()), yaml.safe_load(RULES.read_text()), exported)
    for p in problems:
        print(f"dashboard: {p}", file=sys.stderr)
    print(f"dashboard: {len(list(panels(json.loads(DASHBOARD.read_text()))))} panels checked, {len(problems)} problems")
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
