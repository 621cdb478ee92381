"""The AsyncAPI 3.0 document of Jetyard's bus, generated from the code: every registered command
on ``cmd.<aggregate>.<verb>`` (``JY_COMMANDS``), its outcome on ``out.<command id>``
(``JY_OUTCOMES``), parked commands on ``parked.<command id>`` (``JY_PARKED``) and every event in
the catalogue on ``ev.<aggregate>.<id>`` (``JY_EVENTS``). Reads and writes no subject.

The document describes Jetyard's services as one application: they receive commands and send
outcomes, parked commands and events. Schemas are pydantic's validation schemas (what a reader
accepts), gathered once under ``components.schemas``. The output is deterministic (sorted keys,
stable list order), so it is checked in (``docs/asyncapi.json``) and compared in a test.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import pkgutil
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema

import commands
import events.domain  # noqa: F401  (fills the catalogue)
from commands import messages
from commands.asyncapi_messages import (
    OUTCOME,
    PARKED,
    SCHEMAS,
    Json,
    command_message,
    event_message,
    id_parameter,
    outcome_message,
    parked_message,
)
from commands.messages import Command
from commands.outcome import Outcome
from events import declarations
from events.catalogue import CATALOGUE, Catalogue
from events.envelope import Envelope
from schemas.settings import NatsSettings
from schemas.subjects import (
    COMMANDS_STREAM,
    EVENTS_PREFIX,
    EVENTS_STREAM,
    OUTCOMES_PREFIX,
    OUTCOMES_STREAM,
    PARKED_PREFIX,
    PARKED_STREAM,
)

Registry = Mapping[tuple[Any, str], type[Command]]

RUNNER = (
    "Read by the owning service's durable pull consumer (explicit acks, bounded redelivery "
    "with back-off); a command that fails at its last delivery is parked."
)
STORE_OUTCOME = "Store a command's outcome, guarded with expected last subject sequence 0."
PARK = "Park a poison command; its sender gets a `parked` outcome."
REPLY = {"channel": {"$ref": f"#/channels/{OUTCOMES_PREFIX}"}}


def build_document(registry: Registry | None = None, catalogue: Catalogue | None = None) -> Json:
    """The document for ``registry`` and ``catalogue`` (by default every command module's
    commands and the whole event catalogue)."""
    if registry is None:
        _import_command_modules()
        registry = messages.REGISTRY
    catalogue = catalogue or CATALOGUE
    cmds = sorted(registry.values(), key=lambda c: c.subject())
    evs = catalogue.classes()
    names = [c.command_name() for c in cmds] + [e.event_name for e in evs]
    clashes = {n for n in names if names.count(n) > 1} | ({OUTCOME, PARKED} & {*names})
    if clashes:
        raise ValueError(f"message names used twice: {', '.join(sorted(clashes))}")
    models: list[type[BaseModel]] = [*cmds, *evs, Outcome, Envelope]
    _, top = models_json_schema(
        [(m, "validation") for m in models], ref_template=SCHEMAS + "{model}"
    )
    parts = Parts()
    for cmd in cmds:
        name, subject = cmd.command_name(), cmd.subject()
        summary = f"Decide {name}: exactly one outcome on out.{{command_id}}, then ack."
        parts.add(subject, subject, COMMANDS_STREAM, {name: command_message(cmd)}, name, summary)
        parts.operations[f"receive.{subject}"] |= {"description": RUNNER, "reply": REPLY}
    by_id = {"command_id": id_parameter("$message.payload#/command_id")}
    parts.add(OUTCOMES_PREFIX, f"{OUTCOMES_PREFIX}.{{command_id}}", OUTCOMES_STREAM,
              {OUTCOME: outcome_message()}, "Command outcomes", STORE_OUTCOME, by_id)  # fmt: skip
    by_id = {"command_id": id_parameter("$message.header#/Nats-Msg-Id")}
    parts.add(PARKED_PREFIX, f"{PARKED_PREFIX}.{{command_id}}", PARKED_STREAM,
              {PARKED: parked_message(cmds)}, "Parked commands", PARK, by_id)  # fmt: skip
    by_id = {"aggregate_id": id_parameter("$message.payload#/aggregate_id")}
    for aggregate in sorted({e.aggregate_type.value for e in evs}):
        channel = f"{EVENTS_PREFIX}.{aggregate}"
        mine = {e.event_name: event_message(e) for e in evs if e.aggregate_type.value == aggregate}
        summary = f"Append {aggregate} events, guarded by the aggregate's last sequence."
        title = f"The {aggregate} aggregates' events (the wire name is in Jy-Event)"
        parts.add(channel, f"{channel}.{{aggregate_id}}", EVENTS_STREAM, mine, title, summary,
                  by_id)  # fmt: skip
    return {
        "asyncapi": "3.0.0",
        "info": {
            "title": "Jetyard",
            "version": importlib.metadata.version("jetyard"),
            "description": (
                "Commands, outcomes, parked commands and events on NATS JetStream. Generated "
                "by `jetyard asyncapi` from the command registry and the event catalogue."
            ),
        },
        "defaultContentType": "application/json",
        "servers": {
            "nats": {
                "host": NatsSettings.model_construct().url.split("://", 1)[1],
                "protocol": "nats",
                "description": "The NATS server with JetStream (`jetyard up` starts one).",
            }
        },
        "x-streams": _streams(),
        "channels": parts.channels,
        "operations": parts.operations,
        "components": {"schemas": top.get("$defs", {}), "messages": parts.messages},
    }


class Parts:
    """Channels, the operation on each, and the messages they carry, as they are added."""

    def __init__(self) -> None:
        self.channels: Json = {}
        self.operations: Json = {}
        self.messages: Json = {}

    def add(
        self, channel: str, address: str, stream: str, msgs: Mapping[str, Json], title: str,
        summary: str, parameters: Json | None = None,
    ) -> None:  # fmt: skip
        """A channel carrying ``msgs``; the services receive on ``cmd.*`` and send the rest."""
        action = "receive" if stream == COMMANDS_STREAM else "send"
        self.messages.update(msgs)
        self.channels[channel] = {
            "address": address,
            "title": title,
            "messages": {name: _ref("components/messages", name) for name in msgs},
            **({"parameters": parameters} if parameters else {}),
            "x-stream": stream,
        }
        self.operations[f"{action}.{channel}"] = {
            "action": action,
            "channel": _ref("channels", channel),
            "messages": [_ref(f"channels/{channel}/messages", name) for name in msgs],
            "summary": summary,
        }


def _import_command_modules() -> None:
    # A command is registered when its module is imported: import them all, so a command in a
    # new module cannot be left out of the document.
    for module in sorted(m.name for m in pkgutil.walk_packages(commands.__path__, "commands.")):
        importlib.import_module(module)


def _ref(kind: str, name: str) -> Json:
    return {"$ref": f"#/{kind}/{name.replace('/', '~1')}"}


def _streams() -> Json:
    # The defaults, not this machine's environment: the document is the same everywhere.
    settings = NatsSettings.model_construct()
    configs = [
        declarations.events_stream_config(settings),
        declarations.commands_stream_config(settings),
        declarations.outcomes_stream_config(settings),
        declarations.parked_stream_config(settings),
    ]
    streams: Json = {}
    for config in configs:
        assert config.name is not None and config.retention is not None
        streams[config.name] = {
            "description": config.description,
            "subjects": list(config.subjects or ()),
            "retention": config.retention.value,
            "max_msgs_per_subject": config.max_msgs_per_subject or -1,
        }
    return streams


def render(document: Json) -> str:
    """The document as checked in: indented JSON, sorted keys, one final newline."""
    return json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def differences(checked_in: Json, generated: Json) -> list[str]:
    """What differs between a checked-in document and the generated one, named by path:
    channels, operations, messages and schemas entry by entry, anything else by its key."""
    found: list[str] = []
    for path in SECTIONS:
        left, right = _at(checked_in, path), _at(generated, path)
        for key in sorted(set(left) | set(right)):
            where = ".".join((*path, key))
            if key not in right:
                found.append(f"{where}: in the file but no longer in the code")
            elif key not in left:
                found.append(f"{where}: in the code but not in the file")
            elif left[key] != right[key]:
                found.append(f"{where}: differs")
    rest = {k: v for k, v in checked_in.items() if k not in ("channels", "operations")}
    new = {k: v for k, v in generated.items() if k not in ("channels", "operations")}
    for doc in (rest, new):
        doc["components"] = {
            k: v for k, v in doc.get("components", {}).items() if k not in ("messages", "schemas")
        }
    for key in sorted(set(rest) | set(new)):
        if rest.get(key) != new.get(key):
            found.append(f"{key}: differs")
    return found


SECTIONS = (("channels",), ("operations",), ("components", "messages"), ("components", "schemas"))


def _at(document: Json, path: tuple[str, ...]) -> Json:
    node: Any = document
    for key in path:
        node = node.get(key, {}) if isinstance(node, dict) else {}
    return node if isinstance(node, dict) else {}
