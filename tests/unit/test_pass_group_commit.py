"""A large decision pass is stored in several atomic batches, each holding whole decisions
(a session is never admitted without its reservations, nor scheduled without its
allocations), and no batch is larger than the store takes."""

from __future__ import annotations

from commands.tenancy import Domain, Keypair, Project, ResourceGroup, ResourcePolicy, User
from events.domain.session import SessionAdmitted, SessionScheduled
from events.envelope import Envelope
from events.writes import MAX_BATCH_MESSAGES, Write
from schemas.ids import new_id
from schemas.session import SessionType
from schemas.tenancy import (
    GroupScheduling,
    KeypairPolicyLimits,
    PolicyKind,
    Role,
    ScopeKind,
    SessionOwner,
    SlotLimits,
    email_digest,
    project_id_for,
)
from tests.unit.pass_support import ADMIN, Watched, World, slots


def envelopes(commit: list[Write]) -> list[Envelope]:
    return [e for write in commit for e in write.events]


def whole(commit: list[Write], fresh: set[str]) -> bool:
    """Every admission in the commit has its four reservations, every placement its
    allocations. A session of ``fresh`` (not admitted before the pass) placed by the commit
    is admitted by its ``SessionScheduled``: its reservations are in the commit too."""
    events = envelopes(commit)
    reserved: dict[str, int] = {}
    allocated = {e.payload["kernel_id"] for e in events if e.name == "ResourcesAllocated"}
    for e in events:
        if e.name == "QuotaReserved":
            for session_id in e.payload["sessions"]:
                reserved[session_id] = reserved.get(session_id, 0) + 1
    admitted = [e.aggregate_id for e in events if e.name == "SessionAdmitted"]
    admitted += [
        e.aggregate_id for e in events if e.name == "SessionScheduled" and e.aggregate_id in fresh
    ]
    scheduled = [e.payload["placements"] for e in events if e.name == "SessionScheduled"]
    return all(reserved.get(s) == 4 for s in admitted) and all(
        set(placements) <= allocated for placements in scheduled
    )


async def test_a_large_pass_is_stored_in_batches_of_whole_decisions() -> None:
    world = World()
    await world.tenancy()
    await world.register("gpu-8", slots(cpu=64, mem=256, gpu=8))
    created = [await world.create(slots(gpu=1)) for _ in range(6)]
    watched = Watched(world.store)

    written = await world.decide(store=watched, max_events=6)

    assert len(watched.handed) > 2
    assert written == sum(len(envelopes(commit)) for commit in watched.handed)
    assert all(whole(commit, set(created)) for commit in watched.handed)
    assert not world.stored(SessionAdmitted)  # each admitted by its placement
    assert sorted(sid for sid, _ in world.stored(SessionScheduled)) == sorted(created)


async def many_owners(world: World, count: int) -> list[SessionOwner]:
    """``count`` users of one domain, each with a project and a keypair of their own."""
    now, domain = world.clock(), f"dom-{new_id()[:8]}"
    group = ResourceGroup.create("default", "", GroupScheduling(), tuple(SessionType), now)
    group.associate(ScopeKind.DOMAIN, domain, now)
    policy = ResourcePolicy.create(PolicyKind.KEYPAIR, "kp", KeypairPolicyLimits(), None, now)
    await world.record(ADMIN, Domain.create(domain, "", SlotLimits(), now), policy, group)
    owners, aggregates = [], []
    for i in range(count):
        project_id = project_id_for(domain, f"p{i}")
        digest = email_digest(f"u{i}@example.org", b"tests")
        user = User.create(domain, Role.USER, digest, "sealed", "default", [project_id], now)
        keypair = Keypair.create(f"AK{i:06d}", user.id, domain, new_id(), "kp", None, now)
        project = Project.create(project_id, domain, f"p{i}", "", SlotLimits(), "default", now)
        aggregates += [project, user, keypair]
        owners.append(SessionOwner(access_key=keypair.id, user_id=user.id,
                                   project_id=project_id, domain=domain))  # fmt: skip
    await world.record(ADMIN, *aggregates)
    return owners


async def test_admitting_many_new_scopes_never_makes_a_batch_over_the_store_limit() -> None:
    world = World()
    await world.register("cpu-1", slots(cpu=1000, mem=1000))
    commands = []
    for owner in await many_owners(world, 249):
        world.owner = owner
        commands.append(world.request(slots(cpu=1, mem=1)))
    await world.commands.create_sessions(commands, world.ctx)
    watched = Watched(world.store)

    await world.decide(store=watched)

    assert all(len(envelopes(c)) <= MAX_BATCH_MESSAGES for c in watched.handed)
    assert all(world.state.sessions[s].session.admitted for s in world.state.sessions)
