"""The route table as a fold: given a session's and its agent's events, which routes exist."""

from __future__ import annotations

from events.catalogue import Event
from events.domain.agent import KernelServicePortsReported
from events.domain.session import (
    SessionFailed,
    SessionRequested,
    SessionRequeued,
    SessionStarted,
    SessionTerminating,
)
from events.envelope import StoredEvent
from events.writes import AggregateRef
from schemas.resources import ResourceSlots
from schemas.service_ports import PortProtocol, PortState, ReportedPort
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from services.appproxy.routes import Ended, Route, RouteTable
from tests.support import envelope

SID = "s1"
SPEC = SessionSpec(image="i:1", kernels=(KernelSpec(resources=ResourceSlots.of(cpu="1")),) * 2)
OWNER = SessionOwner(access_key="AK", user_id="alice", project_id="p", domain="d")


def port(name: str, at: str, state: PortState = PortState.OPEN, *, protocol: str = "http",
         public: bool = False) -> ReportedPort:  # fmt: skip
    return ReportedPort(name=name, protocol=PortProtocol(protocol), port=80, address=at,
                        state=state, public=public)  # fmt: skip


def fold(*events: Event) -> RouteTable:
    table = RouteTable()
    for seq, e in enumerate(events, 1):
        if isinstance(e, KernelServicePortsReported):
            ref = AggregateRef(AggregateType.AGENT, f"node-{seq}")
        else:
            ref = AggregateRef(AggregateType.SESSION, SID)
        env = envelope(ref, seq, name=e.event_name, payload=e.model_dump(mode="json"))
        assert table.apply(StoredEvent(seq=seq, envelope=env))
        assert not table.broken
    return table


def requested(*kernels: str) -> SessionRequested:
    return SessionRequested(spec=SPEC, kernel_ids=kernels, owner=OWNER)


def report(kernel: str, *ports: ReportedPort) -> KernelServicePortsReported:
    return KernelServicePortsReported(kernel_id=kernel, session_id=SID, ports=ports)


STARTED = SessionStarted(reason="started")


def test_an_open_http_app_of_a_running_session_is_a_route() -> None:
    table = fold(requested("k1"), report("k1", port("web", "10.0.0.2:80", public=True)), STARTED)

    assert table.route(SID, "web") == Route(SID, "k1", "web", "10.0.0.2:80", "alice", "d", True)
    assert len(table.routes()) == 1


def test_no_route_before_running_nor_for_closed_or_non_http_apps() -> None:
    ports = (port("web", "a:1"), port("dead", "a:2", PortState.NEVER_OPENED),
             port("ssh", "a:3", protocol="tcp"))  # fmt: skip

    assert fold(requested("k1"), report("k1", *ports)).route(SID, "web") is None
    running = fold(requested("k1"), report("k1", *ports), STARTED)
    assert [r.app for r in running.routes()] == ["web"]


def test_the_main_kernels_app_wins() -> None:
    table = fold(
        requested("main", "sub"),
        report("sub", port("web", "sub:80")),
        report("main", port("web", "main:80")),
        STARTED,
    )

    route = table.route(SID, "web")
    assert route is not None and route.upstream == "main:80"


def test_an_ending_session_loses_its_routes_and_is_remembered() -> None:
    for ending in (SessionTerminating(reason="asked"), SessionFailed(reason="lost")):
        table = fold(requested("k1"), STARTED, report("k1", port("web", "a:1")), ending)

        assert table.route(SID, "web") is None
        assert SID in table.ended
        assert table.routes() == []


def test_a_requeued_session_forgets_its_old_kernels_apps() -> None:
    requeued = SessionRequeued(reason="node lost", kernel_ids=("k2",), attempt=1)
    table = fold(requested("k1"), STARTED, report("k1", port("web", "a:1")), requeued)
    assert table.route(SID, "web") is None

    table.apply(StoredEvent(seq=99, envelope=envelope(
        AggregateRef(AggregateType.SESSION, SID), 5, name=STARTED.event_name,
        payload=STARTED.model_dump(mode="json"))))  # fmt: skip
    assert table.route(SID, "web") is None  # k1's report is gone; k2 has not reported


def _fold_sessions(*steps: tuple[str, Event]) -> RouteTable:
    table = RouteTable()
    for seq, (sid, e) in enumerate(steps, 1):
        kind = AggregateType.AGENT if isinstance(e, KernelServicePortsReported) else None
        ref = AggregateRef(kind or AggregateType.SESSION, f"node-{seq}" if kind else sid)
        env = envelope(ref, seq, name=e.event_name, payload=e.model_dump(mode="json"))
        assert table.apply(StoredEvent(seq=seq, envelope=env))
    return table


def _opened(sid: str, *apps: str) -> list[tuple[str, Event]]:
    reported = KernelServicePortsReported(
        kernel_id=f"k-{sid}", session_id=sid, ports=tuple(port(a, "h:1") for a in apps)
    )
    return [(sid, requested(f"k-{sid}")), (sid, STARTED), (sid, reported)]


def test_port_mode_slots_are_the_lowest_free_in_log_order_and_freed_at_the_end() -> None:
    """Every replica folding the same log gives every app the same port."""
    steps = [*_opened("a", "web", "jupyter"), *_opened("b", "web")]
    table = _fold_sessions(*steps)
    assert table.slots == {("a", "jupyter"): 0, ("a", "web"): 1, ("b", "web"): 2}
    assert table.at_slot(2) == ("b", "web")

    ended = _fold_sessions(*steps, ("a", SessionFailed(reason="x")), *_opened("c", "app"))
    assert ended.slots == {("b", "web"): 2, ("c", "app"): 0}
    assert ended.at_slot(1) is None and ended.at_slot(0) == ("c", "app")
    # A closed or non-HTTP port takes no slot; a second report keeps the slots it has.
    closed = KernelServicePortsReported(kernel_id="k-b", session_id="b", ports=(
        port("web", "h:1"), port("ssh", "h:2", protocol="tcp"),
        port("tb", "h:3", PortState.NEVER_OPENED)))  # fmt: skip
    again = _fold_sessions(*steps, ("b", closed))
    assert again.slots == table.slots


def test_ended_sessions_are_remembered_up_to_a_bound_oldest_forgotten_first() -> None:
    ended = Ended(kept=3)
    for sid in ("a", "b", "c", "d"):
        ended.add(sid)
    assert "a" not in ended and all(s in ended for s in "bcd") and len(ended) == 3
