"""The pure parts of the operators' queries: how ``eventLog`` shows an event (env values hidden
at any depth, the actor as kind:id), how ``clusterChanges`` sums up a batch of the log (the
nodes named, sessions counted), which ``cluster`` pictures are reused (one caller's, at one log
position and queue board, a few, for a while; their node rows while the directory stays), and
the ordinals the queue's words use."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any, cast

from commands.authorisation import Principal
from events.direct import RawMessage
from events.domain.node import ResourcesAllocated
from events.envelope import Envelope
from schemas.principal import Actor, ActorKind, Tenant
from schemas.resources import ResourceSlots
from schemas.subjects import AggregateType
from schemas.tenancy import Role
from services.gateway.audit.queries import HIDDEN, logged, redact
from services.gateway.cluster.notes import ordinal
from services.gateway.cluster.snapshot import Pictures
from services.gateway.cluster.subscriptions import Gathered
from services.gateway.context import Context
from services.gateway.core.usage_views import UsageViews


def test_env_values_are_hidden_wherever_they_are_and_their_names_kept() -> None:
    payload = {
        "spec": {"env": {"TOKEN": "s3cret", "HOME": "/root"}, "image": "busybox"},
        "kernels": [{"env": {"KEY": "v"}}],
        "reason": "env",
        "env": "not a mapping",
    }
    assert redact(payload) == {
        "spec": {"env": {"TOKEN": HIDDEN, "HOME": HIDDEN}, "image": "busybox"},
        "kernels": [{"env": {"KEY": HIDDEN}}],
        "reason": "env",
        "env": "not a mapping",
    }


def test_an_event_is_shown_with_its_place_version_actor_and_hidden_env() -> None:
    allocated = ResourcesAllocated(
        kernel_id="k1", session_id="s1", slots=ResourceSlots.of(cpu="1", memory=1 << 30),
        env={"PASSWORD": "pw"},
    )  # fmt: skip
    env = Envelope(
        event_id="e1", name=allocated.event_name, schema_version=allocated.schema_version,
        aggregate_type=AggregateType.NODE, aggregate_id="n1", aggregate_version=7,
        occurred_at=datetime(2026, 3, 1, tzinfo=UTC), causation_id="c1", correlation_id="r1",
        actor=Actor(kind=ActorKind.KEYPAIR, id="AKX"), tenant=Tenant(domain="default"),
        payload=allocated.model_dump(mode="json"),
    )  # fmt: skip
    shown = logged(
        RawMessage(seq=42, subject="ev.node.n1", data=env.model_dump_json().encode(), headers={})
    )
    assert (shown.seq, shown.name, shown.version, shown.actor) == (
        42, "ResourcesAllocated", 7, "keypair:AKX",
    )  # fmt: skip
    assert (shown.event_id, shown.causation_id, shown.correlation_id) == ("e1", "c1", "r1")
    payload = cast(dict[str, Any], shown.payload)
    assert payload["env"] == {"PASSWORD": HIDDEN}
    assert payload["kernel_id"] == "k1"


def test_a_tick_names_its_nodes_and_agents_once_and_counts_sessions() -> None:
    def message(seq: int, subject: str) -> RawMessage:
        return RawMessage(seq=seq, subject=subject, data=b"", headers={})

    came = Gathered()
    came.add([])
    assert not came and came.seq == 0
    came.add([message(1, "ev.node.n1"), message(2, "ev.session.s1"), message(3, "ev.agent.n2")])
    came.add([message(7, "ev.node.n1"), message(9, "ev.session.s2")])
    came.add([])  # an empty fetch keeps the last position
    assert (list(came.nodes), came.sessions, came.seq, came.queues) == (["n1", "n2"], 2, 9, False)
    assert Gathered(queues=True)  # a queue that moved alone is a change


def test_ordinals() -> None:
    words = [ordinal(n) for n in (1, 2, 3, 4, 11, 12, 13, 21, 22, 101, 111)]
    assert words == [
        "1st",
        "2nd",
        "3rd",
        "4th",
        "11th",
        "12th",
        "13th",
        "21st",
        "22nd",
        "101st",
        "111th",
    ]


def caller(user: str, role: Role = Role.ADMIN, domain: str = "d1") -> Principal:
    return Principal(user, role, domain, frozenset(), None)


def board_at(generation: int, directory: int = 5) -> Context:
    """A request's context as ``Pictures`` reads it: the queue board's generation and the
    directory's position."""
    return cast(Context, SimpleNamespace(
        services=SimpleNamespace(queues=SimpleNamespace(generation=generation)),
        directory=SimpleNamespace(position=directory),
    ))  # fmt: skip


NO_USAGE = cast(UsageViews, None)  # the pictures' kernels are never read here


def test_a_picture_is_reused_by_its_caller_at_its_position_only() -> None:
    kept, ctx = Pictures(NO_USAGE), board_at(1)
    admin = caller("u1")
    first = kept.of(7, ctx, admin)
    assert kept.of(7, ctx, caller("u1")) is first  # the same person again (another tab)
    others = [
        kept.of(8, ctx, admin),  # the views moved on
        kept.of(7, board_at(2), admin),  # a queue moved
        kept.of(7, ctx, caller("u2")),  # another admin of the domain (emails seen differ)
        kept.of(7, ctx, caller("u1", Role.MONITOR)),  # the same person, another role
        kept.of(7, ctx, caller("u1", domain="d2")),  # another domain
        kept.of(7, ctx, caller("u1", Role.SUPERADMIN)),
    ]
    assert len({id(p) for p in [first, *others]}) == 7


def test_pictures_are_few_and_short_lived() -> None:
    kept, ctx = Pictures(NO_USAGE, kept=2), board_at(1)
    first = kept.of(1, ctx, caller("u1"))
    kept.of(2, ctx, caller("u1"))
    kept.of(1, ctx, caller("u1"))  # used again: the newest
    kept.of(3, ctx, caller("u1"))  # the oldest (position 2) goes
    assert [key[0] for key in kept.entries] == [1, 3]
    assert kept.of(1, ctx, caller("u1")) is first
    expired = Pictures(NO_USAGE, kept_s=0.0)
    gone = expired.of(1, ctx, caller("u1"))
    assert expired.of(1, ctx, caller("u1")) is not gone


def test_a_callers_node_rows_outlive_pictures_until_the_directory_moves() -> None:
    kept = Pictures(NO_USAGE)
    rows = kept.of(1, board_at(1), caller("u1"))._rows
    assert kept.of(2, board_at(1), caller("u1"))._rows is rows  # the views moved on: kept
    assert kept.of(3, board_at(2), caller("u1"))._rows is rows  # a queue moved: kept
    assert kept.of(3, board_at(1), caller("u2"))._rows is not rows  # another caller's own
    renamed = kept.of(4, board_at(1, directory=6), caller("u1"))._rows
    assert renamed is not rows  # an email may have changed: built again
