"""The console's session form refuses exactly what the gateway refuses: the same inputs go
through the page's own checks (``static/js/rules.js`` in Chromium, with this gateway's
``rules.json``) and through ``services.gateway.sessions.inputs.create_session_command``."""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from schemas.principal import SYSTEM_TENANT, Actor
from services.gateway.core.inputs import InputError
from services.gateway.sessions.inputs import create_session_command
from tests.e2e.conftest import Jetyard

GOOD: dict[str, Any] = {"image": "lab/pytorch:2.4", "type": "batch", "cpu": "1", "memory": "1g"}
CASES: list[dict[str, Any]] = [
    {},
    {"cpu": "0.01"},
    {"cpu": "0.009"},
    {"cpu": "0.0105"},
    {"cpu": " 2 "},
    {"cpu": "-1"},
    {"cpu": "1e3"},
    {"cpu": "NaN"},
    {"cpu": "\u0661"},  # ARABIC-INDIC DIGIT ONE: a digit, not an ASCII one
    {"cpu": "4096"},
    {"cpu": "4096.001"},
    {"cpu": "0000000000000000000000000000001"},
    {"memory": "6m"},
    {"memory": "5.99m"},
    {"memory": "6291455"},
    {"memory": "1.5GiB"},
    {"memory": "2gb"},
    {"memory": "64t"},
    {"memory": "64.1t"},
    {"memory": "1x"},
    {"memory": "-1g"},
    {"gpu": "0"},
    {"gpu": "0.25"},
    {"gpu": "0.125"},
    {"gpu": "256"},
    {"gpu": "256.01"},
    {"type": "interactive", "timeoutSeconds": 60},
    {"timeoutSeconds": 60},
    {"timeoutSeconds": 0},
    {"clusterSize": 64},
    {"clusterSize": 65},
    {"clusterSize": 0},
    {"image": "-starts-with-a-dash"},
    {"image": "has space"},
    {"name": "run_1.a"},
    {"name": "bad name"},
    {"resourceGroup": "gpu-a100"},
    {"resourceGroup": "bad.group"},
    {"command": ["python", "-c", "print(1)\nprint(2)"]},
    {"command": ["echo", "\x1b[31m"]},
    {"env": [{"name": "LR", "value": "0.1"}]},
    {"env": [{"name": "1LR", "value": "0.1"}]},
    {"env": [{"name": "LR", "value": "a\x00b"}]},
    {"dependsOn": ["abc-123"]},
    {"dependsOn": ["not a session"]},
    {"dependsOn": ["a", "a"]},
    {"mounts": [{"folder": "data", "path": "/home/work/data", "readOnly": False}]},
    {"mounts": [{"folder": "data", "path": "/etc/data", "readOnly": False}]},
    {"mounts": [{"folder": "data", "path": "/tmp", "readOnly": False}]},
    {"mounts": [{"folder": "data", "path": "/home/work/../x", "readOnly": False}]},
    {"mounts": [{"folder": "data", "path": "/home/work/", "readOnly": False}]},
    {"mounts": [{"folder": "data", "path": "relative", "readOnly": False}]},
    {
        "mounts": [
            {"folder": "a", "path": "/data", "readOnly": False},
            {"folder": "b", "path": "/data", "readOnly": False},
        ]
    },
    {
        "mounts": [
            {"folder": "a", "path": None, "readOnly": False},
            {"folder": "a", "path": "/x", "readOnly": True},
        ]
    },
]


def gateway_accepts(given: dict[str, Any]) -> bool:
    """What ``createSession`` decides before it sends anything (``sessions/mutations.py``)."""
    if given["type"] not in {"interactive", "batch"}:
        return False
    raw = {
        "image": given["image"],
        "type": given["type"],
        "cpu": given["cpu"],
        "memory": given["memory"],
        "gpu": given.get("gpu", "0"),
        "command": given.get("command"),
        "env": {e["name"]: e["value"] for e in given.get("env", [])},
        "name": given.get("name"),
        "resource_group": given.get("resourceGroup"),
        "cluster_size": given.get("clusterSize"),
        "depends_on": given.get("dependsOn"),
        "timeout_s": given.get("timeoutSeconds"),
        "mounts": [
            {"folder": m["folder"], "path": m["path"], "read_only": m["readOnly"]}
            for m in given.get("mounts", [])
        ],
    }
    try:
        create_session_command(
            raw, actor=Actor.service("tests"), tenant=SYSTEM_TENANT, command_id=None
        )
    except InputError:
        return False
    return True


@pytest.fixture
def rules_page(page: Page, stack: Jetyard) -> Page:
    page.goto(f"{stack.url}/console/#/sign-in")
    expect(page.locator("#sign-in-password")).to_be_visible()
    return page


def test_the_form_and_the_gateway_refuse_the_same_inputs(rules_page: Page) -> None:
    inputs = [{"gpu": "0", **GOOD, **case} for case in CASES]
    problems: list[list[dict[str, str]]] = rules_page.evaluate(
        """async (inputs) => {
             const rules = await import("./js/rules.js");
             const loaded = await rules.loadRules();
             return inputs.map((input) => rules.checkSession(input, loaded));
           }""",
        inputs,
    )
    disagreements = [
        (case, found)
        for case, given, found in zip(CASES, inputs, problems, strict=True)
        if (not found) != gateway_accepts(given)
    ]
    assert not disagreements, f"the form and the gateway disagree on: {disagreements}"
