"""The views' queries on a real nats-server, on SQLite and on PostgreSQL: every node's view read
whole when many moved, pagination and filters (status, and the owner's domain and user, as the
gateway's role-scoped listings use them).

The log is shared with the other tests, so each test works in its own tenant domain and each
database is the test's own (a file, or a PostgreSQL database created and dropped here).
"""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy.ext.asyncio import AsyncEngine

from events.bus import Bus
from events.store import EventStore
from projections import queries
from projections.queries import decode_cursor
from schemas.session import SessionStatus
from schemas.tenancy import SessionOwner
from services.gateway.core import node_views
from services.gateway.core.node_views import NodeViews
from services.gateway.core.views import SqlViews
from tests.integration.projection_support import (
    Cluster,
    by_id,
    caught_up,
    scenario,
)


async def test_every_node_s_view_is_read_whole_when_many_moved(
    bus: Bus, engine: AsyncEngine, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = Cluster(EventStore(bus))
    await scenario(cluster)
    projector = await caught_up(engine, bus)
    try:
        monkeypatch.setattr(node_views, "MANY_IDS", 0)  # every node "many": no id list
        kept = NodeViews(engine)
        assert by_id(await kept.all()) == by_id(await queries.list_nodes(engine))
    finally:
        await projector.close()


async def test_sessions_page_by_request_order_with_a_status_filter(
    bus: Bus, engine: AsyncEngine
) -> None:
    cluster = Cluster(EventStore(bus))
    made = await scenario(cluster)
    extra = [await cluster.session(f"x{i}") for i in range(4)]
    projector = await caught_up(engine, bus)
    await projector.close()
    everything = [made["done"], made["cancelled"], made["running"], *extra]

    seen: list[str] = []
    after = None
    while True:
        page = await queries.list_sessions(engine, first=3, after=after, domain=cluster.domain)
        seen += [r.record.id for r in page.rows]
        assert page.cursors == [r.cursor for r in page.rows]
        if not page.has_next:
            break
        after = page.end_cursor
    assert seen == [s.id for s in everything]

    pending = await queries.list_sessions(
        engine, first=10, status=SessionStatus.PENDING, domain=cluster.domain
    )
    assert [r.record.id for r in pending.rows] == [s.id for s in extra]
    assert not pending.has_next
    ended = await queries.list_sessions(
        engine,
        first=1,
        status=["TERMINATED", "CANCELLED"],
        domain=cluster.domain,
        with_history=True,
    )
    assert [r.record.id for r in ended.rows] == [made["done"].id] and ended.has_next
    assert ended.rows[0].history[-1].status is SessionStatus.TERMINATED
    rest = await queries.list_sessions(
        engine,
        first=5,
        after=ended.end_cursor,
        status=["TERMINATED", "CANCELLED"],
        domain=cluster.domain,
    )
    assert [r.record.id for r in rest.rows] == [made["cancelled"].id] and not rest.has_next
    assert decode_cursor(ended.rows[0].cursor) == ended.rows[0].record.created_seq
    with pytest.raises(ValueError, match="cursor"):
        await queries.list_sessions(engine, after="bm9wZQ==")

    # Newest first: the same sessions the other way round, paged by cursors of that order,
    # which the oldest-first order refuses (and the other way round).
    newest: list[str] = []
    after = None
    while True:
        page = await queries.list_sessions(
            engine, first=3, after=after, domain=cluster.domain, newest_first=True
        )
        newest += [r.record.id for r in page.rows]
        if not page.has_next:
            break
        after = page.end_cursor
    assert newest == [s.id for s in reversed(everything)]
    with pytest.raises(ValueError, match="cursor"):
        await queries.list_sessions(engine, after=after)
    with pytest.raises(ValueError, match="cursor"):
        await queries.list_sessions(engine, after=rest.end_cursor, newest_first=True)


async def test_sessions_page_by_owner_domain_and_user_and_legacy_ones_match_neither(
    bus: Bus, engine: AsyncEngine
) -> None:
    cluster = Cluster(EventStore(bus))
    alice, bob = cluster.owner, cluster.user("bob")
    # Interleaved, so that every page boundary falls between someone else's sessions.
    whose = [alice, bob, None, alice, bob, alice, None]
    made = [
        await cluster.session(f"o{i}", o, legacy=o is None, admit=i == 0)
        for i, o in enumerate(whose)
    ]
    projector = await caught_up(engine, bus)
    await projector.close()

    async def walk(first: int, **filters: Any) -> list[str]:
        seen: list[str] = []
        after = None
        while True:
            page = await queries.list_sessions(engine, first=first, after=after, **filters)
            seen += [r.record.id for r in page.rows]
            if not page.has_next:
                return seen
            after = page.end_cursor

    def ids(*owners: SessionOwner) -> list[str]:
        return [s.id for s, o in zip(made, whose, strict=True) if o in owners]

    assert await walk(2, domain=cluster.domain) == ids(alice, bob)
    assert await walk(1, user_id=alice.user_id) == ids(alice)
    assert await walk(2, domain=cluster.domain, user_id=bob.user_id) == ids(bob)
    assert await walk(5, domain=cluster.domain, user_id="nobody") == []
    # Sessions from before tenancy have no owner: only an unfiltered listing holds them.
    everything = await walk(500, project_id="p1")
    assert set(ids(alice, bob)) <= set(everything) and made[2].id not in everything
    first = await queries.get_session(engine, made[0].id)
    legacy = await queries.get_session(engine, made[2].id)
    assert first is not None and legacy is not None
    assert (first.record.admitted, first.record.status_reason) == (True, "admitted")
    assert (legacy.record.domain, legacy.record.user_id, legacy.record.admitted) == (
        None, None, True,
    )  # fmt: skip

    # The gateway's read side answers the same query type: the same filters, the owner on
    # every row, the history with it, and cursors that carry on under them.
    views = SqlViews(engine)
    page = await views.sessions(first=2, after=None, status="PENDING", user_id=alice.user_id)
    assert [r.record.id for r in page.rows] == ids(alice)[:2] and page.has_next
    rest = await views.sessions(
        first=2, after=page.cursors[-1], status="PENDING", user_id=alice.user_id
    )
    assert [r.record.id for r in rest.rows] == ids(alice)[2:] and not rest.has_next
    row = page.rows[0].record
    assert (row.access_key, row.user_id, row.project_id, row.domain) == (
        alice.access_key, alice.user_id, "p1", cluster.domain,
    )  # fmt: skip
    assert (row.priority, row.admitted, page.rows[1].record.admitted) == (10, True, False)
    assert [h.status for h in page.rows[0].history] == [SessionStatus.PENDING] * 2
    by_domain = await views.sessions(first=10, after=None, status=None, domain=cluster.domain)
    assert [r.record.id for r in by_domain.rows] == ids(alice, bob)
    assert {r.record.user_id for r in by_domain.rows} == {alice.user_id, bob.user_id}
