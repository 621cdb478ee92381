"""The Grafana dashboard and the metrics' documentation stay with the code: the dashboard is a
dashboard model importable with a ``DS_PROMETHEUS`` input, every panel reads through it, every
metric it queries is documented in ``docs/metrics.md``, and every documented metric has a
panel. (That the services serve every documented metric is checked end to end.)"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from tests.metrics_support import documented, family

ROOT = Path(__file__).resolve().parents[2]
DASHBOARD = ROOT / "grafana" / "jetyard-dashboard.json"


def panels() -> list[dict[str, Any]]:
    model = json.loads(DASHBOARD.read_text())
    found: list[dict[str, Any]] = model["panels"]
    return found


def queried() -> set[str]:
    names = set()
    for panel in panels():
        for target in panel.get("targets", []):
            names |= {family(n) for n in re.findall(r"jetyard_[a-z_]+", target["expr"])}
    return names


def test_the_dashboard_is_importable_with_a_prometheus_input() -> None:
    model = json.loads(DASHBOARD.read_text())
    assert model["__inputs"][0]["name"] == "DS_PROMETHEUS"
    assert model["__inputs"][0]["pluginId"] == "prometheus"
    assert model["uid"] and model["title"] and model["schemaVersion"] >= 30
    ids = [p["id"] for p in panels()]
    assert len(ids) == len(set(ids))
    for panel in panels():
        if panel["type"] == "row":
            continue
        assert panel["datasource"]["uid"] == "${DS_PROMETHEUS}", panel["title"]
        assert panel["targets"], panel["title"]
        for target in panel["targets"]:
            assert target["datasource"]["uid"] == "${DS_PROMETHEUS}"
            assert target["expr"].count("(") == target["expr"].count(")"), target["expr"]
        grid = panel["gridPos"]
        assert grid["x"] + grid["w"] <= 24


def test_every_documented_metric_has_a_panel_and_every_queried_one_is_documented() -> None:
    docs = documented()
    assert len(docs) >= 20
    assert queried() - docs == set()
    assert docs - queried() == set()
