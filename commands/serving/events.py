"""How each event of the ``endpoint`` aggregate (``ev.endpoint.<id>``) evolves its state: every
class pairs a catalogue event with ``apply``. ``Endpoint`` binds them in its body, so they are
its nested event classes (``Endpoint.Scaled``). Pure; no subjects."""

from __future__ import annotations

from datetime import datetime

from commands.aggregate import Aggregate
from commands.serving.replicas import EndpointToken, Replica
from commands.serving.state import EndpointState
from events.domain.serving import (
    EndpointCreated,
    EndpointDestroyed,
    EndpointDestroyRequested,
    EndpointModified,
    EndpointRecreated,
    EndpointRevisionAdded,
    EndpointRolledBack,
    EndpointRolloutFinished,
    EndpointScaled,
    EndpointTokenIssued,
    EndpointTokenRevoked,
    ReplicaEnded,
    ReplicaHealthChanged,
    ReplicaRequested,
    ReplicaRetired,
)
from schemas.serving import ReplicaHealth, ReplicaLifecycle, ReplicaTraffic

L = ReplicaLifecycle


class Made(EndpointCreated, Aggregate.Created):
    def apply(self, endpoint: EndpointState) -> None:
        _made(endpoint, self, self.timestamp)


class Recreated(EndpointRecreated, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        _made(endpoint, self, self.timestamp)
        endpoint.destroying = endpoint.destroyed = False
        endpoint.rule_scaled_at = {}
        endpoint.tokens = {k: t.model_copy(update={"revoked": True})
                           for k, t in endpoint.tokens.items()}  # fmt: skip


class Modified(EndpointModified, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        endpoint.scaling, endpoint.rollout = self.scaling, self.rollout
        endpoint.open_to_public = self.open_to_public


class Scaled(EndpointScaled, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        endpoint.desired, endpoint.scaled_at = self.replicas, self.timestamp
        if self.rule is not None:
            endpoint.rule_scaled_at = {**endpoint.rule_scaled_at, self.rule: self.timestamp}


class RevisionAdded(EndpointRevisionAdded, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        endpoint.revisions = {**endpoint.revisions, self.revision: self.spec}
        endpoint.target_revision = self.revision


class RolloutFinished(EndpointRolloutFinished, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        endpoint.current_revision = endpoint.target_revision = self.revision


class RolledBack(EndpointRolledBack, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        endpoint.current_revision = endpoint.target_revision = self.to_revision


class ReplicaAsked(ReplicaRequested, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        endpoint.replicas = {
            **endpoint.replicas,
            self.replica: Replica(
                number=self.replica, revision=self.revision, session_id=self.session_id,
                requested_at=self.timestamp, health_since=self.timestamp, reason=self.reason,
            ),
        }  # fmt: skip
        endpoint.next_replica = max(endpoint.next_replica, self.replica + 1)


class HealthChanged(ReplicaHealthChanged, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        healthy = self.health is ReplicaHealth.HEALTHY
        replica = endpoint.replicas[self.replica]
        change: dict[str, object] = {"health": self.health, "health_since": self.timestamp}
        if healthy:
            change.update(lifecycle=L.RUNNING, traffic=ReplicaTraffic.ACTIVE, ever_healthy=True)
        else:
            change["traffic"] = ReplicaTraffic.INACTIVE
        _put(endpoint, replica.model_copy(update=change))


class Retired(ReplicaRetired, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        replica = endpoint.replicas[self.replica]
        _put(endpoint, replica.model_copy(update={
            "lifecycle": L.TERMINATING, "traffic": ReplicaTraffic.INACTIVE,
            "reason": self.reason, "retired_at": self.timestamp,
        }))  # fmt: skip


class Ended(ReplicaEnded, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        replica = endpoint.replicas[self.replica]
        _put(endpoint, replica.model_copy(update={
            "lifecycle": L.FAILED if self.failed else L.TERMINATED,
            "traffic": ReplicaTraffic.INACTIVE, "reason": self.reason,
            "ended_at": self.timestamp,
        }))  # fmt: skip


class TokenIssued(EndpointTokenIssued, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        token = EndpointToken(
            secret_sha256=self.secret_sha256, expires_at=self.expires_at, note=self.note
        )
        endpoint.tokens = {**endpoint.tokens, self.token_id: token}


class TokenRevoked(EndpointTokenRevoked, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        token = endpoint.tokens[self.token_id].model_copy(update={"revoked": True})
        endpoint.tokens = {**endpoint.tokens, self.token_id: token}


class DestroyRequested(EndpointDestroyRequested, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        endpoint.destroying = True


class Destroyed(EndpointDestroyed, Aggregate.Event):
    def apply(self, endpoint: EndpointState) -> None:
        endpoint.destroyed = True


def _made(endpoint: EndpointState, event: EndpointCreated, at: datetime) -> None:
    endpoint.name, endpoint.owner = event.name, event.owner
    endpoint.incarnation = event.incarnation
    endpoint.open_to_public = event.open_to_public
    endpoint.revisions = {**endpoint.revisions, event.revision: event.spec}
    endpoint.current_revision = endpoint.target_revision = event.revision
    endpoint.desired = event.replicas
    endpoint.scaled_at = at
    endpoint.scaling, endpoint.rollout = event.scaling, event.rollout


def _put(endpoint: EndpointState, replica: Replica) -> None:
    endpoint.replicas = {**endpoint.replicas, replica.number: replica}
