"""Commands on model-serving endpoints (``cmd.endpoint.*``), decided by the serving controller
(``services/serving``). The gateway sends them for people (with the owner it authenticated);
the app proxy sends ``wake`` (as itself) when a request reaches an endpoint scaled to zero.

No secret is carried: the gateway makes a token, shows it once, and sends only the SHA-256
digest of its secret (as the log keeps it)."""

from __future__ import annotations

from typing import Annotated, Self

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from commands.admin.fields import Reason
from commands.messages import Command
from schemas.bounds import BoundsError
from schemas.ids import Token
from schemas.serving import (
    MAX_REPLICAS,
    Revision,
    Rollout,
    Scaling,
    check_revision,
    endpoint_name_problem,
)
from schemas.subjects import AggregateType
from schemas.tenancy import SessionOwner

EP = AggregateType.ENDPOINT
MAX_TOKEN_EXPIRY_S = 366 * 24 * 3600
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
Replicas = Annotated[int, Field(ge=0, le=MAX_REPLICAS)]


def _runnable(spec: Revision) -> Revision:
    # Whatever sent it, a revision is one whose replicas the scheduler would take (within the
    # hard ceilings; the configured maximums are the scheduler's): no endpoint on the log asks
    # for a replica no create could carry.
    try:
        check_revision(spec)
    except BoundsError as exc:
        raise PydanticCustomError("out_of_bounds", "{why}", {"why": str(exc)}) from None
    return spec


class CreateEndpoint(Command):
    """Make an endpoint named ``name`` (its id is ``endpoint_id_for(name)``) serving ``spec``
    with ``replicas`` desired (clamped into the scaling bounds). Refused if a live endpoint has
    the name."""

    aggregate_type, verb = EP, "create"
    name: str
    owner: SessionOwner
    """Whose replicas' sessions are, resolved by the gateway from the authenticated principal."""
    spec: Revision
    replicas: Replicas = 1
    scaling: Scaling = Scaling()
    rollout: Rollout = Rollout()
    open_to_public: bool = False

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        problem = endpoint_name_problem(name)
        if problem is not None:
            raise ValueError(problem)
        return name

    _spec = field_validator("spec")(_runnable)

    @model_validator(mode="after")
    def _replicas_in_bounds(self) -> Self:
        low, high = self.scaling.min_replicas, self.scaling.max_replicas
        if not low <= self.replicas <= high:
            raise ValueError(
                f"replicas ({self.replicas}) must be within min_replicas ({low}) and "
                f"max_replicas ({high})"
            )
        return self


class UpdateEndpoint(Command):
    """Roll the endpoint to a new revision (``spec`` whole: image, command, model version...)."""

    aggregate_type, verb = EP, "update"
    endpoint_id: Token
    spec: Revision
    reason: Reason = ""

    _spec = field_validator("spec")(_runnable)


class ScaleEndpoint(Command):
    """Set the desired replica count (within the endpoint's bounds, else refused)."""

    aggregate_type, verb = EP, "scale"
    endpoint_id: Token
    replicas: Replicas


class ModifyEndpoint(Command):
    """Change the scaling bounds and rules, the rollout bounds or the openness; a field left
    None keeps its value. A desired count outside new bounds is clamped into them."""

    aggregate_type, verb = EP, "modify"
    endpoint_id: Token
    scaling: Scaling | None = None
    rollout: Rollout | None = None
    open_to_public: bool | None = None


class DestroyEndpoint(Command):
    """Retire every replica and end the endpoint (its URL answers 410, then its name is free)."""

    aggregate_type, verb = EP, "destroy"
    endpoint_id: Token
    reason: Reason = ""


class CreateEndpointToken(Command):
    """A bearer token for the endpoint, valid ``expires_in_s`` from now unless revoked."""

    aggregate_type, verb = EP, "create_token"
    endpoint_id: Token
    token_id: Token
    secret_sha256: Sha256
    expires_in_s: int = Field(default=30 * 24 * 3600, ge=1, le=MAX_TOKEN_EXPIRY_S)
    note: Reason = ""


class RevokeEndpointToken(Command):
    aggregate_type, verb = EP, "revoke_token"
    endpoint_id: Token
    token_id: Token
    reason: Reason = ""


class WakeEndpoint(Command):
    """A request reached an endpoint scaled to zero: scale it to at least one replica. Sent by
    an app proxy as itself; repeats while it is waking change nothing."""

    aggregate_type, verb = EP, "wake"
    endpoint_id: Token
