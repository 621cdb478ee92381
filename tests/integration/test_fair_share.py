"""Fair share through the real scheduler, two replicas on one log, with a simulated machine of
four GPUs: a heavy user fills it, then asks for more before a light user does; when GPUs free,
the light user's sessions take them and the heavy user's wait, each saying its factors. Both
replicas fold the same usage from the log, to the bit, and a replay of the log finds nothing
wrong (``events.audit.invariants``), the factors each reason recorded among what it judges."""

from __future__ import annotations

import asyncio
import time

import pytest

from commands.bus import CommandBus
from commands.messages import CreateSession
from events.audit.invariants import replay_log
from events.bus import connect
from events.store import EventStore
from placement.fairshare import norm_of, tree, weigh
from schemas.fair_share import FairShareSettings
from schemas.ids import session_id_for
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.session import KernelSpec, SessionSpec, SessionStatus
from schemas.settings import NatsSettings
from schemas.tenancy import GroupScheduling, QueuePolicy, SessionOwner
from services.scheduler.service import Scheduler
from tests.integration.replica_support import IMAGE, agents, replicas, slots, until
from tests.tenancy_support import make_tenancy

FAIR = GroupScheduling(
    queue_policy=QueuePolicy.FAIR_SHARE, fair_share=FairShareSettings(usage_half_life_s=60)
)
"""The shortest half-life: a few seconds of four GPUs move the factor where a reason shows it."""


def one_gpu(owner: SessionOwner, *command: str) -> CreateSession:
    spec = SessionSpec(
        image=IMAGE, kernels=(KernelSpec(resources=slots(cpu=1, mem=1, gpu=1)),), command=command
    )  # no command: runs until stopped; ("sleep", "n"): exits after n seconds
    return CreateSession(actor=Actor.service("tests"), tenant=SYSTEM_TENANT, spec=spec, owner=owner)


def status(scheduler: Scheduler, session_id: str) -> SessionStatus | None:
    tracked = scheduler.state.sessions.get(session_id)
    return tracked.session.status if tracked is not None else None


def reason(scheduler: Scheduler, session_id: str) -> str:
    tracked = scheduler.state.sessions.get(session_id)
    return tracked.session.reason if tracked is not None else ""


@pytest.mark.parametrize("leases", [True, False], ids=["leases", "both-active"])
async def test_a_heavy_users_new_sessions_wait_behind_a_light_users(
    own_server: NatsSettings, leases: bool
) -> None:
    client = await connect(own_server, name="fair-share-client")
    store = EventStore(client)
    heavy = (await make_tenancy(store, scheduling=FAIR)).owner
    light = (await make_tenancy(store, scheduling=FAIR)).owner
    # The heavy user fills the machine: two sessions end by themselves after a few seconds.
    first = [one_gpu(heavy, "sleep", "4") for _ in range(2)] + [one_gpu(heavy) for _ in range(2)]
    heavy_next = [one_gpu(heavy) for _ in range(2)]
    light_next = [one_gpu(light) for _ in range(2)]
    ids = {name: [session_id_for(c.command_id) for c in cmds] for name, cmds in
           (("first", first), ("heavy", heavy_next), ("light", light_next))}  # fmt: skip
    commands = CommandBus(client)
    try:
        async with replicas(own_server, leases) as schedulers, agents(own_server, 1):
            one = schedulers[0]
            await until("the node registered", 30, lambda: all(s.state.nodes for s in schedulers))
            await asyncio.gather(*(commands.send(cmd) for cmd in first))
            await until(
                "the heavy user's sessions running",
                30,
                lambda: all(status(one, s) is SessionStatus.RUNNING for s in ids["first"]),
            )
            # The heavy user asks first; the light user a moment later.
            await asyncio.gather(*(commands.send(cmd) for cmd in heavy_next))
            await until(
                "the heavy user's new sessions waiting",
                30,
                lambda: all("fair share" in reason(one, s) for s in ids["heavy"]),
            )
            await asyncio.gather(*(commands.send(cmd) for cmd in light_next))
            await until(
                "the light user's sessions placed on the GPUs that freed",
                60,
                lambda: all(
                    status(one, s) in {SessionStatus.RUNNING, SessionStatus.SCHEDULED}
                    for s in ids["light"]
                ),
            )
            for scheduler in schedulers:
                await scheduler.settle()
            assert all(
                status(s, x) is SessionStatus.PENDING for s in schedulers for x in ids["heavy"]
            )
            said = reason(one, ids["heavy"][0])
            assert said.startswith("no node in group default has 1 free GPU"), said
            assert "; fair share: domain 0." in said, said  # below 1: the heavy user used some

            # Both replicas folded the same usage from the log, and order the same way. (Each
            # applies its own writes first: the book takes changes in the log's order.)
            await until(
                "both replicas folded as far",
                10,
                lambda: len({s.state.position for s in schedulers}) == 1,
            )
            now = time.time()
            books = [
                s.state.usage.until(s.state.position).usage("default", now) for s in schedulers
            ]
            assert books[0] == books[1]
            accounts = [(o.domain, o.project_id, o.user_id) for o in (heavy, light)]
            used = {a: weigh(x, FAIR.fair_share) for a, x in books[0].items()}
            assert used[accounts[0]] > used[accounts[1]] > 0
            norm = norm_of(slots(cpu=16, mem=64, gpu=4), FAIR.fair_share)
            ranked = tree(used, accounts, lambda level, key: 1, norm)
            assert ranked.standing(accounts[1]).key() < ranked.standing(accounts[0]).key()
        report = await replay_log(client)
    finally:
        await client.close()
    assert report.violations == []
    # The replay judged the factors the reasons recorded against the log's own usage.
    assert report.fair_shares > 0, report
