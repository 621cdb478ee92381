"""Quota given back in the decision that ends a session: the release is stored in the same
commit as the end, ahead of it, and a pass that ends many sessions by their kernels' exits
gives each scope one release naming them all (per run that fits a batch). Given events, when
a pass, then events (in-memory store with the real store's rules)."""

from __future__ import annotations

from events.domain.quota import QuotaReleased
from events.domain.session import SessionTerminated
from tests.unit.pass_support import Watched, World, slots


async def ended_together(n: int) -> tuple[World, list[str], int]:
    world = World()
    owner = await world.tenancy()
    await world.register("box", slots(cpu=64, mem=64, gpu=0))
    ids = [await world.create(slots(cpu=1)) for _ in range(n)]
    await world.decide()
    for sid in ids:
        await world.started(sid)
    await world.decide()
    mark = world.last_seq()
    for sid in ids:
        await world.exited(sid, 0)
    assert len(owner.scopes()) == 4
    return world, ids, mark


async def test_ten_exits_in_one_pass_give_each_scope_one_release() -> None:
    world, ids, mark = await ended_together(10)
    watched = Watched(world.store)

    await world.decide(store=watched)

    released = world.stored(QuotaReleased, after=mark)
    assert len(released) == 4  # keypair, user, project, domain
    assert all(set(event.sessions) == set(ids) for _, event in released)
    assert {sid for sid, _ in world.stored(SessionTerminated, after=mark)} == set(ids)
    (commit,) = watched.handed
    names = [e.name for w in commit for e in w.events]
    assert names.index("SessionTerminated") > max(
        i for i, name in enumerate(names) if name == "QuotaReleased"
    )
    for tracked in (world.state.sessions[sid] for sid in ids):
        assert tracked.session.id not in world.state.holdings


async def test_runs_that_fit_a_small_batch_each_release_their_own_sessions() -> None:
    world, ids, mark = await ended_together(10)
    watched = Watched(world.store)

    await world.decide(store=watched, max_events=12)

    assert len(watched.handed) >= 2  # 10 ends, 10 ledger releases and 4 scopes: two runs
    for commit in watched.handed:
        assert sum(len(w.events) for w in commit) <= 12
        ended = {w.aggregate.id for w in commit for e in w.events if e.name == "SessionTerminated"}
        released: set[str] = set()
        for w in commit:
            released |= {
                s for e in w.events if e.name == "QuotaReleased" for s in e.payload["sessions"]
            }
        assert ended == released  # every end in a commit comes with its release, no other
    assert {sid for sid, _ in world.stored(SessionTerminated, after=mark)} == set(ids)
    assert not any(sid in world.state.holdings for sid in ids)
