"""Tenancy deciders in memory, given / when / then: a ``World`` is an ``InMemoryStore``, the
``Directory`` folded from it and the service's own ``TenancyDecider``. *Given* commands are
decided and stored as the service does; *when* one more command by some actor; *then* the
events it stored (read back from the store as catalogue payloads) or its refusal. No NATS.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from commands import admin as a
from commands.directory import Directory
from commands.messages import Command
from commands.outcome import Accepted, Code, Decision, Rejected
from events.catalogue import CATALOGUE, Event
from events.envelope import StoredEvent
from events.memory import InMemoryStore
from schemas.principal import SYSTEM_TENANT, Actor, ActorKind
from schemas.tenancy import (
    KeypairPolicyLimits,
    PolicyKind,
    Role,
    StoragePolicyLimits,
    email_digest,
    project_id_for,
    user_id_for,
)
from services.tenancy.writer import TenancyDecider
from tests.unit.scenario import T0, at

SERVICE = Actor.service("tests")
NOW = at(60)
KEY = b"test-key"
PID1, PID2 = project_id_for("d1", "ml"), project_id_for("d2", "ml")


def by(actor: Actor = SERVICE) -> dict[str, Any]:
    return {"actor": actor, "tenant": SYSTEM_TENANT}


@dataclass(frozen=True)
class Then:
    """What one command did: its decision, and the events it stored."""

    decision: Decision
    stored: list[StoredEvent]

    @property
    def events(self) -> list[Event]:
        return [CATALOGUE.decode(e.envelope) for e in self.stored]

    @property
    def written_to(self) -> list[str]:
        """Each stored event's aggregate, as ``type/id``."""
        return [f"{e.envelope.aggregate_type.value}/{e.envelope.aggregate_id}" for e in self.stored]

    def accepted(self, *events: Event) -> str:
        """Assert that it was accepted and stored exactly ``events``; returns its message."""
        assert isinstance(self.decision, Accepted), self.decision
        assert self.events == list(events)
        assert self.decision.event_seqs == tuple(e.seq for e in self.stored)
        return self.decision.message

    def rejected(self, code: Code, said: str) -> None:
        """Assert that it was refused with ``code``, saying ``said``, and stored nothing."""
        assert isinstance(self.decision, Rejected), self.decision
        assert self.decision.code == code, self.decision
        assert said in self.decision.message, self.decision.message
        assert self.stored == []


class World:
    """One tenancy writer on an in-memory store (a test owns both)."""

    def __init__(self, store: InMemoryStore | None = None, *, attempts: int = 5) -> None:
        self.store = store or InMemoryStore()
        self.directory = Directory()
        for event in self.store.events():
            self.directory.apply(event)
        self.decider = TenancyDecider(self.store, self.directory, attempts=attempts)

    def replica(self, *, attempts: int = 5) -> World:
        """Another writer on the same store, folded up to now; from then on each folds only
        what it stores itself or reads back after a conflict."""
        return World(self.store, attempts=attempts)

    async def given(self, *cmds: Command) -> None:
        for cmd in cmds:
            decision = await self.decider.decide(cmd, lambda: T0)
            assert isinstance(decision, Accepted), (cmd.command_name(), decision)

    async def when(self, cmd: Command, now: datetime = NOW) -> Then:
        before = await self.store.stream_last_seq()
        decision = await self.decider.decide(cmd, lambda: now)
        stored = self.store.events(after_seq=before)
        for event in stored:
            envelope = event.envelope
            # Each event names its command as cause, and the writer folded it from the ack.
            assert (envelope.causation_id, envelope.actor) == (cmd.command_id, cmd.actor)
            assert envelope.occurred_at == now
            assert self.directory.guards.get(envelope.subject, 0) >= event.seq
        return Then(decision, stored)


# ---- commands -----------------------------------------------------------------------------


def policies(name: str = "default") -> list[Command]:
    """A resource policy of each kind, named ``name``."""
    storage = StoragePolicyLimits()
    return [
        a.CreateResourcePolicy(
            kind=PolicyKind.KEYPAIR, name=name, keypair=KeypairPolicyLimits(), **by()
        ),
        a.CreateResourcePolicy(kind=PolicyKind.USER, name=name, storage=storage, **by()),
        a.CreateResourcePolicy(kind=PolicyKind.PROJECT, name=name, storage=storage, **by()),
    ]


def digest(name: str) -> str:
    return email_digest(f"{name}@example.org", KEY)


def user_id(name: str) -> str:
    return user_id_for(digest(name))


def new_user(
    name: str, domain: str = "d1", role: Role = Role.USER, projects: tuple[str, ...] = (),
    actor: Actor = SERVICE, **fields: Any,
) -> a.CreateUser:  # fmt: skip
    return a.CreateUser(
        domain=domain, role=role, email_digest=digest(name), email_sealed=f"sealed-{name}",
        projects=projects, **fields, **by(actor),
    )  # fmt: skip


def new_keypair(
    access_key: str, name: str, actor: Actor = SERVICE, **fields: Any
) -> a.CreateKeypair:
    return a.CreateKeypair(
        access_key=access_key, user_id=user_id(name), secret_key_id=f"secret-{access_key}",
        **fields, **by(actor),
    )  # fmt: skip


# ---- a small organisation -----------------------------------------------------------------


@dataclass(frozen=True)
class Person:
    name: str
    access_key: str

    @property
    def user_id(self) -> str:
        return user_id(self.name)

    @property
    def actor(self) -> Actor:
        """The person signing with their keypair."""
        return Actor(kind=ActorKind.KEYPAIR, id=self.access_key)

    @property
    def login(self) -> Actor:
        """The person after a login (no keypair signs)."""
        return Actor(kind=ActorKind.USER, id=self.user_id)


@dataclass(frozen=True)
class Org:
    """Domains d1 and d2, each with a project ``ml``; a ``default`` policy of every kind; and
    people with one keypair each: root (superadmin, of d1), admin1 and admin2 (admins of d1
    and d2), alice and bob (users of d1, in its ml) and mona (monitor of d1)."""

    world: World
    root: Person
    admin1: Person
    admin2: Person
    alice: Person
    bob: Person
    mona: Person


async def organisation() -> Org:
    world = World()
    await world.given(
        *policies(),
        a.CreateDomain(name="d1", **by()),
        a.CreateDomain(name="d2", **by()),
        a.CreateProject(domain="d1", name="ml", **by()),
        a.CreateProject(domain="d2", name="ml", **by()),
    )
    people = {
        "root": ("d1", Role.SUPERADMIN, ()),
        "admin1": ("d1", Role.ADMIN, ()),
        "admin2": ("d2", Role.ADMIN, ()),
        "alice": ("d1", Role.USER, (PID1,)),
        "bob": ("d1", Role.USER, (PID1,)),
        "mona": ("d1", Role.MONITOR, ()),
    }
    for name, (domain, role, projects) in people.items():
        await world.given(new_user(name, domain, role, projects), new_keypair(f"AK{name}", name))
    persons = [Person(name, f"AK{name}") for name in people]
    return Org(world, *persons)
