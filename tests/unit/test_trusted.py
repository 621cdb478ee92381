"""``schemas.trusted``: models built from valid values without validating them again are the
very instances validation would give; anything it cannot build directly goes to pydantic's
``model_construct``."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError

from commands.node.rules import Allocation
from events.envelope import Envelope
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.resources import ResourceSlots
from schemas.sandbox import SAFE_SANDBOX
from schemas.subjects import AggregateType
from schemas.trusted import trusted


def _envelope_fields() -> dict[str, object]:
    return {
        "event_id": "e1",
        "name": "SessionScheduled",
        "schema_version": 1,
        "aggregate_type": AggregateType.SESSION,
        "aggregate_id": "s1",
        "aggregate_version": 2,
        "occurred_at": datetime(2026, 11, 29, 12, 0, tzinfo=UTC),
        "causation_id": "c1",
        "correlation_id": "c1",
        "actor": Actor.service("scheduler"),
        "tenant": SYSTEM_TENANT,
        "payload": {"node_id": "n1", "kernels": [{"index": 0}]},
    }


def test_an_envelope_built_trusted_is_the_validated_one() -> None:
    built = trusted(Envelope, _envelope_fields())
    validated = Envelope.model_validate(_envelope_fields())
    assert built == validated
    assert built.model_dump_json() == validated.model_dump_json()
    assert built.model_fields_set == validated.model_fields_set
    assert type(built) is Envelope


def test_an_allocation_built_trusted_is_the_validated_one() -> None:
    fields = {
        "session_id": "s1",
        "slots": ResourceSlots(cpu_milli=1500, memory_bytes=2**30, gpu_hundredths=50),
        "image": "img:1",
        "command": ("sleep", "1"),
        "env": {"A": "1"},
        "devices": (),
        "hostname": "",
        "numa_node": None,
        "mounts": (),
        "sandbox": SAFE_SANDBOX,
        "source": None,
        "cluster": None,
        "service_port": None,
        "stopping": False,
    }
    built = trusted(Allocation, dict(fields))
    assert built == Allocation.model_validate(fields)
    assert hash(built.slots) == hash(fields["slots"])
    with pytest.raises(ValidationError):  # still frozen
        built.image = "other"  # type: ignore[misc]
    assert built.model_copy(update={"stopping": True}).stopping


class _WithDefault(BaseModel):
    model_config = ConfigDict(frozen=True)

    name: str
    tags: list[str] = Field(default_factory=list)


class _WithPrivate(BaseModel):
    name: str
    _seen: int = PrivateAttr(default=7)


def test_what_it_cannot_build_directly_goes_to_model_construct() -> None:
    partial = trusted(_WithDefault, {"name": "a"})  # a field left out: its default
    assert partial == _WithDefault(name="a") and partial.tags == []
    assert partial.model_fields_set == {"name"}
    private = trusted(_WithPrivate, {"name": "b"})  # private attributes get their defaults
    assert private._seen == 7
    odd = trusted(_WithDefault, {"name": "c", "tag": ["x"]})  # not a field: not kept
    assert odd == _WithDefault(name="c")
