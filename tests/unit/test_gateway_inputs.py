"""GraphQL input becomes a command, or a sentence saying what is wrong."""

from __future__ import annotations

from typing import Any

import pytest

from schemas.principal import SYSTEM_TENANT, Actor
from services.gateway.inputs import InputError, create_session_command, parse_memory

ACTOR = Actor.service("tests")


def raw(**overrides: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "image": "jetyard-busybox:latest",
        "type": "batch",
        "cpu": "0.5",
        "memory": "64m",
        "gpu": "0",
        "command": ["sh", "-c", "exit 3"],
        "env": {"A": "1"},
    }
    return {**base, **overrides}


@pytest.mark.parametrize(
    ("text", "expected"),
    [("64m", 64 << 20), ("1.5GiB", 3 << 29), ("1073741824", 1 << 30), ("2g", 2 << 30)],
)
def test_memory_sizes(text: str, expected: int) -> None:
    assert parse_memory(text) == expected


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"memory": "-64m"}, "memory must be more than zero"),
        ({"memory": "lots"}, "is not a size"),
        ({"cpu": "-1"}, "cpu must not be negative"),
        ({"cpu": "0.0005"}, "finer than 1/1000"),
        ({"gpu": "0.001"}, "finer than 1/100"),
        ({"image": ""}, "image"),
        ({"env": {"1BAD": "x"}}, "environment variable name"),
    ],
)
def test_bad_input_is_named(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(InputError, match=message):
        create_session_command(raw(**overrides), actor=ACTOR, tenant=SYSTEM_TENANT, command_id=None)


def test_good_input_becomes_a_create_session_command() -> None:
    command = create_session_command(raw(), actor=ACTOR, tenant=SYSTEM_TENANT, command_id="c-1")
    resources = command.spec.kernels[0].resources
    assert (resources.cpu_milli, resources.memory_bytes, resources.gpu_hundredths) == (
        500,
        64 << 20,
        0,
    )
    assert command.command_id == "c-1"
    assert command.spec.command == ("sh", "-c", "exit 3")
