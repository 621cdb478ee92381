"""The gateway's admin module on a real NATS server: admin commands in through the command
bus, outcomes and tenancy events out; refusals append nothing."""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest
from nats.js.errors import BadRequestError, NotFoundError

from commands import admin as a
from commands.bus import CommandBus
from commands.messages import Command
from commands.outcome import Code, Outcome
from events.bus import Bus
from events.store import EventStore
from events.writes import AggregateRef
from schemas.ids import new_id
from schemas.principal import SYSTEM_TENANT, Actor, ActorKind
from schemas.subjects import COMMANDS_STREAM, EVENTS_STREAM, AggregateType
from schemas.tenancy import (
    KeypairPolicyLimits,
    PolicyKind,
    Role,
    ScopeKind,
    SlotLimits,
    StoragePolicyLimits,
    email_digest,
    project_id_for,
    user_id_for,
)
from services.tenancy.service import TenancyService
from services.tenancy.settings import TenancySettings
from tests.integration.leftovers import consumer_names

SERVICE = Actor.service("tests")
KEY = b"test-key"


@dataclass
class Admin:
    module: TenancyService
    commands: CommandBus
    store: EventStore

    async def run(self, cmd: Command) -> Outcome:
        outcome = await self.commands.execute(cmd, 10)
        assert outcome is not None, f"{cmd.command_name()} was not decided"
        return outcome

    async def ok(self, cmd: Command) -> Outcome:
        outcome = await self.run(cmd)
        assert outcome.accepted, outcome.message
        return outcome


@pytest.fixture
async def admin(bus: Bus) -> AsyncIterator[Admin]:
    # A fresh durable each test: on the work-queue stream one consumer holds cmd.<admin>.*.
    durable = f"admin-{new_id()[:8]}"
    settings = TenancySettings(durable=durable, poll_timeout_s=0.2, command_fetch_timeout_s=0.2)
    module = TenancyService(bus, settings)
    await module.start()
    try:
        yield Admin(module, CommandBus(bus), EventStore(bus))
    finally:
        await module.stop()
        with contextlib.suppress(NotFoundError):
            await bus.js.delete_consumer(COMMANDS_STREAM, durable)


def by(actor: Actor = SERVICE) -> dict[str, object]:
    return {"actor": actor, "tenant": SYSTEM_TENANT}


@dataclass
class World:
    domain: str
    project_id: str
    policy: str


async def world(admin: Admin) -> World:
    """A domain with a project, and keypair, user and project policies named like it."""
    name = f"d-{new_id()[:8]}"
    for kind in PolicyKind:
        limits = (
            {"keypair": KeypairPolicyLimits(total_resource_slots=SlotLimits(gpu_hundredths=100))}
            if kind is PolicyKind.KEYPAIR
            else {"storage": StoragePolicyLimits()}
        )
        await admin.ok(a.CreateResourcePolicy(kind=kind, name=name, **limits, **by()))
    await admin.ok(a.CreateDomain(name=name, **by()))
    await admin.ok(a.CreateProject(domain=name, name="ml", policy=name, **by()))
    return World(name, project_id_for(name, "ml"), name)


def user_cmd(w: World, email: str, role: Role = Role.USER, actor: Actor = SERVICE) -> a.CreateUser:
    return a.CreateUser(
        domain=w.domain, role=role, email_digest=email_digest(email, KEY), email_sealed="sealed",
        policy=w.policy, projects=(w.project_id,), **by(actor),
    )  # fmt: skip


async def person(admin: Admin, w: World, role: Role = Role.USER) -> tuple[str, Actor]:
    """A user with a keypair: their id and the keypair actor that signs as them."""
    email = f"{new_id()[:8]}@example.org"
    await admin.ok(user_cmd(w, email, role))
    user_id = user_id_for(email_digest(email, KEY))
    access_key = f"AK{new_id()[:12]}"
    await admin.ok(
        a.CreateKeypair(
            access_key=access_key, user_id=user_id, secret_key_id="s", policy=w.policy, **by()
        )
    )
    return user_id, Actor(kind=ActorKind.KEYPAIR, id=access_key)


async def test_a_created_keypair_resolves_to_its_person(admin: Admin) -> None:
    w = await world(admin)
    user_id, actor = await person(admin, w)
    who = admin.module.directory.principal(actor)
    assert who is not None
    assert (who.user_id, who.role, who.domain, who.projects, who.access_key) == (
        user_id, Role.USER, w.domain, frozenset({w.project_id}), actor.id,
    )  # fmt: skip
    # The first keypair became the default, in the same commit as the keypair.
    history = await admin.store.read(AggregateRef(AggregateType.USER, user_id))
    assert [e.name for e in history.events] == ["UserCreated", "UserDefaultKeypairSet"]
    keypair = await admin.store.read(AggregateRef(AggregateType.KEYPAIR, actor.id))
    assert keypair.events[0].seq + 1 == history.events[-1].seq
    limits = admin.module.directory.keypair_limits(actor.id)
    assert limits is not None and limits.total_resource_slots.gpu_hundredths == 100


async def test_a_second_user_with_the_same_email_is_refused(admin: Admin) -> None:
    w = await world(admin)
    await admin.ok(user_cmd(w, "Grace@Example.org"))
    last = await admin.store.stream_last_seq()
    again = await admin.run(user_cmd(w, " grace@example.org"))
    assert (again.code, again.message) == (Code.CONFLICT, "a user with this email already exists")
    assert await admin.store.stream_last_seq() == last


async def test_a_redelivered_create_is_done_not_a_duplicate(admin: Admin) -> None:
    w = await world(admin)
    cmd = user_cmd(w, f"{new_id()[:8]}@example.org")
    first = await admin.ok(cmd)
    # The runner lost the outcome and decides the same command again.
    decision = await admin.module.handle(cmd, admin.module.runner.ctx)
    assert first.accepted and "already" in getattr(decision, "message", "")
    assert getattr(decision, "event_seqs", None) == ()


@pytest.mark.parametrize(
    ("make", "code", "said"),
    [
        (lambda w: a.CreateProject(domain=f"nope-{new_id()[:6]}", name="x", **by()),
         Code.NOT_FOUND, "there is no domain nope-"),
        (lambda w: a.CreateProject(domain=w.domain, name="ml", policy=w.policy, **by()),
         Code.CONFLICT, "already exists"),
        (lambda w: a.CreateProject(domain=w.domain, name="x", policy="nope", **by()),
         Code.NOT_FOUND, "there is no project resource policy nope"),
        (lambda w: a.CreateDomain(name=w.domain, **by()), Code.CONFLICT, "already exists"),
        (lambda w: a.CreateKeypair(access_key=f"AK{new_id()[:8]}", user_id="u-nope",
                                   secret_key_id="s", **by()),
         Code.NOT_FOUND, "there is no user u-nope"),
        (lambda w: a.CreateResourcePolicy(kind=PolicyKind.KEYPAIR, name=w.policy,
                                          storage=StoragePolicyLimits(), **by()),
         Code.CONFLICT, "already exists"),
        (lambda w: a.CreateResourcePolicy(kind=PolicyKind.USER, name=f"p{new_id()[:6]}",
                                          keypair=KeypairPolicyLimits(), **by()),
         Code.INVALID, "sets 'storage' limits"),
        (lambda w: a.ModifyProject(project_id="nope", description="", policy=w.policy,
                                   total_resource_slots=SlotLimits(), **by()),
         Code.NOT_FOUND, "there is no project nope"),
    ],
)  # fmt: skip
async def test_bad_admin_commands_say_why_and_append_nothing(
    admin: Admin, make: object, code: Code, said: str
) -> None:
    w = await world(admin)
    assert callable(make)
    last = await admin.store.stream_last_seq()
    outcome = await admin.run(make(w))
    assert outcome.code == code and said in outcome.message, outcome.message
    assert await admin.store.stream_last_seq() == last


async def test_a_user_joins_only_projects_of_their_domain(admin: Admin) -> None:
    w, other = await world(admin), await world(admin)
    last = await admin.store.stream_last_seq()
    cmd = user_cmd(w, f"{new_id()[:8]}@example.org").model_copy(
        update={"projects": (other.project_id,)}
    )
    outcome = await admin.run(cmd)
    assert outcome.code == Code.INVALID
    assert f"belongs to domain {other.domain}, not {w.domain}" in outcome.message
    assert await admin.store.stream_last_seq() == last


async def test_negative_limits_are_invalid_and_append_nothing(admin: Admin, bus: Bus) -> None:
    cmd = a.CreateDomain(name=f"d-{new_id()[:8]}", **by())
    raw = json.loads(cmd.model_dump_json())
    raw["total_resource_slots"] = {"gpu_hundredths": -1}
    last = await admin.store.stream_last_seq()
    await bus.js.publish(cmd.subject(), json.dumps(raw).encode())
    outcome = await admin.commands.wait_outcome(cmd.command_id, 10)
    assert outcome is not None and outcome.code == Code.INVALID
    assert "total_resource_slots.gpu_hundredths" in outcome.message
    assert await admin.store.stream_last_seq() == last


async def test_authorisation_refusals(admin: Admin) -> None:
    w = await world(admin)
    _, plain = await person(admin, w)
    _, domain_admin = await person(admin, w, Role.ADMIN)
    last = await admin.store.stream_last_seq()
    refused = [
        a.CreateDomain(name=f"d-{new_id()[:8]}", **by(domain_admin)),
        a.CreateProject(domain=w.domain, name="p2", policy=w.policy, **by(plain)),
        user_cmd(w, f"{new_id()[:8]}@example.org", Role.SUPERADMIN, domain_admin),
        a.CreateProject(domain=f"d-{new_id()[:8]}", name="p", **by(domain_admin)),
        a.CreateDomain(name=f"d-{new_id()[:8]}", **by(Actor(kind=ActorKind.KEYPAIR, id="AKnope"))),
    ]
    for cmd in refused:
        outcome = await admin.run(cmd)
        assert outcome.code == Code.FORBIDDEN, (cmd.command_name(), outcome.message)
    assert await admin.store.stream_last_seq() == last
    # What each may do, they can.
    await admin.ok(user_cmd(w, f"{new_id()[:8]}@example.org", Role.ADMIN, domain_admin))
    await admin.ok(a.CreateProject(domain=w.domain, name="p2", policy=w.policy, **by(domain_admin)))
    await admin.ok(a.DeactivateKeypair(access_key=plain.id, reason="leaked", **by(plain)))
    assert admin.module.directory.principal(plain) is None


async def test_resource_groups_open_to_a_tenant(admin: Admin) -> None:
    w = await world(admin)
    _, key = await person(admin, w)
    group = f"g-{new_id()[:8]}"
    await admin.ok(a.CreateResourceGroup(name=group, **by()))
    await admin.ok(a.AssociateResourceGroup(name=group, scope=ScopeKind.PROJECT,
                                           scope_id=w.project_id, **by()))  # fmt: skip
    again = await admin.ok(a.AssociateResourceGroup(
        name=group, scope=ScopeKind.PROJECT, scope_id=w.project_id, **by()
    ))  # fmt: skip
    assert again.event_seqs == () and "already" in again.message
    user = await admin.run(a.AssociateResourceGroup(name=group, scope=ScopeKind.USER,
                                                   scope_id="u1", **by()))  # fmt: skip
    assert user.code == Code.INVALID and "not a user" in user.message
    assert group in admin.module.directory.allowed_groups(w.domain, w.project_id, key.id)
    await admin.ok(a.DeactivateResourceGroup(name=group, **by()))
    assert group not in admin.module.directory.allowed_groups(w.domain, w.project_id, key.id)


async def test_images_and_a_second_module_sees_the_same_directory(admin: Admin, bus: Bus) -> None:
    name = f"reg.example/py-{new_id()[:8]}:3"
    await admin.ok(a.RegisterImage(name=name, **by()))
    assert (await admin.run(a.RegisterImage(name=name, **by()))).code == Code.CONFLICT
    await admin.ok(a.ForgetImage(name=name, **by()))
    assert admin.module.directory.image(name) is None
    await admin.ok(a.RegisterImage(name=name, **by()))
    # Another replica folds the same directory from the log.
    other = TenancyService(bus, TenancySettings(durable=f"admin-{new_id()[:8]}"))
    await other.fold.catch_up(timeout=0.2)
    try:
        image = other.directory.image(name)
        assert image is not None and not image.forgotten
    finally:
        await other.fold.close()


async def test_a_start_that_fails_stops_what_it_started(admin: Admin, bus: Bus) -> None:
    """A second service on the same commands cannot bind its consumer (a work queue allows
    one per subject): its start fails, and its tail and follower are gone."""
    before = await consumers_of(bus)
    second = TenancyService(bus, TenancySettings(durable=f"admin-{new_id()[:8]}"))
    with pytest.raises(BadRequestError, match="not unique"):
        await second.start()
    assert await consumers_of(bus) <= before, "its tail of the log was left behind"
    assert second._follower._task is None


async def consumers_of(bus: Bus) -> set[str]:
    return await consumer_names(bus, EVENTS_STREAM)
