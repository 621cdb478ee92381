"""The ``endpoint`` aggregate (``ev.endpoint.<endpoint id>``), decided by the serving controller
(``services/serving``): a model-serving endpoint's numbered revisions, its desired replica count
within its bounds, each replica's three separate states (lifecycle, health, traffic), its
tokens, and its destruction.

Pure: ``now`` is passed in. A change that is already true records nothing and answers False
(a revoked token revoked again, a scale to the count it has); a change the rules forbid raises
a ``DomainError`` saying why.
"""

from __future__ import annotations

from datetime import datetime

from commands.aggregate import Aggregate
from commands.errors import DomainError
from commands.serving import events
from commands.serving.state import EndpointSnapshot, EndpointState
from schemas.serving import (
    ReplicaHealth,
    Revision,
    Rollout,
    ScaleSource,
    Scaling,
    ScalingMetric,
)
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner


class EndpointGoneError(DomainError):
    """The endpoint is being destroyed (or was): only a create under its name changes it."""


class EndpointExistsError(DomainError):
    """A live endpoint has the name."""


class TokenError(DomainError):
    """A token change the rules refuse (a token id used with another secret)."""


class UnknownTokenError(TokenError):
    """The endpoint has no token with the id."""


class Endpoint(EndpointState, Aggregate):
    aggregate_type = AggregateType.ENDPOINT

    State = EndpointSnapshot

    def __init__(self) -> None:
        # Here, not inherited: the library makes every aggregate a dataclass, which would
        # give one without its own ``__init__`` an empty one.
        super().__init__()

    def _check_alive(self) -> None:
        if self.destroying or self.destroyed:
            raise EndpointGoneError(f"endpoint {self.name} is being destroyed")

    # ---- people's commands ---------------------------------------------------------------

    @classmethod
    def create(
        cls, endpoint_id: str, name: str, owner: SessionOwner, spec: Revision, replicas: int,
        scaling: Scaling, rollout: Rollout, open_to_public: bool, now: datetime,
        incarnation: str = "",
    ) -> Endpoint:  # fmt: skip
        return cls._create(
            cls.Made, id=endpoint_id, timestamp=now, name=name, owner=owner, revision=1,
            spec=spec, replicas=scaling.clamp(replicas), scaling=scaling, rollout=rollout,
            open_to_public=open_to_public, incarnation=incarnation,
        )  # fmt: skip

    def recreate(
        self, name: str, owner: SessionOwner, spec: Revision, replicas: int, scaling: Scaling,
        rollout: Rollout, open_to_public: bool, now: datetime, incarnation: str = "",
    ) -> bool:  # fmt: skip
        """Make a destroyed endpoint again (the same aggregate: revision and replica numbers
        go on; its old tokens stay revoked)."""
        if not self.destroyed:
            raise EndpointExistsError(f"an endpoint named {name} exists")
        return self._trigger(
            self.Recreated, now, name=name, owner=owner, revision=max(self.revisions) + 1,
            spec=spec, replicas=scaling.clamp(replicas), scaling=scaling, rollout=rollout,
            open_to_public=open_to_public, incarnation=incarnation,
        )  # fmt: skip

    def modify(
        self, scaling: Scaling | None, rollout: Rollout | None, open_to_public: bool | None,
        now: datetime,
    ) -> bool:  # fmt: skip
        """Change what is given; a desired count outside new bounds is clamped into them."""
        self._check_alive()
        scaling = scaling if scaling is not None else self.scaling
        rollout = rollout if rollout is not None else self.rollout
        public = open_to_public if open_to_public is not None else self.open_to_public
        if (scaling, rollout, public) == (self.scaling, self.rollout, self.open_to_public):
            return False
        self._trigger(self.Modified, now, scaling=scaling, rollout=rollout, open_to_public=public)
        clamped = scaling.clamp(self.desired)
        if clamped != self.desired:
            bounds = f"{scaling.min_replicas}..{scaling.max_replicas}"
            self.scale(clamped, ScaleSource.BOUNDS, f"clamped into the new bounds {bounds}", now)
        return True

    def scale(
        self, replicas: int, source: ScaleSource, reason: str, now: datetime, *,
        rule: int | None = None, metric: ScalingMetric | None = None, value: float | None = None,
    ) -> bool:  # fmt: skip
        """Set the desired count, clamped into the bounds (a step past them stops at them)."""
        self._check_alive()
        replicas = self.scaling.clamp(replicas)
        if replicas == self.desired:
            return False
        return self._trigger(
            self.Scaled, now, replicas=replicas, previous=self.desired, source=source,
            reason=reason, rule=rule, metric=metric, value=value,
        )  # fmt: skip

    def add_revision(self, spec: Revision, reason: str, now: datetime) -> bool:
        """A new revision to roll to; the same spec as the target one changes nothing."""
        self._check_alive()
        if spec == self.revisions[self.target_revision]:
            return False
        revision = max(self.revisions) + 1
        return self._trigger(self.RevisionAdded, now, revision=revision, spec=spec, reason=reason)

    def issue_token(
        self, token_id: str, secret_sha256: str, expires_at: datetime, note: str, now: datetime
    ) -> bool:
        self._check_alive()
        known = self.tokens.get(token_id)
        if known is not None:
            if known.secret_sha256 == secret_sha256:
                return False  # the same token issued again
            raise TokenError(f"token {token_id} exists with another secret")
        return self._trigger(
            self.TokenIssued, now, token_id=token_id, secret_sha256=secret_sha256,
            expires_at=expires_at, note=note,
        )  # fmt: skip

    def revoke_token(self, token_id: str, reason: str, now: datetime) -> bool:
        token = self.tokens.get(token_id)
        if token is None:
            raise UnknownTokenError(f"endpoint {self.name} has no token {token_id}")
        if token.revoked:
            return False
        return self._trigger(self.TokenRevoked, now, token_id=token_id, reason=reason)

    def request_destroy(self, reason: str, now: datetime) -> bool:
        if self.destroying or self.destroyed:
            return False
        return self._trigger(self.DestroyRequested, now, reason=reason)

    # ---- the controller's decisions ------------------------------------------------------

    def request_replica(self, session_id: str, revision: int, reason: str, now: datetime) -> int:
        """Ask for the next replica number; returns it."""
        number = self.next_replica
        self._trigger(
            self.ReplicaAsked, now, replica=number, revision=revision,
            session_id=session_id, reason=reason,
        )  # fmt: skip
        return number

    def health_changed(
        self, number: int, health: ReplicaHealth, reason: str, now: datetime
    ) -> bool:
        replica = self.replica(number)
        if not replica.live or replica.health is health:
            return False
        return self._trigger(self.HealthChanged, now, replica=number, health=health, reason=reason)

    def retire(self, number: int, reason: str, now: datetime) -> bool:
        if not self.replica(number).live:
            return False
        return self._trigger(self.Retired, now, replica=number, reason=reason)

    def end_replica(self, number: int, failed: bool, reason: str, now: datetime) -> bool:
        if self.replica(number).lifecycle.has_ended:
            return False
        return self._trigger(self.Ended, now, replica=number, failed=failed, reason=reason)

    def finish_rollout(self, now: datetime) -> bool:
        if not self.rolling:
            return False
        return self._trigger(self.RolloutFinished, now, revision=self.target_revision)

    def roll_back(self, reason: str, now: datetime) -> bool:
        if not self.rolling:
            return False
        return self._trigger(
            self.RolledBack, now, revision=self.target_revision,
            to_revision=self.current_revision, reason=reason,
        )  # fmt: skip

    def finish_destroy(self, now: datetime) -> bool:
        if not self.destroying or self.destroyed:
            return False
        if self.unended:
            raise DomainError(f"endpoint {self.name} still has replicas that have not ended")
        return self._trigger(self.Destroyed, now)

    # ---- events --------------------------------------------------------------------------

    Made = events.Made
    Recreated = events.Recreated
    Modified = events.Modified
    Scaled = events.Scaled
    RevisionAdded = events.RevisionAdded
    RolloutFinished = events.RolloutFinished
    RolledBack = events.RolledBack
    ReplicaAsked = events.ReplicaAsked
    HealthChanged = events.HealthChanged
    Retired = events.Retired
    Ended = events.Ended
    TokenIssued = events.TokenIssued
    TokenRevoked = events.TokenRevoked
    DestroyRequested = events.DestroyRequested
    Destroyed = events.Destroyed
