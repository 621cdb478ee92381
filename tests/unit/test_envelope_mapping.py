"""Aggregates to envelopes and back: wire names only, ids from the cause, explicit times,
equal state after a round trip (through JSON and through snapshots), and loading."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from eventsourcing.domain import OriginatorVersionError

from commands.activity import Activity, record
from commands.agent import Agent
from commands.aggregate import Aggregate
from commands.correction import Correction
from commands.folders.aggregate import VFolder
from commands.join_token import JoinToken
from commands.node.aggregate import Node
from commands.quota import Quota
from commands.registry import Registry
from commands.repository import Loaded, load, pending_write
from commands.serving.aggregate import Endpoint
from commands.session.aggregate import Session
from commands.tenancy import (
    Domain,
    Image,
    Keypair,
    Project,
    ResourceGroup,
    ResourcePolicy,
    User,
)
from events.catalogue import CATALOGUE, UnknownEventError
from events.domain.activity import ActivityReport
from events.envelope import Envelope, StoredEvent
from events.snapshots import Snapshot
from events.writes import AggregateRef, History
from schemas.activity import ActivitySource
from schemas.ids import event_id_for, kernel_id_for
from schemas.resources import ResourceSlots
from schemas.service_ports import PortProtocol, PortState, ReportedPort
from schemas.session import KernelSpec, SessionSpec
from tests.unit.scenario import CAUSE, T0, at

SPEC = SessionSpec(image="busybox", kernels=(KernelSpec(resources=ResourceSlots.of(cpu=1)),))
KID = kernel_id_for("s-1", 0)
JUPYTER = ReportedPort(
    name="jupyter", protocol=PortProtocol.HTTP, port=8080, address="10.0.0.2:8080",
    state=PortState.OPEN,
)  # fmt: skip


def a_session() -> Session:
    session = Session.request("s-1", SPEC, at(0))
    session.note_pending_reason("fits nowhere: cpu", at(1))
    session.schedule({KID: "n-1"}, "placed", at(2))
    session.kernel_started(KID, at(3))
    return session


def a_node() -> Node:
    node = Node.register("n-1", "gpu-01", "default", ResourceSlots.of(cpu=8, gpu=2), at(0))
    node.allocate(KID, "s-1", ResourceSlots.of(cpu=1, gpu="0.25"), at(1))
    node.allocate("k-2", "s-2", ResourceSlots.of(cpu=2), at(2))
    node.release("k-2", "ended", at(3))
    node.cordon("maintenance", at(4))
    return node


def an_agent() -> Agent:
    agent = Agent.register(
        "a-1",
        epoch=1,
        hostname="gpu-01",
        backend="simulated",
        capacity=ResourceSlots.of(cpu=8),
        images=["busybox"],
        now=at(0),
    )
    agent.kernel_started(KID, "s-1", "c-1", at(1))
    agent.report_service_ports(KID, [JUPYTER], at(2))
    agent.reregister(
        epoch=2, hostname="gpu-01", backend="simulated", capacity=ResourceSlots.of(cpu=8), now=at(3)
    )
    return agent


def an_activity() -> Activity:
    first = ActivityReport(session_id="s-1", kernel_id=KID, source=ActivitySource.OUTPUT, at=at(0))
    later = ActivityReport(session_id="s-1", source=ActivitySource.TERMINAL, at=at(1))
    activity = record(None, "a-1", [first], at(0))
    record(activity, "a-1", [later, first], at(1))
    return activity


BUILDERS: list[Callable[[], Aggregate]] = [a_session, a_node, an_agent, an_activity]
ids = pytest.mark.parametrize("build", BUILDERS, ids=["session", "node", "agent", "activity"])


def wire(envelopes: list[Envelope]) -> list[Envelope]:
    """Through JSON and back, as the store does."""
    return [Envelope.model_validate_json(e.model_dump_json()) for e in envelopes]


@ids
def test_collect_fills_the_envelope_from_the_event_and_the_cause(
    build: Callable[[], Aggregate],
) -> None:
    aggregate = build()
    envelopes = aggregate.collect(CAUSE)

    assert [e.aggregate_version for e in envelopes] == list(range(1, aggregate.version + 1))
    assert [e.occurred_at for e in envelopes] == [at(i) for i in range(len(envelopes))]
    for e in envelopes:
        kind = CATALOGUE.event_class(e.name)
        assert e.event_id == event_id_for(
            "cmd-1", aggregate.aggregate_type, aggregate.id, e.aggregate_version
        )
        assert (e.aggregate_type, e.aggregate_id) == (aggregate.aggregate_type, aggregate.id)
        assert (e.schema_version, kind.aggregate_type) == (kind.schema_version, e.aggregate_type)
        assert (e.causation_id, e.correlation_id) == ("cmd-1", "corr-1")
        assert (e.actor, e.tenant) == (CAUSE.actor, CAUSE.tenant)
        assert set(e.payload) == set(kind.model_fields)
    assert aggregate.collect(CAUSE) == []  # nothing stays pending


@ids
def test_no_python_path_reaches_the_wire(build: Callable[[], Aggregate]) -> None:
    text = json.dumps([e.model_dump(mode="json") for e in build().collect(CAUSE)])

    for leak in ("originator", "commands.", "events.", "__main__", ":Session", ":Node", ":Agent"):
        assert leak not in text


@ids
def test_collect_then_rehydrate_gives_an_equal_aggregate(build: Callable[[], Aggregate]) -> None:
    aggregate = build()
    envelopes = wire(aggregate.collect(CAUSE))

    again = type(aggregate).rehydrate(envelopes)

    assert again == aggregate
    assert again is not None
    assert again.state() == aggregate.state()


@ids
def test_the_same_cause_gives_the_same_event_ids(build: Callable[[], Aggregate]) -> None:
    first = [e.event_id for e in build().collect(CAUSE)]
    again = [e.event_id for e in build().collect(CAUSE)]
    other = [e.event_id for e in build().collect(CAUSE.model_copy(update={"causation_id": "x"}))]

    assert first == again
    assert not set(first) & set(other)


@ids
def test_a_snapshot_round_trip_gives_an_equal_aggregate(build: Callable[[], Aggregate]) -> None:
    aggregate = build()
    aggregate.collect(CAUSE)

    snapshot = Snapshot.model_validate_json(aggregate.snapshot(41, at(99)).model_dump_json())
    restored = type(aggregate).from_snapshot(snapshot)

    assert (snapshot.seq, snapshot.version, snapshot.taken_at) == (41, aggregate.version, at(99))
    assert restored == aggregate


def test_a_snapshot_plus_later_events_equals_a_full_replay() -> None:
    session = a_session()
    envelopes = wire(session.collect(CAUSE))
    early = Session.rehydrate(envelopes[:2])
    assert early is not None

    later = Session.rehydrate(envelopes, snapshot=early.snapshot(2, at(9)))

    assert later == session


def test_a_follower_evolves_with_the_events_it_has_not_applied_yet() -> None:
    session = a_session()
    envelopes = wire(session.collect(CAUSE))
    follower = Session.rehydrate(envelopes[:1])
    assert follower is not None

    follower.evolve(envelopes)  # the first one again is an echo: skipped

    assert follower == session


def test_a_snapshot_is_refused_while_events_are_pending() -> None:
    with pytest.raises(ValueError, match="undecided"):
        a_session().snapshot(1, T0)


def test_a_snapshot_of_another_aggregate_type_is_refused() -> None:
    node = a_node()
    node.collect(CAUSE)

    with pytest.raises(ValueError, match="cannot restore"):
        Session.from_snapshot(node.snapshot(5, T0))


def test_nothing_to_rehydrate_is_no_aggregate() -> None:
    assert Session.rehydrate([]) is None


def test_a_history_must_start_with_a_creating_event() -> None:
    envelopes = a_session().collect(CAUSE)

    with pytest.raises(UnknownEventError, match="cannot start a Session"):
        Session.rehydrate(envelopes[1:])


def test_events_of_another_aggregate_type_are_refused() -> None:
    with pytest.raises(ValueError, match="node"):
        Session.rehydrate(a_node().collect(CAUSE))


def test_a_gap_in_the_versions_is_refused() -> None:
    envelopes = a_session().collect(CAUSE)

    with pytest.raises(OriginatorVersionError):
        Session.rehydrate([envelopes[0], envelopes[2]])


def test_every_catalogue_event_belongs_to_exactly_one_aggregate() -> None:
    aggregates = (
        Session, Node, Agent, Quota, Domain, Project, User, Keypair, ResourcePolicy,
        ResourceGroup, Image, Registry, JoinToken, Correction, VFolder, Activity, Endpoint,
    )  # fmt: skip
    mapped = [name for cls in aggregates for name in {*cls.creators, *cls.events_by_name}]

    assert sorted(mapped) == CATALOGUE.names()


# ---- repository ---------------------------------------------------------------------------


class FakeStore:
    """The reading side of EventStore over a list of envelopes at stream sequences."""

    def __init__(self, stored: list[StoredEvent]) -> None:
        self.stored = stored
        self.reads: list[tuple[AggregateRef, int]] = []

    async def read(self, aggregate: AggregateRef, *, after_seq: int = 0) -> History:
        self.reads.append((aggregate, after_seq))
        events = [
            s for s in self.stored if s.seq > after_seq and s.envelope.subject == aggregate.subject
        ]
        return History(aggregate, events, events[-1].seq if events else after_seq)


class FakeSnapshots:
    def __init__(self, snapshot: Snapshot | None) -> None:
        self.snapshot = snapshot

    async def load(self, aggregate: AggregateRef) -> Snapshot | None:
        return self.snapshot


def stored_session() -> tuple[Session, list[StoredEvent]]:
    session = a_session()
    # Other aggregates' events sit between this one's in the stream.
    return session, [StoredEvent(10 * i, e) for i, e in enumerate(session.collect(CAUSE), 1)]


async def test_load_reads_the_aggregate_once() -> None:
    session, stored = stored_session()
    store = FakeStore(stored)

    loaded = await load(store, Session, "s-1")

    assert loaded == Loaded(session, 40)
    assert store.reads == [(session.ref, 0)]


async def test_load_starts_from_the_snapshot_and_reads_only_what_follows() -> None:
    session, stored = stored_session()
    early = Session.rehydrate(s.envelope for s in stored[:2])
    assert early is not None
    store = FakeStore(stored)

    loaded = await load(store, Session, "s-1", FakeSnapshots(early.snapshot(20, at(9))))

    assert loaded == Loaded(session, 40)
    assert store.reads == [(session.ref, 20)]


async def test_load_of_a_missing_aggregate_is_none_at_zero() -> None:
    assert await load(FakeStore([]), Session, "nobody") == Loaded(None, 0)


def test_a_new_aggregate_is_written_as_a_creation() -> None:
    write = pending_write((a_session(), 0), CAUSE)

    assert write is not None
    assert (write.expected_seq, len(write.events)) == (0, 4)


async def test_a_decision_on_a_loaded_aggregate_is_guarded_by_its_last_sequence() -> None:
    _, stored = stored_session()
    loaded = await load(FakeStore(stored), Session, "s-1")
    assert loaded.aggregate is not None
    loaded.aggregate.terminate("user request", at(10))

    write = pending_write(loaded, CAUSE)

    assert write is not None
    assert (write.aggregate, write.expected_seq) == (loaded.aggregate.ref, 40)
    assert [e.aggregate_version for e in write.events] == [5]


async def test_a_command_that_changed_nothing_writes_nothing() -> None:
    _, stored = stored_session()
    loaded = await load(FakeStore(stored), Session, "s-1")
    assert loaded.aggregate is not None
    loaded.aggregate.kernel_started(KID, at(10))  # already running: no event

    assert pending_write(loaded, CAUSE) is None
