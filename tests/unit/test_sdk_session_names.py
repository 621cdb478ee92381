"""How a person names a session to the SDK and the CLI (``jetyard.sdk.sessions.named``): its
id, its name, or a unique prefix of its id of 8+ characters; an ambiguous one lists the
candidates. And how a listing says a session ended (``SessionSummary.ended_as``, from the API's
``result``): one whose end was asked for is ``terminated``, not ``failed``."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from jetyard.sdk.errors import JetyardError
from jetyard.sdk.models import SessionSummary
from jetyard.sdk.sessions import named

AT = datetime(2026, 1, 1, tzinfo=UTC)


def session(
    id: str, name: str | None = None, status: str = "RUNNING", **more: Any
) -> SessionSummary:
    return SessionSummary.model_validate({
        "id": id, "name": name, "status": status, "statusReason": more.pop("reason", ""),
        "type": "interactive", "image": "i:1",
        "resources": {"cpu": "1", "memoryBytes": "1", "gpu": "0"}, "kernelIds": [id],
        "clusterSize": 1, "createdAt": AT, "updatedAt": AT, "seq": 1, **more,
    })  # fmt: skip


A = session("0b489e70-1111-4aaa-8aaa-000000000001", "train")
B = session("0b489e70-2222-4bbb-8bbb-000000000002", "eval")
C = session("c899eb13-3333-4ccc-8ccc-000000000003", "train", status="TERMINATED")
D = session("d0000000-4444-4ddd-8ddd-000000000004", "sweep", status="TERMINATED")
E = session("e0000000-5555-4eee-8eee-000000000005", "sweep", status="CANCELLED")
ALL = [A, B, C, D, E]


@pytest.mark.parametrize(
    ("ref", "found"),
    [
        (A.id, A),
        ("c899eb13", C),  # the 8 characters reasons print
        ("0b489e70-1", A),
        ("eval", B),
        ("train", A),  # shared with an ended session: the live one
    ],
)
def test_an_id_a_name_or_a_unique_prefix_names_a_session(ref: str, found: SessionSummary) -> None:
    assert named(ref, ALL) == found


def test_an_ambiguous_prefix_or_name_lists_the_candidates() -> None:
    with pytest.raises(JetyardError, match="names 2 sessions") as prefix:
        named("0b489e70", ALL)
    assert prefix.value.code == "ambiguous"
    assert A.id in str(prefix.value) and B.id in str(prefix.value) and "eval" in str(prefix.value)

    with pytest.raises(JetyardError, match="names 2 sessions") as name:
        named("sweep", ALL)  # neither live: no way to choose
    assert D.id in str(name.value) and E.id in str(name.value)


def test_a_prefix_shorter_than_8_or_naming_nothing_is_not_found() -> None:
    with pytest.raises(JetyardError, match="8 characters") as short:
        named("0b489e7", ALL)
    assert short.value.code == "not-found"
    with pytest.raises(JetyardError, match="there is no session ffffffff"):
        named("ffffffff", ALL)


@pytest.mark.parametrize(
    ("status", "exit_code", "result", "ended"),
    [
        ("RUNNING", None, None, None),
        ("TERMINATED", 143, "terminated", "terminated"),  # asked to end: the stop's code
        ("TERMINATED", None, "terminated", "terminated"),
        ("TERMINATED", 0, "terminated", "terminated"),  # it handled the stop and exited 0
        ("TERMINATED", 143, "failure", "failed (exit 143)"),  # killed by something else
        ("TERMINATED", 137, "failure", "failed (exit 137)"),
        ("TERMINATED", 0, "success", "succeeded"),
        ("TERMINATED", None, None, "stopped"),
        ("CANCELLED", None, None, "cancelled"),
        ("ERROR", None, "failure", "failed"),
    ],
)
def test_how_a_session_ended(
    status: str, exit_code: int | None, result: str | None, ended: str | None
) -> None:
    shown = session("s", status=status, exitCode=exit_code, result=result)

    assert shown.ended_as == ended
    assert shown.as_json()["endedAs"] == ended
