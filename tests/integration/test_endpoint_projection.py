"""The endpoints view on a real nats-server, on SQLite and on PostgreSQL: an endpoint's status
counted from its replicas' three states (ready, degraded, unavailable, scaled to zero,
destroying, destroyed), its revisions and rollouts, its tokens without secrets, its scaling
decisions with their reasons, a name made again after a destroy, listings by scope with Relay
cursors, a redelivered batch changing nothing, and a rebuild equal to the live view.

The log is shared with the other tests: each test writes endpoints of unique names owned by
users of its own domain; each database is the test's own.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from sqlalchemy import select
from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import Bus
from events.domain import serving as ev
from events.store import EventStore, decode
from projections.endpoints import queries as q
from projections.endpoints import view as endpoints
from projections.rebuild import rebuild
from projections.runner import Projector
from schemas.ids import new_id
from schemas.serving import (
    EndpointStatus,
    ReplicaHealth,
    ReplicaLifecycle,
    ReplicaTraffic,
    Rollout,
    ScaleSource,
    Scaling,
    ScalingMetric,
    ScalingRule,
)
from schemas.tenancy import SessionOwner
from tests.integration.serving_log_support import EndpointLog, revision

HEALTHY, UNHEALTHY = ReplicaHealth.HEALTHY, ReplicaHealth.UNHEALTHY


def people() -> tuple[SessionOwner, SessionOwner]:
    tag = new_id()[:8]
    domain = f"d-{tag}"
    return tuple(  # type: ignore[return-value]
        SessionOwner(access_key=f"AK{n}{tag}", user_id=f"u-{n}-{tag}", project_id=f"p-{tag}",
                     domain=domain)
        for n in ("alice", "bob")
    )  # fmt: skip


async def caught_up(engine: AsyncEngine, bus: Bus) -> Projector:
    projector = Projector(engine, bus)
    await projector.start()
    await projector.catch_up(timeout=0.5)
    return projector


async def dump(engine: AsyncEngine) -> dict[str, list[Any]]:
    async with engine.connect() as conn:
        return {
            t.name: [tuple(r) for r in await conn.execute(select(t).order_by(*t.primary_key))]
            for t in endpoints.VIEW.metadata("").sorted_tables
        }


async def status_of(engine: AsyncEngine, projector: Projector, endpoint_id: str) -> Any:
    await projector.catch_up(timeout=0.5)
    found = await q.get_endpoint(engine, endpoint_id)
    assert found is not None
    return found.status


async def test_status_counts_replicas_by_their_three_states(bus: Bus, engine: AsyncEngine) -> None:
    alice, _ = people()
    log = EndpointLog(EventStore(bus), alice)
    await log.create(replicas=2)
    await log.request(1)
    await log.request(2)
    projector = await caught_up(engine, bus)
    try:
        assert await status_of(engine, projector, log.id) is EndpointStatus.UNAVAILABLE
        await log.write(
            ev.ReplicaHealthChanged(replica=1, health=HEALTHY, reason="GET /health: 200")
        )
        assert await status_of(engine, projector, log.id) is EndpointStatus.DEGRADED
        await log.write(
            ev.ReplicaHealthChanged(replica=2, health=HEALTHY, reason="GET /health: 200")
        )
        assert await status_of(engine, projector, log.id) is EndpointStatus.READY
        # Unhealthy: out of the rotation at once, though its lifecycle is still RUNNING.
        await log.write(
            ev.ReplicaHealthChanged(replica=2, health=UNHEALTHY, reason="GET /health: 503")
        )
        assert await status_of(engine, projector, log.id) is EndpointStatus.DEGRADED
        replicas = {r.replica: r for r in await q.replicas(engine, log.id)}
        two = replicas[2]
        assert (two.lifecycle, two.health, two.traffic, two.reason) == (
            ReplicaLifecycle.RUNNING, UNHEALTHY, ReplicaTraffic.INACTIVE, "GET /health: 503",
        )  # fmt: skip
        assert replicas[1].serving and replicas[1].session_id == log.session_of(1)
        await log.write(ev.ReplicaHealthChanged(replica=1, health=UNHEALTHY, reason="timed out"))
        assert await status_of(engine, projector, log.id) is EndpointStatus.UNAVAILABLE
        # Replaced: 2 retired and ended, 3 asked for and healthy; 1 recovers.
        await log.write(
            ev.ReplicaRetired(replica=2, reason="unhealthy for 10 s"),
            ev.ReplicaRequested(replica=3, revision=1, session_id=log.session_of(3)),
            ev.ReplicaHealthChanged(replica=1, health=HEALTHY, reason="GET /health: 200"),
            ev.ReplicaHealthChanged(replica=3, health=HEALTHY, reason="GET /health: 200"),
            ev.ReplicaEnded(replica=2, failed=False, reason="its session ended"),
        )
        assert await status_of(engine, projector, log.id) is EndpointStatus.READY
        live = await q.replicas(engine, log.id)
        assert [r.replica for r in live] == [1, 3]
        everything = await q.replicas(engine, log.id, ended=10)
        assert [(r.replica, r.lifecycle) for r in everything] == [
            (1, ReplicaLifecycle.RUNNING), (2, ReplicaLifecycle.TERMINATED),
            (3, ReplicaLifecycle.RUNNING),
        ]  # fmt: skip
        # Scaled to zero by a person: nothing desired and nothing serving.
        await log.write(
            ev.EndpointScaled(replicas=0, previous=2, source=ScaleSource.MANUAL, reason="by alice"),
            ev.ReplicaRetired(replica=1, reason="scaled in"),
            ev.ReplicaRetired(replica=3, reason="scaled in"),
        )
        assert await status_of(engine, projector, log.id) is EndpointStatus.SCALED_TO_ZERO
    finally:
        await projector.close()


async def test_revisions_tokens_scaling_and_destroy(bus: Bus, engine: AsyncEngine) -> None:
    alice, _ = people()
    log = EndpointLog(EventStore(bus), alice)
    await log.create(replicas=1, open_to_public=False)
    rule = ScalingRule(metric=ScalingMetric.RPS, scale_up_above=10, step=1, cooldown_s=60)
    await log.write(
        ev.EndpointModified(
            scaling=Scaling(min_replicas=1, max_replicas=3, rules=(rule,)),
            rollout=Rollout(max_surge=1, max_unavailable=1), open_to_public=True,
        ),
        ev.EndpointScaled(
            replicas=2, previous=1, source=ScaleSource.RULE, rule=0, metric=ScalingMetric.RPS,
            value=14.5, reason="rps 14.5 per replica is above 10",
        ),
        ev.EndpointRevisionAdded(revision=2, spec=revision("jetyard-echo:2"), reason="new image"),
    )  # fmt: skip
    expires = log.clock + timedelta(days=30)
    await log.write(
        ev.EndpointTokenIssued(token_id="t1", secret_sha256="a" * 64, expires_at=expires),
        ev.EndpointTokenIssued(token_id="t2", secret_sha256="b" * 64, expires_at=expires,
                               note="ci"),
        ev.EndpointTokenRevoked(token_id="t1", reason="leaked"),
    )  # fmt: skip
    projector = await caught_up(engine, bus)
    try:
        found = await q.get_endpoint(engine, log.id)
        assert found is not None
        assert (found.current_revision, found.target_revision) == (1, 2)
        assert (found.desired_replicas, found.open_to_public) == (2, True)
        assert found.scaling.rules == (rule,) and found.scaling.max_replicas == 3
        assert found.last_scaling_reason == "rps 14.5 per replica is above 10"
        assert found.owner == alice and found.name == log.name
        history = await q.scalings(engine, log.id, last=10)
        assert [(s.replicas, s.previous, s.source, s.rule, s.metric, s.value) for s in history] == [
            (2, 1, ScaleSource.RULE, 0, ScalingMetric.RPS, 14.5)
        ]
        tokens = {t.token_id: t for t in await q.tokens(engine, log.id)}
        assert tokens["t1"].revoked_at is not None and tokens["t1"].revoke_reason == "leaked"
        assert tokens["t2"].revoked_at is None and tokens["t2"].note == "ci"
        assert tokens["t2"].expires_at == expires
        dumped = str(await dump(engine))
        assert "a" * 64 not in dumped and "b" * 64 not in dumped  # never a digest

        # The new revision never became healthy: back to 1, with the probe's answer.
        await log.write(
            ev.EndpointRolledBack(revision=2, to_revision=1, reason="GET /health: 500"),
            ev.EndpointRevisionAdded(revision=3, spec=revision("jetyard-echo:3")),
            ev.EndpointRolloutFinished(revision=3),
        )
        await projector.catch_up(timeout=0.5)
        found = await q.get_endpoint(engine, log.id)
        assert found is not None and (found.current_revision, found.target_revision) == (3, None)
        revisions = await q.revisions(engine, log.id)
        assert [(r.revision, r.spec.image, r.rolled_back_reason) for r in revisions] == [
            (3, "jetyard-echo:3", None), (2, "jetyard-echo:2", "GET /health: 500"),
            (1, "jetyard-echo:1", None),
        ]  # fmt: skip

        await log.write(ev.EndpointDestroyRequested(reason="done"))
        assert await status_of(engine, projector, log.id) is EndpointStatus.DESTROYING
        await log.write(ev.EndpointDestroyed())
        assert await status_of(engine, projector, log.id) is EndpointStatus.DESTROYED
        gone = await q.get_endpoint(engine, log.id)
        assert gone is not None and gone.destroyed_at is not None
        tokens = {t.token_id: t for t in await q.tokens(engine, log.id)}
        assert tokens["t2"].revoke_reason == "destroyed"  # tokens die with the endpoint
        assert tokens["t1"].revoke_reason == "leaked"  # the first revocation is kept

        # The name made again: the same row, live again, its old tokens still revoked.
        await log.write(
            ev.EndpointRecreated(
                name=log.name, owner=alice, revision=4, spec=revision("jetyard-echo:4"),
                replicas=1, scaling=Scaling(),
            )
        )  # fmt: skip
        again = await status_of(engine, projector, log.id)
        assert again is EndpointStatus.UNAVAILABLE
        made = await q.get_endpoint(engine, log.id)
        assert made is not None and made.destroyed_at is None and made.current_revision == 4
        assert all(t.revoked_at is not None for t in await q.tokens(engine, log.id))

        # The same events again (a redelivered batch) change nothing.
        before = await dump(engine)
        events = await log.store.reader.read_subject(f"ev.endpoint.{log.id}")
        async with engine.begin() as conn:
            await endpoints.apply_batch(conn, "", [decode(m) for m in events])
        assert await dump(engine) == before
    finally:
        await projector.close()


async def test_listings_by_scope_and_cursors(bus: Bus, engine: AsyncEngine) -> None:
    alice, bob = people()
    store = EventStore(bus)
    mine = [EndpointLog(store, alice) for _ in range(3)]
    theirs = EndpointLog(store, bob)
    for log in (*mine, theirs):
        await log.create(replicas=0)
    await mine[2].write(ev.EndpointDestroyRequested(), ev.EndpointDestroyed())
    projector = await caught_up(engine, bus)
    try:
        page = await q.list_endpoints(engine, scope=q.Scope(user_id=alice.user_id), first=1)
        assert [r.id for r in page.rows] == [mine[0].id] and page.has_next and page.total == 2
        rest = await q.list_endpoints(
            engine, scope=q.Scope(user_id=alice.user_id), first=5, after=page.end_cursor
        )
        assert [r.id for r in rest.rows] == [mine[1].id] and not rest.has_next
        domain = await q.list_endpoints(engine, scope=q.Scope(domain=alice.domain))
        assert [r.id for r in domain.rows] == [mine[0].id, mine[1].id, theirs.id]
        with_gone = await q.list_endpoints(
            engine, scope=q.Scope(domain=alice.domain), destroyed=True
        )
        assert with_gone.total == 4
        assert all(r.status is EndpointStatus.SCALED_TO_ZERO for r in domain.rows)
    finally:
        await projector.close()


async def test_a_rebuild_equals_the_live_view(
    bus: Bus, engine: AsyncEngine, database_url: str
) -> None:
    alice, _ = people()
    log = EndpointLog(EventStore(bus), alice)
    await log.create(replicas=1)
    await log.request(1)
    await log.write(
        ev.ReplicaHealthChanged(replica=1, health=HEALTHY, reason="GET /health: 200"),
        ev.EndpointScaled(replicas=2, previous=1, source=ScaleSource.WAKE, reason="a request"),
    )
    live = await caught_up(engine, bus)
    try:
        before = await dump(engine)
        assert await rebuild(database_url, bus, [endpoints.VIEW]) >= live.position
        assert await dump(engine) == before
    finally:
        await live.close()
