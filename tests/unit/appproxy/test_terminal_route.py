"""The terminal as a route: every running session's main kernel, at the terminal endpoint of the
agent that started it (its latest registration); none before that, none after the end."""

from __future__ import annotations

from events.catalogue import Event
from events.domain.agent import AgentRegistered, KernelStarted
from events.domain.session import SessionRequested, SessionStarted, SessionTerminating
from events.envelope import StoredEvent
from events.writes import AggregateRef
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from schemas.terminal_tokens import TERMINAL
from services.appproxy.routes import Route, RouteTable
from tests.support import envelope

SID = "s1"
SPEC = SessionSpec(image="i:1", kernels=(KernelSpec(resources=ResourceSlots.of(cpu="1")),) * 2)
OWNER = SessionOwner(access_key="AK", user_id="alice", project_id="p", domain="d")
STARTED = SessionStarted(reason="started")


def registered(url: str) -> AgentRegistered:
    return AgentRegistered(epoch=1, hostname="h", backend="docker",
                           capacity=ResourceSlots.of(cpu="1"), terminal_url=url)  # fmt: skip


def fold(*events: tuple[str, Event]) -> RouteTable:
    """Each event with the node that wrote it ("" for the session's own events)."""
    table = RouteTable()
    for seq, (node, e) in enumerate(events, 1):
        ref = AggregateRef(AggregateType.AGENT, node) if node else AggregateRef(
            AggregateType.SESSION, SID)  # fmt: skip
        env = envelope(ref, seq, name=e.event_name, payload=e.model_dump(mode="json"))
        assert table.apply(StoredEvent(seq=seq, envelope=env))
        assert not table.broken
    return table


def kernel_started(kernel: str) -> KernelStarted:
    return KernelStarted(kernel_id=kernel, session_id=SID, container_id="c")


REQUESTED = ("", SessionRequested(spec=SPEC, kernel_ids=("k1", "k2"), owner=OWNER))


def test_the_main_kernels_agent_serves_the_terminal() -> None:
    table = fold(
        ("n1", registered("ws://a:1")), ("n2", registered("ws://b:2")), REQUESTED,
        ("n2", kernel_started("k2")), ("n1", kernel_started("k1")), ("", STARTED),
    )  # fmt: skip

    assert table.route(SID, TERMINAL) == Route(SID, "k1", TERMINAL, "ws://a:1", "alice", "d", False)


def test_no_terminal_before_running_without_an_endpoint_or_after_the_end() -> None:
    before = fold(("n1", registered("ws://a:1")), REQUESTED, ("n1", kernel_started("k1")))
    none_served = fold(("n1", registered("")), REQUESTED, ("n1", kernel_started("k1")),
                       ("", STARTED))  # fmt: skip
    ended = fold(("n1", registered("ws://a:1")), REQUESTED, ("n1", kernel_started("k1")),
                 ("", STARTED), ("", SessionTerminating(reason="user")))  # fmt: skip

    assert before.route(SID, TERMINAL) is None
    assert none_served.route(SID, TERMINAL) is None
    assert ended.route(SID, TERMINAL) is None and SID in ended.ended and not ended.nodes


def test_a_reregistration_moves_the_endpoint() -> None:
    table = fold(("n1", registered("ws://a:1")), REQUESTED, ("n1", kernel_started("k1")),
                 ("", STARTED), ("n1", registered("ws://a:9")))  # fmt: skip

    route = table.route(SID, TERMINAL)
    assert route is not None and route.upstream == "ws://a:9"
