"""Mounts through the GraphQL gateway on the real log and views: ``createSession``'s mount
input refused with a clear error (a bad path, too many mounts, a folder twice, two at one
path, a bad folder reference) and nothing sent; ``Session.mounts`` read from the sessions view
as ``SessionRequested`` recorded them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from commands.repository import pending_write
from commands.session.aggregate import Session
from events.bus import Bus
from events.envelope import Cause
from events.store import EventStore
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import COMMANDS_STREAM
from schemas.vfolder import MAX_MOUNTS, Mount, MountRequest
from tests.integration.gateway_support import Gateway, running_gateway
from tests.integration.node_support import eventually
from tests.support import NOW

CREATE = """mutation($input: CreateSessionInput!) { createSession(input: $input) { status } }"""


@pytest.fixture(scope="module")
async def gateway(bus: Bus, tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    async with running_gateway(
        bus, tmp_path_factory.mktemp("gateway"), command_timeout_s=0.5
    ) as gw:
        yield gw


@pytest.mark.parametrize(
    ("mounts", "error"),
    [
        (
            [{"folder": "data", "path": "/etc/data"}],
            "mounts: mount path '/etc/data' is a system directory (or inside one)",
        ),
        (
            [{"folder": "data", "path": "data"}],
            "mounts: mount path 'data' must be absolute and made of A-Z, a-z, 0-9, '.', '_', "
            "'-' and '/'",
        ),
        (
            [{"folder": "data", "path": "/home/work/../root"}],
            "mounts: mount path '/home/work/../root' is not normal (no '.', '..', '//' or "
            "trailing '/')",
        ),
        (
            [{"folder": f"f{i}"} for i in range(MAX_MOUNTS + 1)],
            f"at most {MAX_MOUNTS} mounts, got {MAX_MOUNTS + 1}",
        ),
        ([{"folder": "data"}, {"folder": "data", "path": "/x"}], "mounted more than once"),
        (
            [{"folder": "a", "path": "/x"}, {"folder": "b", "path": "/x"}],
            "two mounts at /x: give each folder its own path",
        ),
        ([{"folder": "no spaces"}], "is neither a folder name nor a folder id"),
    ],
    ids=["system-path", "relative", "dot-dot", "too-many", "twice", "one-path", "bad-ref"],
)
async def test_bad_mounts_are_a_clear_error_and_send_nothing(
    bus: Bus, gateway: Gateway, mounts: list[dict[str, Any]], error: str
) -> None:
    before = (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq

    answer = await gateway.gql(CREATE, input={"image": "busybox", "mounts": mounts})

    (problem,) = answer["errors"]
    assert error in problem["message"]
    assert problem["extensions"]["code"] == "invalid"
    assert (await bus.js.stream_info(COMMANDS_STREAM)).state.last_seq == before


async def test_a_sessions_mounts_are_read_from_its_view(bus: Bus, gateway: Gateway) -> None:
    store = EventStore(bus)
    spec = SessionSpec(
        image="busybox",
        kernels=(KernelSpec(resources=ResourceSlots.of(cpu="0.5", memory=64 << 20)),),
        mounts=(MountRequest(folder="data", path="/data"), MountRequest(folder="corpus")),
    )
    mounts = (
        Mount(folder_id="f-1", name="data", volume="local", path="/data", read_only=False),
        Mount(folder_id="f-2", name="corpus", volume="local", path="/home/work/corpus",
              read_only=True),
        Mount(folder_id="f-3", name=".cache", volume="local", path="/home/work/.cache",
              read_only=False),
    )  # fmt: skip
    session = Session.request(new_id(), spec, NOW, mounts=mounts)
    command = new_id()
    cause = Cause(
        causation_id=command, correlation_id=command, actor=Actor.service("scheduler"),
        tenant=SYSTEM_TENANT,
    )  # fmt: skip
    write = pending_write((session, 0), cause)
    assert write is not None
    await store.append(write)
    query = "query($id: ID!) { session(id: $id) { mounts { folderId name path readOnly } } }"

    async def shown() -> Any:
        return (await gateway.gql(query, id=session.id))["data"]["session"]

    found = await eventually(shown, what="the session in its view")

    assert found["mounts"] == [
        {"folderId": "f-1", "name": "data", "path": "/data", "readOnly": False},
        {"folderId": "f-2", "name": "corpus", "path": "/home/work/corpus", "readOnly": True},
        {"folderId": "f-3", "name": ".cache", "path": "/home/work/.cache", "readOnly": False},
    ]
