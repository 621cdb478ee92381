"""The pure decisions of the endpoint commands (``cmd.endpoint.*``): each takes the command,
the endpoint as folded (None: unknown) and ``now``, and returns the endpoint with its pending
events, or a refusal. Who may change an endpoint is checked by the gateway before it sends a
command (the owner it authenticated is on the create); the app proxy sends ``wake`` as itself.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

from commands.outcome import Code, Rejected
from commands.serving.aggregate import Endpoint
from commands.serving.messages import (
    CreateEndpoint,
    CreateEndpointToken,
    DestroyEndpoint,
    ModifyEndpoint,
    RevokeEndpointToken,
    ScaleEndpoint,
    UpdateEndpoint,
    WakeEndpoint,
)
from schemas.serving import ScaleSource, endpoint_id_for

Decided = Endpoint | Rejected
Decider = Callable[[Any, Endpoint | None, datetime], Decided]


def endpoint_id_of(cmd: Any) -> str:
    """The endpoint a command is about."""
    if isinstance(cmd, CreateEndpoint):
        return endpoint_id_for(cmd.name)
    endpoint_id: str = cmd.endpoint_id
    return endpoint_id


def _missing(endpoint_id: str) -> Rejected:
    return Rejected(Code.NOT_FOUND, f"no endpoint {endpoint_id}")


def _live(endpoint: Endpoint | None, endpoint_id: str) -> Endpoint | Rejected:
    if endpoint is None or endpoint.destroyed:
        return _missing(endpoint_id)
    if endpoint.destroying:
        return Rejected(Code.REFUSED, f"endpoint {endpoint.name} is being destroyed")
    return endpoint


def create(cmd: CreateEndpoint, endpoint: Endpoint | None, now: datetime) -> Decided:
    if endpoint is None:
        return Endpoint.create(
            endpoint_id_for(cmd.name), cmd.name, cmd.owner, cmd.spec, cmd.replicas,
            cmd.scaling, cmd.rollout, cmd.open_to_public, now, incarnation=cmd.command_id,
        )  # fmt: skip
    if not endpoint.destroyed:
        # (The same create sent again has the same command id: the runner answers it.)
        return Rejected(Code.CONFLICT, f"an endpoint named {cmd.name} exists")
    endpoint.recreate(
        cmd.name, cmd.owner, cmd.spec, cmd.replicas, cmd.scaling, cmd.rollout,
        cmd.open_to_public, now, incarnation=cmd.command_id,
    )  # fmt: skip
    return endpoint


def update(cmd: UpdateEndpoint, endpoint: Endpoint | None, now: datetime) -> Decided:
    found = _live(endpoint, cmd.endpoint_id)
    if isinstance(found, Endpoint):
        found.add_revision(cmd.spec, cmd.reason, now)
    return found


def scale(cmd: ScaleEndpoint, endpoint: Endpoint | None, now: datetime) -> Decided:
    found = _live(endpoint, cmd.endpoint_id)
    if isinstance(found, Rejected):
        return found
    low, high = found.scaling.min_replicas, found.scaling.max_replicas
    if not low <= cmd.replicas <= high:
        return Rejected(
            Code.INVALID,
            f"replicas ({cmd.replicas}) must be within min_replicas ({low}) and "
            f"max_replicas ({high}) of endpoint {found.name}",
        )
    who = f"{cmd.actor.kind.value} {cmd.actor.id}"
    found.scale(cmd.replicas, ScaleSource.MANUAL, f"set to {cmd.replicas} by {who}", now)
    return found


def modify(cmd: ModifyEndpoint, endpoint: Endpoint | None, now: datetime) -> Decided:
    found = _live(endpoint, cmd.endpoint_id)
    if isinstance(found, Endpoint):
        found.modify(cmd.scaling, cmd.rollout, cmd.open_to_public, now)
    return found


def destroy(cmd: DestroyEndpoint, endpoint: Endpoint | None, now: datetime) -> Decided:
    if endpoint is None or endpoint.destroyed:
        return _missing(cmd.endpoint_id)
    endpoint.request_destroy(cmd.reason or "destroyed", now)
    return endpoint


def create_token(cmd: CreateEndpointToken, endpoint: Endpoint | None, now: datetime) -> Decided:
    found = _live(endpoint, cmd.endpoint_id)
    if isinstance(found, Endpoint):
        expires_at = now + timedelta(seconds=cmd.expires_in_s)
        found.issue_token(cmd.token_id, cmd.secret_sha256, expires_at, cmd.note, now)
    return found


def revoke_token(cmd: RevokeEndpointToken, endpoint: Endpoint | None, now: datetime) -> Decided:
    if endpoint is None:
        return _missing(cmd.endpoint_id)
    endpoint.revoke_token(cmd.token_id, cmd.reason, now)
    return endpoint


def wake(cmd: WakeEndpoint, endpoint: Endpoint | None, now: datetime) -> Decided:
    found = _live(endpoint, cmd.endpoint_id)
    if isinstance(found, Rejected) or found.desired > 0:
        return found  # waking already (or up): repeats change nothing
    target = found.scaling.clamp(max(1, found.scaling.min_replicas))
    if target == 0:
        return Rejected(Code.REFUSED, f"endpoint {found.name} has max_replicas 0: it cannot wake")
    found.scale(target, ScaleSource.WAKE, "a request arrived while it was scaled to zero", now)
    return found


DECIDERS: dict[type[Any], Decider] = {
    CreateEndpoint: create,
    UpdateEndpoint: update,
    ScaleEndpoint: scale,
    ModifyEndpoint: modify,
    DestroyEndpoint: destroy,
    CreateEndpointToken: create_token,
    RevokeEndpointToken: revoke_token,
    WakeEndpoint: wake,
}
