"""Command models: strict at the edge, frozen, and routed by subject."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from commands.messages import (
    CreateSession,
    TerminateSession,
    UnknownCommandError,
    command_class,
    explain,
    parse_command,
)
from commands.outcome import Accepted, Code, Outcome, OutcomeStatus, Rejected
from schemas.principal import SYSTEM_TENANT, Actor, ActorKind
from schemas.session import SessionSpec

ACTOR = Actor(kind=ActorKind.USER, id="u-1")
SPEC = {
    "image": "python:3.12",
    "kernels": [{"resources": {"cpu_milli": 1000, "memory_bytes": 64 << 20}}],
}


def create(**overrides: object) -> CreateSession:
    fields: dict[str, object] = {"actor": ACTOR, "tenant": SYSTEM_TENANT, "spec": SPEC}
    return CreateSession.model_validate(fields | overrides)


def test_unknown_field_is_rejected_at_the_edge_at_any_depth() -> None:
    with pytest.raises(ValidationError, match="unknown field 'colour'"):
        create(colour="blue")
    typo = {"image": "python:3.12", "imag": "x", "kernels": [{"resources": {"gpus": 1}}]}
    with pytest.raises(ValidationError) as raised:
        create(spec=typo)
    assert explain(raised.value) == (
        "CreateSession is not valid: unknown fields 'spec.imag', 'spec.kernels[0].resources.gpus'"
    )
    with pytest.raises(ValidationError, match=r"unknown field '\{x\}'"):
        create(**{"{x}": 1})


def test_a_parsed_spec_is_accepted_as_is() -> None:
    spec = SessionSpec.model_validate(SPEC)
    assert create(spec=spec).spec is spec


def test_commands_are_frozen() -> None:
    cmd = create()
    with pytest.raises(ValidationError):
        cmd.command_id = "other"  # type: ignore[misc]


def test_negative_memory_is_rejected_by_resource_slots() -> None:
    spec = {**SPEC, "kernels": [{"resources": {"memory_bytes": -1}}]}
    with pytest.raises(ValidationError, match="memory_bytes"):
        create(spec=spec)


def test_command_id_defaults_to_a_new_token_and_must_be_a_token() -> None:
    assert create().command_id != create().command_id
    with pytest.raises(ValidationError, match="not a valid id"):
        create(command_id="has.dots")


def test_subjects_and_registry() -> None:
    assert CreateSession.subject() == "cmd.session.create"
    assert TerminateSession.subject() == "cmd.session.terminate"
    assert command_class("cmd.session.create") is CreateSession
    for subject in ("cmd.session.fly", "cmd.nothing.create", "ev.session.create", "cmd.session"):
        with pytest.raises(UnknownCommandError):
            command_class(subject)


def test_parse_round_trips_the_wire_form() -> None:
    cmd = TerminateSession(actor=ACTOR, tenant=SYSTEM_TENANT, session_id="s-1")
    parsed = parse_command(cmd.subject(), cmd.model_dump_json().encode())
    assert parsed == cmd
    assert parsed.reason == "user request"


def test_cause_carries_the_command_id_and_the_principal() -> None:
    cmd = create()
    cause = cmd.cause()
    assert (cause.causation_id, cause.correlation_id) == (cmd.command_id, cmd.command_id)
    assert (cause.actor, cause.tenant) == (ACTOR, SYSTEM_TENANT)
    assert create(correlation_id="flow-1").cause().correlation_id == "flow-1"


def test_outcome_has_a_code_exactly_when_rejected() -> None:
    now = datetime(2026, 1, 1, tzinfo=UTC)
    accepted = Outcome.of("c-1", Accepted(("s-1",), (7,)), now)
    assert accepted.accepted
    assert (accepted.code, accepted.event_seqs) == (None, (7,))
    rejected = Outcome.of("c-2", Rejected(Code.NOT_FOUND, "no such session"), now)
    assert (rejected.status, rejected.code) == (OutcomeStatus.REJECTED, "not-found")
    with pytest.raises(ValidationError, match="needs a code"):
        Outcome(command_id="c-3", status=OutcomeStatus.REJECTED, message="?", decided_at=now)
    with pytest.raises(ValidationError):
        Outcome.of("c-4", Accepted(), datetime(2026, 1, 1))  # naive time
