"""An endpoint's value objects as its aggregate keeps them: a replica with its three separate
states (lifecycle, health, traffic), and a token (only its secret's digest)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict

from schemas.serving import ReplicaHealth, ReplicaLifecycle, ReplicaTraffic

L = ReplicaLifecycle


class Replica(BaseModel):
    """One replica as the log says: what it runs, and its three states kept apart."""

    model_config = ConfigDict(frozen=True)

    number: int
    revision: int
    session_id: str
    lifecycle: ReplicaLifecycle = L.PROVISIONING
    health: ReplicaHealth = ReplicaHealth.NOT_CHECKED
    traffic: ReplicaTraffic = ReplicaTraffic.INACTIVE
    requested_at: datetime
    health_since: datetime
    """When ``health`` last changed (or the replica was requested)."""
    ever_healthy: bool = False
    reason: str = ""
    """Why it is in its lifecycle state (the last event's reason)."""
    retired_at: datetime | None = None
    ended_at: datetime | None = None

    @property
    def live(self) -> bool:
        """Asked for and not retired: it counts towards the desired replicas."""
        return self.lifecycle in (L.PROVISIONING, L.RUNNING)

    @property
    def serving(self) -> bool:
        """RUNNING, HEALTHY and ACTIVE: in the app proxies' rotation."""
        return (
            self.lifecycle is L.RUNNING
            and self.health is ReplicaHealth.HEALTHY
            and self.traffic is ReplicaTraffic.ACTIVE
        )


class EndpointToken(BaseModel):
    model_config = ConfigDict(frozen=True)

    secret_sha256: str
    expires_at: datetime
    note: str = ""
    revoked: bool = False

    def valid(self, now: datetime) -> bool:
        return not self.revoked and now < self.expires_at
