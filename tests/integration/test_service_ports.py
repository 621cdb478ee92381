"""Service ports on the real nats-server with the simulated agent and the real gateway: an image
registered with Backend.AI's label lists its apps (a bad label is refused with the parser's
sentence); once its kernel runs, the agent reports each app open, never-opened or not-probed,
and ``Session.servicePorts`` lists them."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from commands.repository import load, pending_write
from commands.session.aggregate import Session
from events.bus import Bus
from events.store import EventStore
from schemas.ids import new_id, node_id_for_host
from schemas.resources import ResourceSlots
from schemas.service_ports import BACKENDAI_LABEL
from schemas.session import KernelSpec, SessionSpec
from services.node.agent import NodeAgent
from services.node.backend_simulated import SimulatedBackend
from services.node.settings import AgentSettings
from tests.integration.gateway_support import Gateway, running_gateway
from tests.integration.node_support import change_ledger, eventually, facts, scheduler_cause
from tests.support import NOW

SLOTS = ResourceSlots.of(cpu="0.5", memory=64 << 20)
LABEL = "web:http:8080,ssh:tcp:2200,ttyd:pty:7681"
REGISTER = """mutation($name: String!, $labels: [ImageLabelInput!]) {
    registerImage(name: $name, labels: $labels) { status message } }"""
IMAGES = "{ images { name servicePorts { name protocol ports public } } }"
PORTS = """query($id: ID!) { session(id: $id) {
    kernelIds servicePorts { kernelId name protocol port state public } } }"""


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(bus, tmp_path_factory.mktemp("ports")) as gw:
        yield gw


async def test_an_image_registered_with_a_label_lists_its_apps(gateway: Gateway) -> None:
    image = f"reg.example/lab-{new_id()[:8]}:1"
    labels = [{"key": BACKENDAI_LABEL, "value": LABEL}, {"key": "maintainer", "value": "me"}]

    answer = await gateway.gql(REGISTER, name=image, labels=labels)

    assert answer["data"]["registerImage"]["status"] == "ACCEPTED", answer
    listed = {i["name"]: i for i in (await gateway.gql(IMAGES))["data"]["images"]}
    assert listed[image]["servicePorts"] == [
        {"name": "web", "protocol": "http", "ports": [8080], "public": False},
        {"name": "ssh", "protocol": "tcp", "ports": [2200], "public": False},
        {"name": "ttyd", "protocol": "pty", "ports": [7681], "public": False},
    ]


async def test_a_bad_label_is_refused_with_the_parsers_sentence(gateway: Gateway) -> None:
    labels = [{"key": BACKENDAI_LABEL, "value": "web:http:8080,tb:htp:6006"}]

    answer = await gateway.gql(REGISTER, name=f"reg.example/bad-{new_id()[:8]}:1", labels=labels)

    (problem,) = answer["errors"]
    assert problem["extensions"]["code"] == "invalid"
    assert (
        f"{BACKENDAI_LABEL} entry 2 'tb:htp:6006': protocol 'htp' is not one of"
        in problem["message"]
    )


async def test_a_running_kernels_apps_are_reported_and_listed_on_its_session(
    bus: Bus, gateway: Gateway
) -> None:
    store = EventStore(bus)
    image = f"lab-{new_id()[:8]}:1"
    settings = AgentSettings(
        hostname=f"sim-{new_id()}", backend="simulated", simulated_images=(image,),
        service_ports_wait_s=1.0,
    )  # fmt: skip
    backend = SimulatedBackend(
        node_id_for_host(settings.hostname),
        [image],
        image_labels={image: {BACKENDAI_LABEL: LABEL}},
        closed_ports=[2200],
    )
    agent = NodeAgent(bus, settings, backend)
    task = asyncio.create_task(agent.run(asyncio.Event()))
    try:
        await eventually(lambda: _registered(agent, task), what="registration")
        session_id, kernel = await _running(store, backend.node_id, image)

        async def reported() -> dict[str, Any] | None:
            found = [
                p
                for name, p in await facts(store, backend.node_id)
                if name == "KernelServicePortsReported" and p["kernel_id"] == kernel
            ]
            return found[0] if found else None

        event = await eventually(reported, what="the ports reported")
        assert event["session_id"] == session_id
        assert [(p["name"], p["address"], p["state"]) for p in event["ports"]] == [
            ("web", f"jy-{kernel}:8080", "open"),
            ("ssh", f"jy-{kernel}:2200", "never-opened"),
            ("ttyd", f"jy-{kernel}:7681", "not-probed"),
        ]

        async def listed() -> list[dict[str, Any]] | None:
            body = await gateway.gql(PORTS, id=session_id)
            assert "errors" not in body, body
            return body["data"]["session"]["servicePorts"] or None

        ports = await eventually(listed, what="Session.servicePorts")
        assert ports == [
            {"kernelId": kernel, "name": "web", "protocol": "http", "port": 8080,
             "state": "open", "public": False},
            {"kernelId": kernel, "name": "ssh", "protocol": "tcp", "port": 2200,
             "state": "never-opened", "public": False},
            {"kernelId": kernel, "name": "ttyd", "protocol": "pty", "port": 7681,
             "state": "not-probed", "public": False},
        ]  # fmt: skip
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


async def _registered(agent: NodeAgent, task: asyncio.Task[None]) -> int:
    if task.done():
        task.result()
    return agent.record.epoch


async def _running(store: EventStore, node_id: str, image: str) -> tuple[str, str]:
    """A session of one kernel, placed on ``node_id`` and allocated there, as the scheduler
    would write it."""
    spec = SessionSpec(image=image, kernels=(KernelSpec(resources=SLOTS),))
    session = Session.request(new_id(), spec, NOW)
    kernel = session.kernel_ids[0]
    write = pending_write((session, 0), scheduler_cause())
    assert write is not None
    await store.append(write)
    loaded = await load(store, Session, session.id)
    assert loaded.aggregate is not None
    loaded.aggregate.schedule({kernel: node_id}, "placed", NOW)
    write = pending_write((loaded.aggregate, loaded.last_seq), scheduler_cause())
    assert write is not None
    await store.append(write)
    await change_ledger(
        store, node_id, lambda node: node.allocate(kernel, session.id, SLOTS, NOW, image=image)
    )
    return session.id, kernel
