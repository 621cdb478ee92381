"""The folded tenancy directory, from events: who an actor is, which limits bind a scope,
which resource groups a tenant may use, and what it does with events it cannot read."""

from __future__ import annotations

import pytest

from commands.authorisation import Principal
from commands.directory import Directory, NoKeypairError
from events.catalogue import Event
from events.domain.tenancy import (
    DomainCreated,
    DomainDeactivated,
    ImageForgotten,
    ImageRegistered,
    KeypairCreated,
    KeypairDeactivated,
    ProjectCreated,
    ProjectDeactivated,
    ResourceGroupAssociated,
    ResourceGroupCreated,
    ResourceGroupDeactivated,
    ResourceGroupModified,
    ResourcePolicyCreated,
    UserCreated,
    UserDeactivated,
    UserDefaultKeypairSet,
)
from events.envelope import StoredEvent
from schemas.principal import Actor, ActorKind
from schemas.session import SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import (
    AgentSelection,
    DefaultForUnspecified,
    DeviceFill,
    GroupScheduling,
    HeadOfLine,
    KeypairPolicyLimits,
    PolicyKind,
    QueuePolicy,
    Role,
    ScopeKind,
    SessionOwner,
    SlotLimits,
    email_digest,
    image_id_for,
    project_id_for,
    user_id_for,
)
from tests.unit.scenario import at, envelope_of

DIGEST = email_digest("ada@example.org", b"test-key")
UID = user_id_for(DIGEST)
PID = project_id_for("d1", "ml")
OTHER_PID = project_id_for("d1", "old")
GPU2 = SlotLimits(gpu_hundredths=200)
LIMITS = KeypairPolicyLimits(
    total_resource_slots=GPU2, default_for_unspecified=DefaultForUnspecified.LIMITED
)


class Log:
    """Events in stream order, each aggregate's versions counted as they come."""

    def __init__(self, directory: Directory) -> None:
        self.directory = directory
        self.seq = 0
        self.versions: dict[tuple[AggregateType, str], int] = {}

    def add(self, aggregate_id: str, *events: Event) -> None:
        for event in events:
            key = (type(event).aggregate_type, aggregate_id)
            self.versions[key] = self.versions.get(key, 0) + 1
            self.seq += 1
            envelope = envelope_of(aggregate_id, self.versions[key], event, at(self.seq))
            self.directory.apply(StoredEvent(self.seq, envelope))


@pytest.fixture
def log() -> Log:
    log = Log(Directory())
    log.add(
        "keypair-small",
        ResourcePolicyCreated(kind=PolicyKind.KEYPAIR, name="small", keypair=LIMITS),
    )
    log.add("d1", DomainCreated(total_resource_slots=SlotLimits(cpu_milli=64_000)))
    log.add(PID, ProjectCreated(domain="d1", name="ml", total_resource_slots=GPU2))
    log.add(OTHER_PID, ProjectCreated(domain="d1", name="old"), ProjectDeactivated())
    user = UserCreated(
        domain="d1", role=Role.USER, email_digest=DIGEST, email_sealed="x",
        projects=(PID, OTHER_PID),
    )  # fmt: skip
    log.add(UID, user)
    log.add("AK1", KeypairCreated(user_id=UID, domain="d1", secret_key_id="s", policy="small"))
    log.add(UID, UserDefaultKeypairSet(access_key="AK1"))
    return log


def test_a_keypair_actor_is_its_user_with_that_key(log: Log) -> None:
    who = log.directory.principal(Actor(kind=ActorKind.KEYPAIR, id="AK1"))
    # The deactivated project grants nothing.
    assert who == Principal(UID, Role.USER, "d1", frozenset({PID}), "AK1")


def test_a_user_actor_acts_with_their_default_keypair(log: Log) -> None:
    who = log.directory.principal(Actor(kind=ActorKind.USER, id=UID))
    assert who is not None and who.access_key == "AK1"
    log.add("AK1", KeypairDeactivated(reason="leaked"))
    who = log.directory.principal(Actor(kind=ActorKind.USER, id=UID))
    assert who is not None and who.access_key is None
    with pytest.raises(NoKeypairError, match="no active keypair"):
        log.directory.owner(who, PID)


@pytest.mark.parametrize(
    ("aggregate_id", "event"),
    [
        ("AK1", KeypairDeactivated()),
        (UID, UserDeactivated()),
        ("d1", DomainDeactivated()),
    ],
)
def test_nobody_is_resolved_through_something_deactivated(
    log: Log, aggregate_id: str, event: Event
) -> None:
    log.add(aggregate_id, event)
    assert log.directory.principal(Actor(kind=ActorKind.KEYPAIR, id="AK1")) is None


def test_unknown_actors_and_services_are_nobody(log: Log) -> None:
    directory = log.directory
    assert directory.principal(Actor(kind=ActorKind.KEYPAIR, id="AK-unknown")) is None
    assert directory.principal(Actor(kind=ActorKind.USER, id="u-unknown")) is None
    assert directory.principal(Actor.service("scheduler")) is None


def test_limits_per_scope(log: Log) -> None:
    d = log.directory
    assert d.keypair_limits("AK1") == LIMITS
    assert d.keypair_limits("AK-unknown") is None
    assert d.scope_limits(ScopeKind.KEYPAIR, "AK1") == (GPU2, DefaultForUnspecified.LIMITED)
    assert d.scope_limits(ScopeKind.PROJECT, PID) == (GPU2, DefaultForUnspecified.UNLIMITED)
    assert d.scope_limits(ScopeKind.DOMAIN, "d1") == (
        SlotLimits(cpu_milli=64_000), DefaultForUnspecified.UNLIMITED,
    )  # fmt: skip
    assert d.scope_limits(ScopeKind.USER, UID) == (SlotLimits(), DefaultForUnspecified.UNLIMITED)
    # What cannot be seen may hold nothing, rather than everything.
    assert d.scope_limits(ScopeKind.PROJECT, "nope") == (
        SlotLimits(),
        DefaultForUnspecified.LIMITED,
    )


def test_scope_names_are_readable(log: Log) -> None:
    d = log.directory
    assert d.scope_name(ScopeKind.PROJECT, PID) == "ml"
    assert d.scope_name(ScopeKind.DOMAIN, "d1") == "d1"
    assert d.scope_name(ScopeKind.USER, UID) == UID[:8]
    assert d.scope_name(ScopeKind.KEYPAIR, "AK1") == "AK1"


def test_allowed_groups_are_the_union_of_active_associations(log: Log) -> None:
    for name in ("by-domain", "by-project", "by-key", "closed", "elsewhere"):
        log.add(name, ResourceGroupCreated())
    log.add("by-domain", ResourceGroupAssociated(scope=ScopeKind.DOMAIN, scope_id="d1"))
    log.add("by-project", ResourceGroupAssociated(scope=ScopeKind.PROJECT, scope_id=PID))
    log.add("by-key", ResourceGroupAssociated(scope=ScopeKind.KEYPAIR, scope_id="AK1"))
    log.add("closed", ResourceGroupAssociated(scope=ScopeKind.DOMAIN, scope_id="d1"))
    log.add("closed", ResourceGroupDeactivated())
    log.add("elsewhere", ResourceGroupAssociated(scope=ScopeKind.DOMAIN, scope_id="d2"))
    assert log.directory.allowed_groups("d1", PID, "AK1") == {"by-domain", "by-project", "by-key"}
    assert log.directory.allowed_groups("d1", OTHER_PID, "AK2") == {"by-domain"}


def test_group_scheduling_is_the_groups_latest_settings_or_the_defaults(log: Log) -> None:
    d = log.directory
    assert d.group_scheduling("default") == GroupScheduling()  # no admin created it yet
    drf = GroupScheduling(queue_policy=QueuePolicy.DRF, agent_selection=AgentSelection.DISPERSED)
    log.add("gpu-a", ResourceGroupCreated(scheduling=drf))
    assert d.group_scheduling("gpu-a") == GroupScheduling(
        queue_policy=QueuePolicy.DRF, agent_selection=AgentSelection.DISPERSED
    )
    blocking = ResourceGroupModified(
        description="", allowed_session_types=tuple(SessionType),
        scheduling=GroupScheduling(
            queue_policy=QueuePolicy.FIFO, agent_selection=AgentSelection.CONCENTRATED,
            head_of_line=HeadOfLine.BLOCK, starvation_after_s=60, fragmentation_guard=False,
            device_fill=DeviceFill.EVENLY,
        ),
    )  # fmt: skip
    log.add("gpu-a", blocking, ResourceGroupDeactivated())
    assert d.group_scheduling("gpu-a") == GroupScheduling(
        head_of_line=HeadOfLine.BLOCK, starvation_after_s=60, fragmentation_guard=False,
        device_fill=DeviceFill.EVENLY,
    )  # fmt: skip


def test_images_users_and_owners(log: Log) -> None:
    d = log.directory
    log.add(image_id_for("py:3"), ImageRegistered(name="py:3"))
    log.add(image_id_for("old:1"), ImageRegistered(name="old:1"), ImageForgotten())
    image = d.image("py:3")
    assert image is not None and image.name == "py:3"
    assert d.image("old:1") is None and d.image("never") is None
    user = d.user_by_digest(DIGEST)
    assert user is not None and user.id == UID
    who = d.principal(Actor(kind=ActorKind.KEYPAIR, id="AK1"))
    assert who is not None
    assert d.owner(who, PID) == SessionOwner(
        access_key="AK1", user_id=UID, project_id=PID, domain="d1"
    )


def test_evolve_is_idempotent_without_the_directorys_own_guards(log: Log) -> None:
    """The scheduler calls ``evolve`` from its own fold: a replayed event changes nothing."""
    again = Directory()
    first = envelope_of("g", 1, ResourceGroupCreated(), at(0))
    second = envelope_of(
        "g", 2, ResourceGroupAssociated(scope=ScopeKind.DOMAIN, scope_id="d1"), at(1)
    )
    for seq, envelope in enumerate([first, second, first, second], start=1):
        again.evolve(StoredEvent(seq, envelope))
    assert again.groups["g"].version == 2 and again.groups["g"].domains == frozenset({"d1"})


def test_an_unreadable_aggregate_is_set_aside_not_folded(log: Log) -> None:
    d = log.directory
    # A change before any creation (a gap, or written by something else) cannot be folded.
    orphan = envelope_of("AK9", 2, KeypairDeactivated(), at(99))
    d.apply(StoredEvent(999, orphan))
    assert "AK9" not in d.keypairs and d.is_broken(AggregateType.KEYPAIR, "AK9")
    later = envelope_of("AK9", 3, KeypairDeactivated(), at(100))
    d.apply(StoredEvent(1000, later))  # still set aside, and nothing raised
    assert "AK9" not in d.keypairs
    assert d.principal(Actor(kind=ActorKind.KEYPAIR, id="AK1")) is not None
