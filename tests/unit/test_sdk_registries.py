"""``jetyard.sdk.images.Registries`` and the registry facts of ``Sessions.images`` against a fake
gateway (a ``Caller`` of the test's own): the mutations send their arguments as variables
(a password never in a query's text; null leaves a setting unchanged), a refusal is a
``JetyardError``, a rescan follows its progress while the mutation runs and answers even
when the progress subscription fails, and a registered image carries its registry and digest."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any

import pytest

from jetyard.sdk import Client
from jetyard.sdk.errors import JetyardError
from jetyard.sdk.images import Registries
from jetyard.sdk.models import RescanProgress
from jetyard.sdk.sessions import Sessions

RESULT = {"registry": "lab", "registered": ["r/a:v1"], "updated": [], "unchanged": 2,
          "skipped": [{"reference": "r/b:v1", "reason": "no amd64 image"}]}  # fmt: skip


def _outcome(status: str = "ACCEPTED", message: str = "") -> dict[str, Any]:
    return {"commandId": "c1", "status": status, "code": None, "message": message,
            "sessionId": None, "seq": 3}  # fmt: skip


class FakeGateway:
    """Answers mutations by their field; streams ``progress`` on any subscription, and holds
    a rescan's answer until the progress has been delivered (as a slow registry would)."""

    def __init__(self, progress: list[dict[str, Any]] | None = None) -> None:
        self.queries: list[str] = []
        self.variables: list[dict[str, Any] | None] = []
        self.progress = progress
        self.delivered = asyncio.Event()

    async def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        self.queries.append(query)
        self.variables.append(variables)
        if "rescanRegistry" in query:
            if self.progress is not None:
                await asyncio.wait_for(self.delivered.wait(), 5)
            return {"rescanRegistry": RESULT}
        if "images(" in query:
            return {"images": [
                {"name": "r/a:v1", "registry": "lab", "digest": "sha256:ab",
                 "servicePorts": [{"name": "jupyter"}]},
                {"name": "local:v1", "registry": None, "digest": "", "servicePorts": []},
            ]}  # fmt: skip
        if "nodeImages" in query:
            return {"nodeImages": [{"name": "local:v1", "nodes": 1, "resourceGroups": ["default"],
                                    "hosts": ["gpu-1"]}]}  # fmt: skip
        field = query.split("{", 2)[1].split("(")[0].strip()
        refused = (variables or {}).get("name") == "nope"
        return {field: _outcome("REJECTED" if refused else "ACCEPTED",
                                "registry 'nope' not found" if refused else "added")}  # fmt: skip

    async def subscribe(
        self, query: str, variables: dict[str, Any] | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        if self.progress is None:
            raise JetyardError("cannot open a subscription")
        for seen in self.progress:
            yield {"rescanProgress": seen}
        self.delivered.set()
        await asyncio.Event().wait()  # open until the rescan answers and closes it


async def test_mutations_write_what_is_given_and_a_refusal_raises() -> None:
    gateway = FakeGateway()
    registries = Registries(gateway)
    await registries.add("lab", "https://r.lab", username="ci", password="s3cret",
                         projects=("default/research",), verify_tls=False)  # fmt: skip
    assert "s3cret" not in gateway.queries[-1]  # a variable: never in a query's text
    assert gateway.variables[-1] == {
        "name": "lab", "url": "https://r.lab", "username": "ci", "password": "s3cret",
        "projects": ["default/research"], "verifyTls": False, "caPem": "",
    }  # fmt: skip
    await registries.modify("lab", username="ci2")
    assert "modifyRegistry(name: $name, url: $url, username: $username" in gateway.queries[-1]
    left_out = {k: v for k, v in (gateway.variables[-1] or {}).items() if v is None}
    assert left_out.keys() == {"url", "password", "projects", "verifyTls", "caPem"}  # unchanged
    await registries.set_pull_policy("r/a:v1", None)
    assert gateway.variables[-1] == {"name": "r/a:v1", "policy": None}  # the group's policy
    with pytest.raises(JetyardError, match="registry 'nope' not found"):
        await registries.remove("nope")


async def test_a_rescan_follows_its_progress_while_it_runs() -> None:
    names = ("repositoriesDone", "repositoriesTotal", "tagsDone", "tagsTotal")
    steps = [dict(zip(names, (0, 2, 0, 3), strict=True)),
             dict(zip(names, (2, 2, 3, 3), strict=True))]  # fmt: skip
    seen: list[RescanProgress] = []
    result = await Registries(FakeGateway(steps)).rescan("lab", ["r/a"], progress=seen.append)
    assert [(p.repositories_done, p.tags_done) for p in seen] == [(0, 0), (2, 3)]
    assert (result.registered, result.unchanged, result.skipped[0].reason) == (
        ["r/a:v1"], 2, "no amd64 image",
    )  # fmt: skip


async def test_a_rescan_answers_when_its_progress_cannot_be_followed() -> None:
    gateway = FakeGateway()
    result = await Registries(gateway).rescan("lab", progress=lambda p: None)
    assert result.registry == "lab"
    assert 'rescanRegistry(name: "lab")' in gateway.queries[-1]  # every repository


async def test_a_registered_image_carries_its_registry_and_digest() -> None:
    found = {i.name: i for i in await Sessions(FakeGateway()).images()}
    assert (found["r/a:v1"].registry, found["r/a:v1"].digest, found["r/a:v1"].apps) == (
        "lab", "sha256:ab", ["jupyter"],
    )  # fmt: skip
    assert (found["local:v1"].registry, found["local:v1"].digest) == (None, "")
    assert (found["local:v1"].nodes, found["local:v1"].hosts) == (1, ["gpu-1"])


def test_the_blocking_client_has_the_same_parts() -> None:
    with Client("http://gw.test", "AK", "SK") as jy:
        calls = ("list", "add", "modify", "remove", "rescan", "set_pull_policy")
        assert all(callable(getattr(jy.registries, name)) for name in calls)
        assert callable(jy.sessions.pulls)
