"""An endpoint's attributes and the queries on them: ``Endpoint`` (``aggregate``) decides on
them, its events (``events``) evolve them, ``EndpointSnapshot`` snapshots them. Pure."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from commands.errors import DomainError
from commands.serving.replicas import EndpointToken, Replica
from schemas.serving import EndpointStatus, Revision, Rollout, Scaling, endpoint_status
from schemas.tenancy import SessionOwner


class EndpointSnapshot(BaseModel):
    """What a snapshot keeps of an endpoint: every attribute of ``EndpointState``."""

    name: str
    incarnation: str = ""
    owner: SessionOwner | None
    open_to_public: bool
    revisions: dict[int, Revision]
    current_revision: int
    target_revision: int
    desired: int
    scaling: Scaling
    rollout: Rollout
    replicas: dict[int, Replica]
    next_replica: int
    tokens: dict[str, EndpointToken]
    rule_scaled_at: dict[int, datetime]
    scaled_at: datetime | None
    destroying: bool
    destroyed: bool


class EndpointState:
    """An endpoint's attributes and the queries on them."""

    def __init__(self) -> None:
        self.name = ""
        self.incarnation = ""
        """The id of the command that made it (again): its replicas' session ids derive
        from it."""
        self.owner: SessionOwner | None = None
        self.open_to_public = False
        self.revisions: dict[int, Revision] = {}
        self.current_revision = 0
        """The revision the endpoint serves (the last one rolled out, or rolled back to)."""
        self.target_revision = 0
        """The revision replicas are rolled to: ``current_revision`` unless a rollout runs."""
        self.desired = 0
        self.scaling = Scaling()
        self.rollout = Rollout()
        self.replicas: dict[int, Replica] = {}
        self.next_replica = 1
        """Replica numbers are never reused, across a destroy and a re-create too."""
        self.tokens: dict[str, EndpointToken] = {}
        self.rule_scaled_at: dict[int, datetime] = {}
        """Rule index -> when it last scaled the endpoint (its cooldown runs from there)."""
        self.scaled_at: datetime | None = None
        """When the desired count last changed, for whatever reason."""
        self.destroying = False
        self.destroyed = False

    # ---- queries ---------------------------------------------------------------------------

    @property
    def rolling(self) -> bool:
        return self.target_revision != self.current_revision

    @property
    def live(self) -> list[Replica]:
        return [r for r in self.replicas.values() if r.live]

    @property
    def unended(self) -> list[Replica]:
        return [r for r in self.replicas.values() if not r.lifecycle.has_ended]

    def status(self) -> EndpointStatus:
        serving = sum(1 for r in self.replicas.values() if r.serving)
        return endpoint_status(self.desired, serving, self.destroying, self.destroyed)

    def replica(self, number: int) -> Replica:
        found = self.replicas.get(number)
        if found is None:
            raise DomainError(f"endpoint {self.name} has no replica {number}")
        return found

    def token_valid(self, token_id: str, secret_sha256: str, now: datetime) -> bool:
        token = self.tokens.get(token_id)
        return token is not None and token.secret_sha256 == secret_sha256 and token.valid(now)
