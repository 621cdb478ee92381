"""The app proxy's endpoint routes as a pure fold (given an endpoint's, its replicas' sessions'
and their agents' events: which replicas serve where, which tokens pass), the choice of a
replica by least outstanding requests, the token check and the load report's shape."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta

import pytest

from events.catalogue import Event
from events.domain.agent import KernelServicePortsReported
from events.domain.serving import (
    EndpointCreated,
    EndpointDestroyed,
    EndpointDestroyRequested,
    EndpointModified,
    EndpointRecreated,
    EndpointScaled,
    EndpointTokenIssued,
    EndpointTokenRevoked,
    ReplicaEnded,
    ReplicaHealthChanged,
    ReplicaRequested,
    ReplicaRetired,
)
from events.domain.session import SessionRequested, SessionStarted, SessionTerminated
from events.envelope import StoredEvent
from events.writes import AggregateRef
from schemas.resources import ResourceSlots
from schemas.service_ports import PortProtocol, PortState, ReportedPort
from schemas.serving import (
    INFERENCE_APP,
    ReplicaHealth,
    ReplicaLifecycle,
    ReplicaTraffic,
    Revision,
    Rollout,
    ScaleSource,
    Scaling,
    endpoint_id_for,
    token_text,
)
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner
from services.appproxy.access import Refused
from services.appproxy.endpoints import access
from services.appproxy.endpoints.balance import AVOID_S, Balancer
from services.appproxy.endpoints.forward import endpoint_name
from services.appproxy.endpoints.load_reports import report
from services.appproxy.endpoints.table import Endpoint
from services.appproxy.routes import RouteTable
from tests.support import envelope

NAME = "llm"
EID = endpoint_id_for(NAME)
OWNER = SessionOwner(access_key="AK", user_id="alice", project_id="p", domain="d")
SPEC = Revision(image="srv:1", port=8000, resources=ResourceSlots.of(cpu="1"))
SESSION_SPEC = SessionSpec(
    image="srv:1", kernels=(KernelSpec(resources=ResourceSlots.of(cpu="1")),)
)
NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


class Log:
    """Events folded one by one into a route table, each on its aggregate's subject."""

    def __init__(self) -> None:
        self.table = RouteTable()
        self.seq = 0
        self.versions: dict[str, int] = {}

    def add(self, kind: AggregateType, aggregate_id: str, *events: Event) -> Log:
        for e in events:
            self.seq += 1
            version = self.versions[aggregate_id] = self.versions.get(aggregate_id, 0) + 1
            ref = AggregateRef(kind, aggregate_id)
            env = envelope(ref, version, name=e.event_name, payload=e.model_dump(mode="json"))
            assert self.table.apply(StoredEvent(seq=self.seq, envelope=env))
            assert not self.table.broken
        return self

    def endpoint(self, *events: Event) -> Log:
        return self.add(AggregateType.ENDPOINT, EID, *events)

    def replica_session(self, session_id: str, address: str | None) -> Log:
        """The replica's session running, and its ``inference`` app reported (as the agent
        reports it: preopen, not probed) at ``address`` unless None."""
        kernel = f"k-{session_id}"
        requested = SessionRequested(spec=SESSION_SPEC, kernel_ids=(kernel,), owner=OWNER)
        self.add(AggregateType.SESSION, session_id, requested, SessionStarted(reason="started"))
        if address is not None:
            port = ReportedPort(name=INFERENCE_APP, protocol=PortProtocol.PREOPEN, port=8000,
                                address=address, state=PortState.NOT_PROBED)  # fmt: skip
            report = KernelServicePortsReported(kernel_id=kernel, session_id=session_id,
                                                ports=(port,))  # fmt: skip
            self.add(AggregateType.AGENT, f"node-{session_id}", report)
        return self

    @property
    def ep(self) -> Endpoint:
        found = self.table.endpoints.named(NAME)
        assert found is not None
        return found

    def serving(self) -> dict[int, str | None]:
        return {
            r.number: self.table.address(r.session_id, INFERENCE_APP) for r in self.ep.serving()
        }


def created(replicas: int = 1, *, public: bool = False, cold_start_s: float = 30.0) -> Event:
    scaling = Scaling(min_replicas=0, max_replicas=4, cold_start_timeout_s=cold_start_s)
    return EndpointCreated(name=NAME, owner=OWNER, spec=SPEC, replicas=replicas,
                           scaling=scaling, open_to_public=public)  # fmt: skip


def requested(n: int) -> ReplicaRequested:
    return ReplicaRequested(replica=n, revision=1, session_id=f"s{n}")


def health(n: int, state: ReplicaHealth) -> ReplicaHealthChanged:
    return ReplicaHealthChanged(replica=n, health=state, reason=f"GET /health: {state}")


HEALTHY, UNHEALTHY = ReplicaHealth.HEALTHY, ReplicaHealth.UNHEALTHY


def test_an_endpoint_is_found_by_name_with_what_routing_needs() -> None:
    log = Log().endpoint(created(2, cold_start_s=45))
    ep = log.ep
    assert (ep.id, ep.owner, ep.desired, ep.cold_start_timeout_s) == (EID, OWNER, 2, 45)
    assert not ep.open_to_public and not ep.gone and ep.replicas == {}
    assert log.table.endpoints.named("other") is None
    # Routes of apps are untouched: an endpoint is no app route.
    assert log.table.routes() == []


def test_a_replica_serves_from_its_first_healthy_probe_at_its_sessions_inference_address() -> None:
    log = Log().endpoint(created(), requested(1)).replica_session("s1", "10.0.0.5:8000")
    replica = log.ep.replicas[1]
    assert (replica.lifecycle, replica.health, replica.traffic) == (
        ReplicaLifecycle.PROVISIONING, ReplicaHealth.NOT_CHECKED, ReplicaTraffic.INACTIVE,
    )  # fmt: skip
    assert log.serving() == {}
    log.endpoint(health(1, HEALTHY))
    assert (replica.lifecycle, replica.traffic) == (ReplicaLifecycle.RUNNING, ReplicaTraffic.ACTIVE)
    assert log.serving() == {1: "10.0.0.5:8000"}
    # The inference app is preopen: reachable only through the endpoint, never /apps/.
    assert log.table.route("s1", INFERENCE_APP) is None


def test_unhealthy_leaves_the_rotation_and_healthy_again_returns() -> None:
    log = Log().endpoint(created(2), requested(1), requested(2), health(1, HEALTHY),
                         health(2, HEALTHY))  # fmt: skip
    log.replica_session("s1", "10.0.0.1:8000").replica_session("s2", "10.0.0.2:8000")
    assert list(log.serving()) == [1, 2]
    log.endpoint(health(2, UNHEALTHY))
    assert list(log.serving()) == [1]
    assert log.ep.replicas[2].lifecycle is ReplicaLifecycle.RUNNING
    log.endpoint(health(2, HEALTHY))
    assert list(log.serving()) == [1, 2]


def test_retired_and_ended_replicas_leave_and_a_session_ending_takes_its_address() -> None:
    log = Log().endpoint(created(3), *(requested(n) for n in (1, 2, 3)),
                         *(health(n, HEALTHY) for n in (1, 2, 3)))  # fmt: skip
    for n in (1, 2, 3):
        log.replica_session(f"s{n}", f"10.0.0.{n}:8000")
    log.endpoint(ReplicaRetired(replica=1, reason="scaled in"))
    log.endpoint(ReplicaEnded(replica=2, failed=False, reason="node lost"))
    assert sorted(log.ep.replicas) == [3]
    log.add(AggregateType.SESSION, "s3", SessionTerminated(reason="gone"))
    assert log.ep.serving()[0].number == 3  # still serving by the events...
    assert log.serving() == {3: None}  # ...but with no address it takes nothing


def test_a_serving_replica_without_a_reported_address_takes_nothing_until_it_reports() -> None:
    log = Log().endpoint(created(), requested(1), health(1, HEALTHY)).replica_session("s1", None)
    assert log.serving() == {1: None}
    port = ReportedPort(name=INFERENCE_APP, protocol=PortProtocol.PREOPEN, port=8000,
                        address="10.0.0.9:8000", state=PortState.NOT_PROBED)  # fmt: skip
    log.add(AggregateType.AGENT, "node-x", KernelServicePortsReported(
        kernel_id="k-s1", session_id="s1", ports=(port,)))  # fmt: skip
    assert log.serving() == {1: "10.0.0.9:8000"}


def test_scaling_modifying_and_destroying() -> None:
    log = Log().endpoint(created(1))
    log.endpoint(EndpointScaled(replicas=0, previous=1, source=ScaleSource.RULE, reason="idle"))
    assert log.ep.desired == 0
    log.endpoint(EndpointModified(scaling=Scaling(cold_start_timeout_s=5), rollout=Rollout(),
                                  open_to_public=True))  # fmt: skip
    assert (log.ep.cold_start_timeout_s, log.ep.open_to_public) == (5, True)
    log.endpoint(EndpointDestroyRequested(reason="bye"))
    assert log.ep.gone and log.ep.destroying
    log.endpoint(EndpointDestroyed())
    assert log.ep.destroyed and not log.ep.destroying


def test_recreated_under_the_name_it_routes_again_and_old_tokens_stay_revoked() -> None:
    log = Log().endpoint(created(1), issued("t1", "s3cret"), EndpointTokenRevoked(token_id="t1"))
    log.endpoint(EndpointDestroyRequested(), EndpointDestroyed())
    again = created(2, public=False)
    assert isinstance(again, EndpointCreated)
    log.endpoint(EndpointRecreated(**again.model_dump()))
    assert not log.ep.gone and log.ep.desired == 2
    assert log.ep.tokens["t1"].revoked


def test_every_replica_of_the_proxy_folds_the_same_table() -> None:
    events = [created(2), requested(1), requested(2), health(2, HEALTHY), health(1, HEALTHY),
              health(1, UNHEALTHY), issued("t1", "x")]  # fmt: skip
    one, two = Log().endpoint(*events), Log().endpoint(*events)
    assert one.ep == two.ep and [r.number for r in one.ep.serving()] == [2]


# Tokens.


def issued(token_id: str, secret: str, *, expires: datetime | None = None) -> EndpointTokenIssued:
    digest = hashlib.sha256(secret.encode()).hexdigest()
    return EndpointTokenIssued(token_id=token_id, secret_sha256=digest,
                               expires_at=expires or NOW + timedelta(days=1))  # fmt: skip


def bearer(token_id: str, secret: str) -> bytes:
    return f"Bearer {token_text(token_id, secret)}".encode()


def refusal(ep: Endpoint, header: bytes | None, now: float) -> str:
    with pytest.raises(Refused) as refused:
        access.check(ep, header, now=now)
    assert refused.value.status == 401
    return refused.value.message


def test_a_token_passes_with_its_secret_until_it_expires_or_is_revoked() -> None:
    log = Log().endpoint(created(), issued("t1", "s3cret", expires=NOW + timedelta(hours=1)))
    now = NOW.timestamp()
    assert access.check(log.ep, bearer("t1", "s3cret"), now=now) == "t1"
    assert access.check(log.ep, b"bearer " + token_text("t1", "s3cret").encode(), now=now) == "t1"
    assert "expired at 2026-11-28T13:00:00+00:00" in refusal(
        log.ep, bearer("t1", "s3cret"), now + 3600
    )
    log.endpoint(EndpointTokenRevoked(token_id="t1", reason="leaked"))
    assert "token t1 was revoked" in refusal(log.ep, bearer("t1", "s3cret"), now)


def test_unknown_token_and_wrong_secret_are_refused_alike() -> None:
    log = Log().endpoint(created(), issued("t1", "s3cret"))
    now = NOW.timestamp()
    wrong = refusal(log.ep, bearer("t1", "guess"), now)
    unknown = refusal(log.ep, bearer("t9", "s3cret"), now)
    assert wrong == unknown == "this token is not one of endpoint llm's"
    # Revoked/expired are said only to who holds the secret.
    log.endpoint(EndpointTokenRevoked(token_id="t1"))
    assert refusal(log.ep, bearer("t1", "guess"), now) == wrong


@pytest.mark.parametrize(
    ("header", "says"),
    [
        (None, "needs a token"),
        (b"Basic dXNlcjpwYXNz", "holds no endpoint token"),
        (b"Bearer abc", "holds no endpoint token"),
        (b"Bearer jyep__secret", "holds no endpoint token"),
    ],
)
def test_no_token_or_one_not_shaped_as_one_says_so(header: bytes | None, says: str) -> None:
    log = Log().endpoint(created(), issued("t1", "s3cret"))
    assert says in refusal(log.ep, header, NOW.timestamp())


def test_an_endpoint_open_to_the_public_needs_no_token() -> None:
    log = Log().endpoint(created(public=True))
    assert access.check(log.ep, None, now=NOW.timestamp()) is None


# Least outstanding requests.


def test_requests_one_after_another_go_round_the_replicas() -> None:
    balancer = Balancer()
    picks = [balancer.choose("e", [1, 2, 3], now=0, tried=frozenset()) for _ in range(6)]
    assert set(picks[:3]) == {1, 2, 3} and picks[3:] == picks[:3]


def test_the_replica_with_fewest_in_flight_is_chosen_and_tried_ones_are_not() -> None:
    balancer = Balancer()
    with balancer.sent("e", 1), balancer.sent("e", 1), balancer.sent("e", 2):
        assert balancer.choose("e", [1, 2, 3], now=0, tried=frozenset()) == 3
        assert balancer.choose("e", [1, 2], now=0, tried=frozenset()) == 2
        assert balancer.choose("e", [1, 2], now=0, tried=frozenset({2})) == 1
        assert balancer.choose("e", [2], now=0, tried=frozenset({2})) is None
    assert balancer.endpoints["e"].replicas[1].inflight == 0
    assert balancer.endpoints["e"].replicas[1].requests == 2


def test_an_unreachable_replica_is_passed_over_for_a_while_unless_it_is_the_only_one() -> None:
    balancer = Balancer()
    balancer.unreachable("e", 1, now=100)
    assert {balancer.choose("e", [1, 2], now=100.5, tried=frozenset()) for _ in range(4)} == {2}
    assert balancer.choose("e", [1], now=100.5, tried=frozenset()) == 1
    picks = {balancer.choose("e", [1, 2], now=100 + AVOID_S, tried=frozenset()) for _ in range(4)}
    assert picks == {1, 2}


def test_the_load_report_counts_totals_and_in_flight_and_forgets_what_is_gone() -> None:
    log = Log().endpoint(created(2), requested(1), requested(2))
    balancer = Balancer()
    for _ in range(3):
        with balancer.arrived(EID), balancer.sent(EID, 1):
            pass
    # One at replica 2 now, and one held (no replica chosen yet).
    balancer.answered(EID, 3.0)
    balancer.answered(EID, 5.0)  # a bound falls in its own bucket
    balancer.answered(EID, 40_000.0)
    with balancer.arrived(EID), balancer.sent(EID, 2), balancer.arrived(EID):
        shown = report("p1", 12.5, balancer, log.table.endpoints)
    assert shown == {"proxy": "p1", "at": 12.5, "endpoints": {EID: {
        "requests": 5, "inflight": 2, "latency_ms": [2] + [0] * 11 + [1],
        "replicas": {"1": {"requests": 3, "inflight": 0}, "2": {"requests": 1, "inflight": 1}},
    }}}  # fmt: skip
    log.endpoint(ReplicaRetired(replica=1, reason="scaled in"))
    assert list(report("p1", 13, balancer, log.table.endpoints)["endpoints"][EID]["replicas"]) == [
        "2"
    ]
    log.endpoint(EndpointDestroyRequested(), EndpointDestroyed())
    assert report("p1", 14, balancer, log.table.endpoints)["endpoints"] == {}


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/e/llm/v1/completions", "llm"),
        ("/e/llm/", "llm"),
        ("/e/llm", "llm"),
        ("/e/", None),
        ("/e//x", None),
        ("/apps/s/a/", None),
        ("/elm/x", None),
    ],
)
def test_the_endpoint_name_is_the_first_segment_after_e(path: str, name: str | None) -> None:
    assert endpoint_name(path) == name
