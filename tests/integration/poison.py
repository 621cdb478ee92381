"""Hostile events for the poison tests: each written straight into JY_EVENTS on a session's
subject, as a writer that is not Jetyard (or a newer, broken one) could."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from commands.repository import pending_write
from commands.session.aggregate import Session
from events.bus import Bus
from events.envelope import Cause
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import EVENT_ID_HEADER, EVENT_NAME_HEADER, EVENTS_STREAM
from tests.support import NOW

Mutate = Callable[[dict[str, Any]], dict[str, Any] | bytes]


def valid_request(session_id: str, image: str = "busybox") -> dict[str, Any]:
    """A well-formed ``SessionRequested`` envelope, as JSON data."""
    spec = SessionSpec(
        image=image, kernels=(KernelSpec(resources=ResourceSlots.of(cpu=1, memory=64 << 20)),)
    )
    session = Session.request(session_id, spec, NOW)
    command = new_id()
    cause = Cause(
        causation_id=command,
        correlation_id=command,
        actor=Actor.service("tests"),
        tenant=SYSTEM_TENANT,
    )
    write = pending_write((session, 0), cause)
    assert write is not None
    data: dict[str, Any] = json.loads(write.events[0].model_dump_json())
    return data


def _payload(change: Callable[[dict[str, Any]], None]) -> Mutate:
    def mutate(envelope: dict[str, Any]) -> dict[str, Any]:
        change(envelope["payload"])
        return envelope

    return mutate


def _huge(payload: dict[str, Any]) -> None:
    payload["spec"]["kernels"][0]["resources"]["cpu_milli"] = 10**40


def _wrong_type(payload: dict[str, Any]) -> None:
    payload["spec"]["kernels"] = "many"


def _missing(payload: dict[str, Any]) -> None:
    del payload["spec"]


def _big(payload: dict[str, Any]) -> None:
    payload["spec"]["env"] = {"PAD": "x" * (250 * 1024)}


def _unknown_name(envelope: dict[str, Any]) -> dict[str, Any]:
    envelope["name"] = "SessionTeleported"
    return envelope


def _future_version(envelope: dict[str, Any]) -> dict[str, Any]:
    envelope["schema_version"] = 99
    envelope["payload"] = {"shape": "from the future"}
    return envelope


def _misfiled(envelope: dict[str, Any]) -> dict[str, Any]:
    envelope["aggregate_id"] = new_id()
    return envelope


HOSTILE: dict[str, Mutate] = {
    "huge-integers": _payload(_huge),
    "wrong-types": _payload(_wrong_type),
    "missing-fields": _payload(_missing),
    "250-kib-payload": _payload(_big),
    "unknown-name": _unknown_name,
    "unknown-version": _future_version,
    "misfiled": _misfiled,
    "invalid-utf8": lambda _: b'{"name": "\xff\xfe"}',
    "not-json": lambda _: b"\x00\x01 not json at all",
    "json-list": lambda _: b"[1, 2, 3]",
}
"""Each turns a valid request envelope into a hostile message body (JSON data or bytes)."""


async def write_raw(bus: Bus, session_id: str, body: dict[str, Any] | bytes) -> int:
    """Publish straight to the stream, as Jetyard's store would (name and id headers)."""
    name = body.get("name", "") if isinstance(body, dict) else ""
    data = json.dumps(body).encode() if isinstance(body, dict) else body
    headers = {EVENT_NAME_HEADER: str(name), EVENT_ID_HEADER: new_id()}
    ack = await bus.js.publish(
        f"ev.session.{session_id}", data, stream=EVENTS_STREAM, headers=headers
    )
    return int(ack.seq)


async def write_hostile(bus: Bus, kind: str) -> tuple[str, int]:
    """A fresh session subject carrying one hostile event of ``kind``: (session id, seq)."""
    session_id = new_id()
    body = HOSTILE[kind](valid_request(session_id))
    return session_id, await write_raw(bus, session_id, body)
