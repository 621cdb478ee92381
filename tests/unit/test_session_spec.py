"""The session spec's batch fields (dependencies, start time, timeout) and cluster mode: what
is accepted, and a sentence naming what is wrong otherwise."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from pydantic import ValidationError

from commands.messages import CreateSession, explain
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.session import (
    MAX_DEPENDENCIES,
    ClusterMode,
    KernelStatus,
    SessionResult,
    SessionSpec,
    SessionStatus,
    SessionType,
    cluster_host,
    result_of,
)

BASE: dict[str, Any] = {
    "image": "python:3.12",
    "kernels": [{"resources": {"cpu_milli": 1000, "memory_bytes": 64 << 20}}],
}
S = SessionStatus


def spec(**fields: Any) -> SessionSpec:
    return SessionSpec.model_validate({**BASE, **fields})


def problem(**fields: Any) -> str:
    with pytest.raises(ValidationError) as raised:
        spec(**fields)
    return explain(raised.value)


def test_defaults_ask_for_nothing_extra() -> None:
    plain = spec()
    assert (plain.depends_on, plain.starts_at, plain.timeout_s) == ((), None, None)
    assert plain.cluster_mode is ClusterMode.SINGLE_NODE


def test_a_batch_session_with_everything() -> None:
    starts = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
    batch = spec(
        type="batch",
        depends_on=["s-1", "s-2"],
        starts_at=starts.isoformat(),
        timeout_s=600,
        cluster_mode="multi-node",
        kernels=[{"resources": {"cpu_milli": 1000}}] * 3,
    )
    assert batch.type is SessionType.BATCH
    assert batch.depends_on == ("s-1", "s-2")
    assert (batch.starts_at, batch.timeout_s) == (starts, 600)
    assert batch.cluster_mode is ClusterMode.MULTI_NODE
    assert len(batch.kernels) == 3
    # As it travels in SessionRequested: JSON and back.
    assert SessionSpec.model_validate_json(batch.model_dump_json()) == batch


def test_an_interactive_session_may_wait_for_others_and_for_a_time() -> None:
    waiting = spec(depends_on=["s-1"], starts_at="2026-12-01T09:00:00+00:00")
    assert waiting.type is SessionType.INTERACTIVE


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"timeout_s": 60}, "timeout_s applies to batch sessions only, not to interactive ones"),
        ({"type": "batch", "timeout_s": 0}, "field 'timeout_s': input should be greater than 0"),
        ({"type": "batch", "timeout_s": -5}, "input should be greater than 0"),
        ({"type": "batch", "timeout_s": 10**12}, "field 'timeout_s': input should be less"),
        ({"depends_on": ["s-1", "s-1"]}, "dependency 's-1' is named more than once"),
        ({"depends_on": ["no spaces"]}, "dependency 'no spaces' is not a session id"),
        ({"depends_on": [""]}, "dependency '' is not a session id"),
        (
            {"depends_on": [f"s-{i}" for i in range(MAX_DEPENDENCIES + 1)]},
            f"at most {MAX_DEPENDENCIES} dependencies, got {MAX_DEPENDENCIES + 1}",
        ),
        ({"starts_at": "2026-12-01T09:00:00"}, "field 'starts_at': input should have timezone"),
        ({"starts_at": "tomorrow"}, "field 'starts_at'"),
        ({"cluster_mode": "everywhere"}, "field 'cluster_mode'"),
    ],
)
def test_bad_batch_fields_are_named(fields: dict[str, Any], message: str) -> None:
    assert message in problem(**fields)


def test_sixteen_dependencies_are_fine() -> None:
    many = [f"s-{i}" for i in range(MAX_DEPENDENCIES)]
    assert spec(depends_on=many).depends_on == tuple(many)


def test_a_command_carries_the_new_fields_and_still_refuses_unknown_ones() -> None:
    actor = Actor.service("tests")
    good = {**BASE, "type": "batch", "depends_on": ["s-1"], "timeout_s": 30}
    command = CreateSession(actor=actor, tenant=SYSTEM_TENANT, spec=SessionSpec(**good))
    assert command.spec.timeout_s == 30
    with pytest.raises(ValidationError, match=r"unknown field 'spec\.timeout'"):
        CreateSession.model_validate(
            {"actor": actor, "tenant": SYSTEM_TENANT, "spec": {**BASE, "timeout": 30}}
        )


@pytest.mark.parametrize(
    ("status", "exit_code", "expected"),
    [
        (S.TERMINATED, 0, SessionResult.SUCCESS),
        (S.TERMINATED, 3, SessionResult.FAILURE),
        (S.TERMINATED, -1, SessionResult.FAILURE),
        (S.TERMINATED, None, None),
        (S.ERROR, None, SessionResult.FAILURE),
        (S.CANCELLED, None, None),
        (S.RUNNING, None, None),
        (S.TERMINATING, None, None),
        (S.PENDING, None, None),
    ],
)
def test_result_of(status: SessionStatus, exit_code: int | None, expected: object) -> None:
    assert result_of(status, exit_code) == expected


def test_cluster_hosts_and_kernel_statuses() -> None:
    assert [cluster_host(i) for i in range(3)] == ["main1", "sub1", "sub2"]
    assert {k for k in KernelStatus if k.has_ended} == {KernelStatus.TERMINATED, KernelStatus.ERROR}
