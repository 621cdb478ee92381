"""The endpoints view (model serving): one row per endpoint (owner, status, desired replicas and
bounds, rules, current and target revision, openness, the last scaling decision), its
revisions, its replicas with their lifecycle, health and traffic kept apart, its tokens
(never a secret or a digest) and every scaling decision with its reason.

Reads ``ev.endpoint.*`` (every event of ``events.domain.serving``). ``apply`` is pure: an
endpoint's state and an event in, the state after it out; the endpoint's ``last_seq`` makes a
repeated event change nothing. The status is ``schemas.serving.endpoint_status`` of the
desired count and the replicas RUNNING, HEALTHY and ACTIVE, counted after every event.
``apply_batch`` loads what a batch touches (the endpoints, their revisions and tokens, their
replicas that have not ended: an ended replica is final, no event changes it again) and writes
the differences back; scaling decisions are only ever added. Tables and records:
``projections.endpoints.tables``; queries: ``projections.endpoints.queries``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncConnection

from events.catalogue import CATALOGUE, Event
from events.domain import serving as ev
from events.envelope import StoredEvent
from projections.base import UNDECODABLE, View, skip_undecodable
from projections.db import sync_rows
from projections.endpoints.tables import (
    EndpointRecord,
    ReplicaRecord,
    RevisionRecord,
    ScalingRecord,
    TokenRecord,
    from_row,
    replica_from_row,
    replica_to_row,
    revision_from_row,
    revision_to_row,
    scaling_to_row,
    tables,
    to_row,
    token_from_row,
    token_to_row,
)
from schemas.serving import (
    ReplicaHealth,
    ReplicaLifecycle,
    ReplicaTraffic,
    endpoint_status,
)

NAME = "endpoints"
VERSION = 1
EVENTS = frozenset(
    cls.event_name
    for cls in (
        ev.EndpointCreated, ev.EndpointRecreated, ev.EndpointModified, ev.EndpointScaled,
        ev.EndpointRevisionAdded, ev.EndpointRolloutFinished, ev.EndpointRolledBack,
        ev.ReplicaRequested, ev.ReplicaHealthChanged, ev.ReplicaRetired, ev.ReplicaEnded,
        ev.EndpointTokenIssued, ev.EndpointTokenRevoked, ev.EndpointDestroyRequested,
        ev.EndpointDestroyed,
    )
)  # fmt: skip
_ENDED = tuple(s.value for s in ReplicaLifecycle if s.has_ended)


@dataclass(frozen=True, slots=True)
class EndpointState:
    """An endpoint as the fold holds it: its row and the rows that hang off it."""

    record: EndpointRecord
    revisions: dict[int, RevisionRecord] = field(default_factory=dict)
    replicas: dict[int, ReplicaRecord] = field(default_factory=dict)
    """Those that have not ended, and those that ended in this batch."""
    tokens: dict[str, TokenRecord] = field(default_factory=dict)
    scalings: tuple[ScalingRecord, ...] = ()
    """Decisions this batch added (the table keeps every one)."""


def apply(state: EndpointState | None, event: StoredEvent) -> EndpointState | None:
    """One event on one endpoint: its state after it (the same state when it changes
    nothing, e.g. because it was applied already)."""
    if state is not None and event.seq <= state.record.last_seq:
        return state
    payload = CATALOGUE.decode(event.envelope)
    if isinstance(payload, ev.EndpointCreated):  # and EndpointRecreated
        return _created(state, event, payload)
    if state is None:  # a change to an endpoint this view never saw created
        return None
    changed = _changed(state, event, payload)
    at = event.envelope.occurred_at
    record = replace(changed.record, updated_at=at, last_seq=event.seq)
    serving = sum(1 for r in changed.replicas.values() if r.serving)
    status = endpoint_status(
        record.desired_replicas, serving, record.destroying, record.destroyed_at is not None
    )
    return replace(changed, record=replace(record, serving_replicas=serving, status=status))


def _created(
    state: EndpointState | None, event: StoredEvent, payload: ev.EndpointCreated
) -> EndpointState | None:
    recreated = isinstance(payload, ev.EndpointRecreated)
    if state is not None and not (recreated and state.record.destroyed_at is not None):
        return state  # created once; made again only after it was destroyed
    if state is None and recreated:
        return None
    at, seq = event.envelope.occurred_at, event.seq
    status = endpoint_status(payload.replicas, 0, destroying=False, destroyed=False)
    record = EndpointRecord(
        id=event.envelope.aggregate_id, created_seq=seq, name=payload.name,
        owner=payload.owner, status=status, desired_replicas=payload.replicas,
        serving_replicas=0, scaling=payload.scaling, rollout=payload.rollout,
        current_revision=payload.revision, target_revision=None,
        open_to_public=payload.open_to_public, destroying=False, created_at=at, updated_at=at,
        destroyed_at=None, last_scaling_reason=None, last_scaled_at=None, last_seq=seq,
    )  # fmt: skip
    revision = RevisionRecord(record.id, payload.revision, payload.spec, "created", at)
    if state is None:
        return EndpointState(record, revisions={payload.revision: revision})
    # Made again: the same aggregate, so its past revisions, replicas and tokens stay.
    revisions = {**state.revisions, payload.revision: revision}
    return replace(state, record=record, revisions=revisions)


def _changed(state: EndpointState, event: StoredEvent, payload: Event) -> EndpointState:
    """What an event other than a creation changes."""
    record, at = state.record, event.envelope.occurred_at
    match payload:
        case ev.EndpointModified(scaling=scaling, rollout=rollout, open_to_public=public):
            record = replace(record, scaling=scaling, rollout=rollout, open_to_public=public)
        case ev.EndpointScaled():
            decision = ScalingRecord(
                record.id, event.seq, at, payload.replicas, payload.previous, payload.source,
                payload.reason, payload.rule, payload.metric, payload.value,
            )  # fmt: skip
            record = replace(
                record, desired_replicas=payload.replicas,
                last_scaling_reason=payload.reason, last_scaled_at=at,
            )  # fmt: skip
            return replace(state, record=record, scalings=(*state.scalings, decision))
        case ev.EndpointRevisionAdded(revision=number, spec=spec, reason=reason):
            revisions = {
                **state.revisions,
                number: RevisionRecord(record.id, number, spec, reason, at),
            }
            record = replace(record, target_revision=number)
            return replace(state, record=record, revisions=revisions)
        case ev.EndpointRolloutFinished(revision=number):
            record = replace(record, current_revision=number, target_revision=None)
        case ev.EndpointRolledBack(revision=number, to_revision=back, reason=reason):
            revisions = dict(state.revisions)
            if number in revisions:
                revisions[number] = replace(revisions[number], rolled_back_reason=reason)
            record = replace(record, current_revision=back, target_revision=None)
            return replace(state, record=record, revisions=revisions)
        case ev.ReplicaRequested():
            requested = ReplicaRecord(
                record.id, payload.replica, payload.session_id, payload.revision,
                ReplicaLifecycle.PROVISIONING, ReplicaHealth.NOT_CHECKED, ReplicaTraffic.INACTIVE,
                payload.reason, requested_at=at, changed_at=at,
            )  # fmt: skip
            return replace(state, replicas={**state.replicas, payload.replica: requested})
        case ev.ReplicaHealthChanged() | ev.ReplicaRetired() | ev.ReplicaEnded():
            return _replica_changed(state, payload, at)
        case ev.EndpointTokenIssued():
            issued = TokenRecord(record.id, payload.token_id, payload.note, at, payload.expires_at)
            return replace(state, tokens={**state.tokens, payload.token_id: issued})
        case ev.EndpointTokenRevoked(token_id=token_id, reason=reason):
            tokens = dict(state.tokens)
            if token_id in tokens:
                tokens[token_id] = _revoked(tokens[token_id], at, reason)
            return replace(state, tokens=tokens)
        case ev.EndpointDestroyRequested():
            record = replace(record, destroying=True)
        case ev.EndpointDestroyed():
            # Its tokens die with it, and stay dead if its name is used again.
            tokens = {k: _revoked(t, at, "destroyed") for k, t in state.tokens.items()}
            record = replace(record, destroying=False, destroyed_at=at)
            return replace(state, record=record, tokens=tokens)
    return replace(state, record=record)


def _revoked(token: TokenRecord, at: datetime, reason: str) -> TokenRecord:
    """Revoked at ``at``, unless it was already (the first revocation is the one kept)."""
    if token.revoked_at is not None:
        return token
    return replace(token, revoked_at=at, revoke_reason=reason)


def _replica_changed(state: EndpointState, payload: Any, at: datetime) -> EndpointState:
    """A replica's lifecycle, health and traffic after a probe, a retirement or its end."""
    replica = state.replicas.get(payload.replica)
    if replica is None or replica.lifecycle.has_ended:
        return state
    match payload:
        case ev.ReplicaHealthChanged(health=health):
            lifecycle = replica.lifecycle
            if health is ReplicaHealth.HEALTHY and lifecycle is ReplicaLifecycle.PROVISIONING:
                lifecycle = ReplicaLifecycle.RUNNING
            # Healthy and running: in the rotation; unhealthy: out of it at once.
            serving = health is ReplicaHealth.HEALTHY and lifecycle is ReplicaLifecycle.RUNNING
            traffic = ReplicaTraffic.ACTIVE if serving else ReplicaTraffic.INACTIVE
            after = replace(replica, lifecycle=lifecycle, health=health, traffic=traffic)
        case ev.ReplicaRetired():
            after = replace(
                replica, lifecycle=ReplicaLifecycle.TERMINATING, traffic=ReplicaTraffic.INACTIVE
            )
        case _:  # ReplicaEnded
            ended = ReplicaLifecycle.FAILED if payload.failed else ReplicaLifecycle.TERMINATED
            after = replace(replica, lifecycle=ended, traffic=ReplicaTraffic.INACTIVE)
    after = replace(after, reason=payload.reason, changed_at=at)
    return replace(state, replicas={**state.replicas, payload.replica: after})


async def apply_batch(conn: AsyncConnection, suffix: str, events: Sequence[StoredEvent]) -> None:
    t = tables(suffix)
    ids = list({e.envelope.aggregate_id for e in events})
    before = await _load(conn, suffix, ids)
    after = dict(before)
    for event in events:
        eid = event.envelope.aggregate_id
        try:
            state = apply(after.get(eid), event)
        except UNDECODABLE as exc:
            skip_undecodable(NAME, event, exc)
            continue
        if state is not None:
            after[eid] = state
    await sync_rows(
        conn, t.endpoints,
        {k: to_row(s.record) for k, s in before.items()},
        {k: to_row(s.record) for k, s in after.items()},
    )  # fmt: skip
    old = [_child_rows(s) for s in before.values()]
    new = [_child_rows(s) for s in after.values()]
    for index, table in enumerate((t.revisions, t.replicas, t.tokens)):
        await sync_rows(
            conn, table,
            {k: r for rows in old for k, r in rows[index].items()},
            {k: r for rows in new for k, r in rows[index].items()},
        )  # fmt: skip
    added = [scaling_to_row(d) for s in after.values() for d in s.scalings]
    if added:
        await conn.execute(t.scalings.insert(), added)


ChildRows = dict[tuple[str, Any], dict[str, Any]]


def _child_rows(state: EndpointState) -> tuple[ChildRows, ChildRows, ChildRows]:
    """The endpoint's revision, replica and token rows, keyed by their primary keys."""
    eid = state.record.id
    return (
        {(eid, n): revision_to_row(r) for n, r in state.revisions.items()},
        {(eid, n): replica_to_row(r) for n, r in state.replicas.items()},
        {(eid, k): token_to_row(r) for k, r in state.tokens.items()},
    )


async def _load(conn: AsyncConnection, suffix: str, ids: list[str]) -> dict[str, EndpointState]:
    t = tables(suffix)
    found = await conn.execute(select(t.endpoints).where(t.endpoints.c.id.in_(ids)))
    states = {row.id: EndpointState(from_row(row)) for row in found}
    if not states:
        return {}
    held = list(states)
    for row in await conn.execute(select(t.revisions).where(t.revisions.c.endpoint_id.in_(held))):
        states[row.endpoint_id].revisions[row.revision] = revision_from_row(row)
    live = select(t.replicas).where(
        t.replicas.c.endpoint_id.in_(held), t.replicas.c.lifecycle.not_in(_ENDED)
    )
    for row in await conn.execute(live):
        states[row.endpoint_id].replicas[row.replica] = replica_from_row(row)
    for row in await conn.execute(select(t.tokens).where(t.tokens.c.endpoint_id.in_(held))):
        states[row.endpoint_id].tokens[row.token_id] = token_from_row(row)
    return states


VIEW = View(NAME, VERSION, EVENTS, lambda suffix: tables(suffix).metadata, apply_batch)
