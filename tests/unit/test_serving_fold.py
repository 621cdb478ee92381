"""What the serving controller folds, pure: an endpoint's events; its replicas' inference
sessions (pending, running since, ended and whether they could start); each replica's
``inference`` address; the CPU use its agent reports. Sessions of other types are ignored."""

from __future__ import annotations

from datetime import datetime

from events.catalogue import Event
from events.domain.activity import ActivityReport, SessionActivityReported
from events.domain.agent import KernelServicePortsReported
from events.domain.serving import EndpointCreated, ReplicaRequested
from events.domain.session import SessionFailed, SessionRequested, SessionStarted
from events.envelope import StoredEvent
from schemas.activity import ActivitySource
from schemas.resources import ResourceSlots
from schemas.service_ports import PortProtocol, PortState, ReportedPort
from schemas.serving import INFERENCE_APP, Revision, Scaling
from schemas.session import KernelSpec, SessionSpec, SessionType
from schemas.tenancy import SessionOwner
from services.serving.rules.reconcile import Phase
from services.serving.state import ServingState
from tests.unit.scenario import at, envelope_of

OWNER = SessionOwner(access_key="AK", user_id="u1", project_id="p1", domain="default")
SLOTS = ResourceSlots.of(cpu=1)
SPEC = Revision(image="echo:1", port=8000, resources=SLOTS)


class Log:
    """Feeds events to a state as the log would (one stream, sequences in order)."""

    def __init__(self, state: ServingState) -> None:
        self.state, self.seq, self.versions = state, 0, dict[str, int]()

    def add(self, aggregate_id: str, event: Event, when: datetime) -> None:
        self.seq += 1
        version = self.versions[aggregate_id] = self.versions.get(aggregate_id, 0) + 1
        envelope = envelope_of(aggregate_id, version, event, when)
        self.state.apply(StoredEvent(seq=self.seq, envelope=envelope))


def phase(state: ServingState, session_id: str) -> Phase:
    return state.sessions[session_id].phase


def session(kind: SessionType) -> SessionRequested:
    spec = SessionSpec(
        image="echo:1", type=kind, kernels=(KernelSpec(resources=SLOTS),),
        service_port=8000 if kind is SessionType.INFERENCE else None,
    )  # fmt: skip
    return SessionRequested(spec=spec, kernel_ids=("k1",), owner=OWNER)


def test_the_fold_follows_replicas_sessions_addresses_and_use() -> None:
    state = ServingState()
    woken: list[None] = []
    state.wake = lambda: woken.append(None)
    log = Log(state)
    created = EndpointCreated(name="echo", owner=OWNER, spec=SPEC, replicas=1, scaling=Scaling())
    log.add("ep", created, at(0))
    log.add("ep", ReplicaRequested(replica=1, revision=1, session_id="s1"), at(1))
    assert state.replica_of == {"s1": ("ep", 1)} and state.endpoints["ep"].next_replica == 2

    log.add("s1", session(SessionType.INFERENCE), at(2))
    log.add("other", session(SessionType.INTERACTIVE), at(2))
    assert set(state.sessions) == {"s1"}
    assert phase(state, "s1") is Phase.PENDING
    log.add("s1", SessionStarted(reason="kernel started"), at(3))
    assert phase(state, "s1") is Phase.RUNNING
    assert state.sessions["s1"].started_at == at(3)

    port = ReportedPort(name=INFERENCE_APP, protocol=PortProtocol.PREOPEN, port=8000,
                        address="10.0.0.5:8000", state=PortState.NOT_PROBED)  # fmt: skip
    log.add("node-1", KernelServicePortsReported(kernel_id="k1", session_id="s1",
                                                 ports=(port,)), at(4))  # fmt: skip
    assert state.addresses == {"s1": "10.0.0.5:8000"}
    cpu = ActivityReport(session_id="s1", kernel_id="k1", source=ActivitySource.CPU, at=at(5),
                         utilization_pct=75.0)  # fmt: skip
    other = ActivityReport(session_id="s9", kernel_id="k9", source=ActivitySource.CPU, at=at(5),
                           utilization_pct=10.0)  # fmt: skip
    used = SessionActivityReported(reports=(other, cpu))
    log.add("activity-node-1", used, at(5))
    assert list(state.utilisation["s1"]) == [(at(5), ActivitySource.CPU, 75.0)]

    log.add("s1", SessionFailed(reason="node lost"), at(6))
    ended = state.sessions["s1"]
    assert (ended.phase, ended.reason, ended.could_not_start) == (Phase.ENDED, "node lost", False)
    assert "s1" not in state.addresses and "s1" not in state.utilisation
    assert len(woken) >= 5


def test_a_session_that_fails_before_it_ran_could_not_start() -> None:
    state = ServingState()
    log = Log(state)
    log.add("s1", session(SessionType.INFERENCE), at(0))
    log.add("s1", SessionFailed(reason="image pull failed"), at(1))
    assert state.sessions["s1"].could_not_start
