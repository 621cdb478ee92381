"""The AsyncAPI message objects of ``commands.asyncapi``: a command on ``cmd.<aggregate>.<verb>``,
its outcome on ``out.<command id>``, a parked command on ``parked.<command id>`` and an event on
``ev.<aggregate>.<id>``, each with the headers Jetyard writes. Reads and writes no subject.

Payloads point into ``components.schemas`` (pydantic's schemas, by class name); an event's
payload is the envelope with its wire name, schema version and aggregate type fixed.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping, Sequence
from typing import Any

from commands.messages import COMMAND_NAME_HEADER, Command
from commands.parking import (
    PARK_DELIVERIES_HEADER,
    PARK_ERROR_HEADER,
    PARK_REASON_HEADER,
    PARK_SUBJECT_HEADER,
)
from events.catalogue import Event
from events.store import EXPECTED_HEADER
from schemas.ids import TOKEN_PATTERN
from schemas.subjects import EVENT_ID_HEADER, EVENT_NAME_HEADER

Json = dict[str, Any]

SCHEMAS = "#/components/schemas/"
OUTCOME = "Outcome"
PARKED = "ParkedCommand"


def command_message(cmd: type[Command]) -> Json:
    name = cmd.command_name()
    headers = {
        "Nats-Msg-Id": _text("the command id (a re-send is stored once)"),
        COMMAND_NAME_HEADER: _text("the command's name", const=name),
    }
    return {
        "name": name,
        "title": name,
        **_summary(cmd),
        "headers": _headers(headers),
        "payload": {"$ref": SCHEMAS + cmd.__name__},
    }


def outcome_message() -> Json:
    return {
        "name": OUTCOME,
        "title": "Outcome",
        "summary": "The one outcome of a command: accepted with its event sequences, or "
        "rejected with a code and a sentence.",
        "headers": _headers({EXPECTED_HEADER: _text("create-once guard", const="0")}),
        "payload": {"$ref": SCHEMAS + "Outcome"},
    }


def parked_message(cmds: Sequence[type[Command]]) -> Json:
    headers = {
        "Nats-Msg-Id": _text("the command id"),
        PARK_REASON_HEADER: _text("why it failed (one line, at most 1,024 characters)"),
        PARK_ERROR_HEADER: _text("the exception's type, or NoAnswer"),
        PARK_DELIVERIES_HEADER: _text("deliveries used", pattern="^[0-9]+$"),
        PARK_SUBJECT_HEADER: _text("the command's subject"),
        COMMAND_NAME_HEADER: _text("the command's name, or unknown"),
    }
    # Any command, or bytes that do not parse as one (an unknown subject, a malformed body).
    sent = [*({"$ref": SCHEMAS + c.__name__} for c in cmds), {}]
    return {
        "name": PARKED,
        "title": "Parked command",
        "summary": "A command that failed at its last delivery, kept as sent with the reason.",
        "headers": _headers(headers),
        "payload": {"description": "The command's bytes as sent.", "anyOf": sent},
    }


def event_message(ev: type[Event]) -> Json:
    name, version = ev.event_name, ev.schema_version
    headers = {
        EVENT_NAME_HEADER: _text("the event's wire name", const=name),
        EVENT_ID_HEADER: _text("the event id (derived from the causing command)"),
    }
    guard = _text(
        "the aggregate's last sequence as the writer saw it (0: create once); on the first "
        "event of each aggregate in a write"
    )
    fixed = {
        "name": {"const": name},
        "schema_version": {"const": version},
        "aggregate_type": {"const": ev.aggregate_type.value},
        "payload": {"$ref": SCHEMAS + ev.__name__},
    }
    return {
        "name": name,
        "title": f"{name} v{version}",
        **_summary(ev),
        "headers": _headers(headers, {EXPECTED_HEADER: guard}),
        "payload": {
            "allOf": [{"$ref": SCHEMAS + "Envelope"}, {"type": "object", "properties": fixed}]
        },
        "x-schema-version": version,
    }


def id_parameter(location: str) -> Json:
    """A subject token: the value at ``location`` in the message (a runtime expression)."""
    return {"description": f"an id token matching {TOKEN_PATTERN.pattern}", "location": location}


def _summary(cls: type) -> Json:
    doc = cls.__dict__.get("__doc__")  # its own docstring, not its base class's
    return {"summary": inspect.cleandoc(doc).split("\n\n")[0].replace("\n", " ")} if doc else {}


def _headers(required: Mapping[str, Json], optional: Mapping[str, Json] | None = None) -> Json:
    properties = {**required, **(optional or {})}
    return {"type": "object", "properties": properties, "required": sorted(required)}


def _text(description: str, **more: Any) -> Json:
    return {"type": "string", "description": description, **more}
