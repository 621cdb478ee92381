"""The app proxy's endpoint table: a pure fold of ``ev.endpoint.*`` (``events/domain/serving.py``).

Per endpoint (found by name, as its URL ``/e/<name>/`` names it): its id and owner, whether it
is open to the public, how long a request may wait for a replica (``cold_start_timeout_s``),
the desired replica count, whether it is being destroyed or is gone; its replicas with their
three states kept apart; its tokens (the SHA-256 of each secret, the expiry, revoked or not).

A replica's states follow the events' docstrings: requested PROVISIONING, NOT_CHECKED,
INACTIVE; its first HEALTHY makes it RUNNING and ACTIVE; UNHEALTHY (or NOT_CHECKED) takes it
out of the rotation while it stays so; retired or ended, it leaves the table. A replica
*serves* when RUNNING, HEALTHY and ACTIVE; where it is reached is its session's
``inference`` app, which ``routes.RouteTable`` folds with every other app (and which goes when
the session ends). Deterministic: every proxy replica folding the same log holds the same table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from events.catalogue import Event
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
from schemas.serving import ReplicaHealth, ReplicaLifecycle, ReplicaTraffic
from schemas.tenancy import SessionOwner

EVENTS = (
    EndpointCreated, EndpointRecreated, EndpointModified, EndpointScaled, ReplicaRequested,
    ReplicaHealthChanged, ReplicaRetired, ReplicaEnded, EndpointTokenIssued,
    EndpointTokenRevoked, EndpointDestroyRequested, EndpointDestroyed,
)  # fmt: skip
NAMES = frozenset(c.event_name for c in EVENTS)
"""What the proxy folds of an endpoint (revisions and rollouts change nothing it routes by)."""


@dataclass(slots=True)
class Replica:
    number: int
    session_id: str
    revision: int
    lifecycle: ReplicaLifecycle = ReplicaLifecycle.PROVISIONING
    health: ReplicaHealth = ReplicaHealth.NOT_CHECKED
    traffic: ReplicaTraffic = ReplicaTraffic.INACTIVE

    @property
    def serving(self) -> bool:
        return (
            self.lifecycle is ReplicaLifecycle.RUNNING
            and self.health is ReplicaHealth.HEALTHY
            and self.traffic is ReplicaTraffic.ACTIVE
        )


@dataclass(frozen=True, slots=True)
class EndpointToken:
    secret_sha256: str
    """Lower-case hex SHA-256 of the secret's UTF-8 bytes, as the gateway sent it."""
    expires_at: float
    """Unix seconds."""
    revoked: bool = False


@dataclass(slots=True)
class Endpoint:
    id: str
    name: str
    owner: SessionOwner
    open_to_public: bool
    cold_start_timeout_s: float
    desired: int
    destroying: bool = False
    destroyed: bool = False
    replicas: dict[int, Replica] = field(default_factory=dict)
    """Replica number -> the replica, for those neither retired nor ended."""
    tokens: dict[str, EndpointToken] = field(default_factory=dict)

    @property
    def gone(self) -> bool:
        """Being destroyed or destroyed: its URL answers 410."""
        return self.destroying or self.destroyed

    def serving(self) -> list[Replica]:
        """The replicas in the rotation, by number."""
        return [self.replicas[n] for n in sorted(self.replicas) if self.replicas[n].serving]


class EndpointTable:
    """Endpoints by id and by name (names are unique in the installation; a destroyed
    endpoint keeps its name until one is made under it again, which is the same id)."""

    def __init__(self) -> None:
        self.by_id: dict[str, Endpoint] = {}
        self._ids: dict[str, str] = {}

    def named(self, name: str) -> Endpoint | None:
        endpoint_id = self._ids.get(name)
        return self.by_id.get(endpoint_id) if endpoint_id is not None else None

    def evolve(self, message: Event, endpoint_id: str) -> None:
        """Apply one ``ev.endpoint.<endpoint_id>`` event (one of ``EVENTS``)."""
        if isinstance(message, EndpointCreated):  # EndpointRecreated too
            self._created(message, endpoint_id)
            return
        endpoint = self.by_id.get(endpoint_id)
        if endpoint is None:
            return  # nothing before its creation routes anywhere
        if isinstance(message, EndpointModified):
            endpoint.open_to_public = message.open_to_public
            endpoint.cold_start_timeout_s = message.scaling.cold_start_timeout_s
        elif isinstance(message, EndpointScaled):
            endpoint.desired = message.replicas
        elif isinstance(message, ReplicaRequested):
            endpoint.replicas[message.replica] = Replica(
                message.replica, message.session_id, message.revision
            )
        elif isinstance(message, ReplicaHealthChanged):
            _health(endpoint.replicas.get(message.replica), message.health)
        elif isinstance(message, ReplicaRetired | ReplicaEnded):
            endpoint.replicas.pop(message.replica, None)
        elif isinstance(message, EndpointTokenIssued):
            endpoint.tokens[message.token_id] = EndpointToken(
                message.secret_sha256, message.expires_at.timestamp()
            )
        elif isinstance(message, EndpointTokenRevoked):
            token = endpoint.tokens.get(message.token_id)
            if token is not None:
                endpoint.tokens[message.token_id] = EndpointToken(
                    token.secret_sha256, token.expires_at, revoked=True
                )
        elif isinstance(message, EndpointDestroyRequested):
            endpoint.destroying = True
        elif isinstance(message, EndpointDestroyed):
            endpoint.destroying, endpoint.destroyed = False, True
            endpoint.replicas.clear()

    def _created(self, message: EndpointCreated, endpoint_id: str) -> None:
        before = self.by_id.get(endpoint_id)
        endpoint = Endpoint(
            endpoint_id, message.name, message.owner, message.open_to_public,
            message.scaling.cold_start_timeout_s, message.replicas,
        )  # fmt: skip
        if before is not None:  # made again: the old tokens stay (revoked), numbers go on
            endpoint.tokens, endpoint.replicas = before.tokens, before.replicas
            if self._ids.get(before.name) == endpoint_id:
                del self._ids[before.name]
        self.by_id[endpoint_id] = endpoint
        self._ids[message.name] = endpoint_id

    def forget(self, endpoint_id: str) -> None:
        """Drop an endpoint whose events cannot be folded (its URL then answers 404)."""
        endpoint = self.by_id.pop(endpoint_id, None)
        if endpoint is not None and self._ids.get(endpoint.name) == endpoint_id:
            del self._ids[endpoint.name]


def _health(replica: Replica | None, health: ReplicaHealth) -> None:
    if replica is None:
        return
    replica.health = health
    if health is ReplicaHealth.HEALTHY and replica.lifecycle is ReplicaLifecycle.PROVISIONING:
        replica.lifecycle, replica.traffic = ReplicaLifecycle.RUNNING, ReplicaTraffic.ACTIVE
