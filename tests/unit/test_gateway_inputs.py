"""GraphQL input becomes a command, or a sentence saying what is wrong."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from schemas.principal import SYSTEM_TENANT, Actor
from schemas.session import ClusterMode
from services.gateway.core.inputs import InputError, parse_memory
from services.gateway.sessions.inputs import create_session_command

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
        ({"memory": "-64m"}, "memory must not be negative"),
        ({"memory": "lots"}, "is not a size"),
        ({"cpu": "-1"}, "cpu must not be negative"),
        ({"cpu": "0.0005"}, "finer than 0.001 of a core"),
        ({"gpu": "0.001"}, "GPUs are given in steps of 0.01 of a device"),
        # What the issue found accepted: each refused, naming the rule or the limit.
        ({"cpu": "1e400"}, "cpu '1e400' is not a plain number"),
        ({"cpu": "99999999999999999999"}, "above the most one kernel may ask for: 4096 cores"),
        ({"gpu": "1e400"}, "gpu '1e400' is not a plain number"),
        ({"memory": "99999999999999999999t"}, "above the most one kernel may ask for"),
        ({"cpu": "0"}, "below the least a container can be given: 0.01 of a core"),
        ({"cpu": "0.001"}, "below the least a container can be given: 0.01 of a core"),
        ({"memory": "1"}, "below the least a container can be given: 6 MiB"),
        ({"memory": "1k"}, "below the least a container can be given: 6 MiB"),
        ({"memory": "0.0000001"}, "below the least a container can be given: 6 MiB"),
        ({"cpu": "NaN"}, "cpu 'NaN' is not a plain number"),
        ({"cpu": "Infinity"}, "is not a plain number"),
        ({"cpu": "\u0661"}, "is not a plain number"),  # ARABIC-INDIC DIGIT ONE
        ({"memory": "\u0661\u0662m"}, "is not a size"),
        ({"env": {"A": "x\x00y"}}, r"spec\.env\.A contains a control character \(U\+0000\)"),
        ({"command": ["sh", "-c", "true\x00"]}, r"spec\.command\[2\] contains a control character"),
        ({"image": "busybox\x00"}, "image"),
        ({"env": {"\u00e9": "x"}}, "environment variable name"),
        ({"image": ""}, "image"),
        ({"env": {"1BAD": "x"}}, "environment variable name"),
        (
            {"type": "interactive", "timeout_s": 60},
            "timeoutSeconds applies to batch sessions only",
        ),
        ({"timeout_s": 0}, "field 'spec.timeout_s': input should be greater than 0"),
        (
            {"type": "interactive", "requeue_on_node_loss": True},
            "requeueOnNodeLoss applies to batch sessions only",
        ),
        ({"cluster_size": 0}, "clusterSize must be 1 to 64 kernels, got 0"),
        ({"cluster_size": 65}, "clusterSize must be 1 to 64 kernels, got 65"),
        ({"cluster_mode": "everywhere"}, "field 'spec.cluster_mode'"),
        ({"depends_on": ["a", "a"]}, "dependency 'a' is named more than once"),
        ({"depends_on": ["not/an/id"]}, "dependency 'not/an/id' is not a session id"),
        ({"starts_at": datetime(2026, 12, 1, 9)}, "field 'spec.starts_at': input should have"),
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


def test_batch_and_cluster_input_becomes_the_spec() -> None:
    starts = datetime(2026, 12, 1, 9, tzinfo=UTC)
    command = create_session_command(
        raw(
            cluster_size=4,
            cluster_mode="multi-node",
            depends_on=["s-1", "s-2"],
            starts_at=starts,
            timeout_s=3600,
            gpu="1",
            requeue_on_node_loss=True,
        ),
        actor=ACTOR,
        tenant=SYSTEM_TENANT,
        command_id=None,
    )
    spec = command.spec
    assert len(spec.kernels) == 4
    assert {k.resources.gpu_hundredths for k in spec.kernels} == {100}  # each kernel's
    assert spec.total.gpu_hundredths == 400
    assert spec.cluster_mode is ClusterMode.MULTI_NODE
    assert (spec.depends_on, spec.starts_at, spec.timeout_s) == (("s-1", "s-2"), starts, 3600)
    assert spec.requeue_on_node_loss is True


def test_left_out_batch_fields_take_the_defaults() -> None:
    spec = create_session_command(
        raw(cluster_size=None, cluster_mode=None, depends_on=None, starts_at=None, timeout_s=None),
        actor=ACTOR,
        tenant=SYSTEM_TENANT,
        command_id=None,
    ).spec
    assert (len(spec.kernels), spec.cluster_mode, spec.depends_on) == (
        1,
        ClusterMode.SINGLE_NODE,
        (),
    )
    assert spec.requeue_on_node_loss is False
    assert (spec.starts_at, spec.timeout_s) == (None, None)
