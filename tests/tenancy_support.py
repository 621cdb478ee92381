"""A tenancy for tests, written as raw tenancy events: a domain, a project, a user, a keypair
policy, a keypair, and the resource group associated with the domain. Writes
``ev.domain.*``, ``ev.project.*``, ``ev.user.*``, ``ev.resource_policy.*``, ``ev.keypair.*``
and ``ev.resource_group.<name>``.

Shared by every test that creates sessions: keep ``make_tenancy``'s signature stable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from events.catalogue import Event
from events.domain.tenancy import (
    DomainCreated,
    KeypairCreated,
    KeypairDeactivated,
    ProjectCreated,
    ResourceGroupAssociated,
    ResourceGroupCreated,
    ResourcePolicyCreated,
    ResourcePolicyModified,
    UserCreated,
)
from events.envelope import Envelope
from events.store import EventStore
from events.writes import AggregateRef, ConcurrencyConflict, Write
from schemas.ids import event_id_for, new_id
from schemas.principal import SYSTEM_TENANT, Actor
from schemas.subjects import AggregateType
from schemas.tenancy import (
    CREATED_SCHEDULING,
    GroupScheduling,
    KeypairPolicyLimits,
    PolicyKind,
    Role,
    ScopeKind,
    SessionOwner,
    SlotLimits,
    email_digest,
    policy_id_for,
    project_id_for,
    user_id_for,
)

ADMIN = Actor.service("tests-admin")
NO_LIMITS = SlotLimits()
UNLIMITED_KEYPAIR = KeypairPolicyLimits(max_containers_per_session=1)
DIGEST_KEY = b"tests"


@dataclass(frozen=True)
class Tenancy:
    domain: str
    project_id: str
    project_name: str
    user_id: str
    access_key: str
    policy: str
    resource_group: str

    @property
    def owner(self) -> SessionOwner:
        return SessionOwner(
            access_key=self.access_key,
            user_id=self.user_id,
            project_id=self.project_id,
            domain=self.domain,
        )


async def record(store: EventStore, kind: AggregateType, aggregate_id: str, *events: Event) -> None:
    """Append ``events`` to an aggregate after whatever it holds (retrying on a race)."""
    ref = AggregateRef(kind, aggregate_id)
    while True:
        history = await store.read(ref)
        version = history.events[-1].envelope.aggregate_version if history.events else 0
        cause = new_id()
        envelopes = [_envelope(ref, version + i, event, cause) for i, event in enumerate(events, 1)]
        try:
            await store.append(Write(ref, history.last_seq, tuple(envelopes)))
            return
        except ConcurrencyConflict:
            continue


async def make_tenancy(
    store: EventStore,
    *,
    limits: KeypairPolicyLimits = UNLIMITED_KEYPAIR,
    project_slots: SlotLimits = NO_LIMITS,
    domain_slots: SlotLimits = NO_LIMITS,
    resource_group: str = "default",
    scheduling: GroupScheduling | None = None,
) -> Tenancy:
    suffix = new_id()[:8]
    domain = f"dom-{suffix}"
    project_name = f"proj-{suffix}"
    project_id = project_id_for(domain, project_name)
    user_id = user_id_for(email_digest(f"user-{suffix}@example.org", DIGEST_KEY))
    access_key = f"AK{new_id().replace('-', '')[:18].upper()}"
    policy = f"kp-{suffix}"
    await record(
        store, AggregateType.DOMAIN, domain, DomainCreated(total_resource_slots=domain_slots)
    )
    await add_project(store, domain, project_name, project_slots)
    await record(
        store,
        AggregateType.USER,
        user_id,
        UserCreated(
            domain=domain,
            role=Role.USER,
            email_digest=email_digest(f"user-{suffix}@example.org", DIGEST_KEY),
            email_sealed="sealed",
            projects=(project_id,),
        ),
    )
    await record(
        store,
        AggregateType.RESOURCE_POLICY,
        policy_id_for(PolicyKind.KEYPAIR, policy),
        ResourcePolicyCreated(kind=PolicyKind.KEYPAIR, name=policy, keypair=limits),
    )
    await associate_group(store, resource_group, ScopeKind.DOMAIN, domain, scheduling)
    # The keypair last: a scheduler that has not folded it yet catches up before deciding a
    # create, and then holds everything written before it. (It does not check the group's
    # association that way: written last, a lagging replica refused the group.)
    await record(
        store,
        AggregateType.KEYPAIR,
        access_key,
        KeypairCreated(user_id=user_id, domain=domain, secret_key_id=new_id(), policy=policy),
    )
    return Tenancy(domain, project_id, project_name, user_id, access_key, policy, resource_group)


async def add_project(
    store: EventStore, domain: str, name: str, slots: SlotLimits = NO_LIMITS
) -> str:
    """Another project of a domain (its users are not changed: owners name the project)."""
    project_id = project_id_for(domain, name)
    created = ProjectCreated(domain=domain, name=name, total_resource_slots=slots)
    await record(store, AggregateType.PROJECT, project_id, created)
    return project_id


async def associate_group(
    store: EventStore,
    group: str,
    scope: ScopeKind,
    scope_id: str,
    scheduling: GroupScheduling | None = None,
) -> None:
    """Let a scope use a resource group, creating the group first (with ``scheduling``) if no
    one has: groups are shared between tests, so a lost race reloads and tries again."""
    ref = AggregateRef(AggregateType.RESOURCE_GROUP, group)
    associated = ResourceGroupAssociated(scope=scope, scope_id=scope_id)
    while True:
        history = await store.read(ref)
        if history.events:
            version = history.events[-1].envelope.aggregate_version
            events: tuple[Event, ...] = (associated,)
        else:
            version = 0
            created = ResourceGroupCreated(
                scheduling=CREATED_SCHEDULING if scheduling is None else scheduling
            )
            events = (created, associated)
        cause = new_id()
        envelopes = [_envelope(ref, version + i, e, cause) for i, e in enumerate(events, 1)]
        try:
            await store.append(Write(ref, history.last_seq, tuple(envelopes)))
            return
        except ConcurrencyConflict:
            continue


async def set_keypair_limits(
    store: EventStore, tenancy: Tenancy, limits: KeypairPolicyLimits
) -> None:
    policy_id = policy_id_for(PolicyKind.KEYPAIR, tenancy.policy)
    await record(
        store, AggregateType.RESOURCE_POLICY, policy_id, ResourcePolicyModified(keypair=limits)
    )


async def deactivate_keypair(store: EventStore, tenancy: Tenancy, reason: str = "") -> None:
    await record(
        store, AggregateType.KEYPAIR, tenancy.access_key, KeypairDeactivated(reason=reason)
    )


def _envelope(ref: AggregateRef, version: int, event: Event, cause: str) -> Envelope:
    return Envelope(
        event_id=event_id_for(cause, ref.type.value, ref.id, version),
        name=type(event).event_name,
        schema_version=type(event).schema_version,
        aggregate_type=ref.type,
        aggregate_id=ref.id,
        aggregate_version=version,
        occurred_at=datetime.now(UTC),
        causation_id=cause,
        correlation_id=cause,
        actor=ADMIN,
        tenant=SYSTEM_TENANT,
        payload=event.model_dump(mode="json"),
    )


async def add_member(
    store: EventStore, tenancy: Tenancy, *, project_slots: SlotLimits = NO_LIMITS
) -> Tenancy:
    """Another project of the same domain, with a user of its own (a member) and a keypair
    under the same keypair policy."""
    suffix = new_id()[:8]
    project_name = f"proj-{suffix}"
    project_id = await add_project(store, tenancy.domain, project_name, project_slots)
    digest = email_digest(f"user-{suffix}@example.org", DIGEST_KEY)
    user_id = user_id_for(digest)
    created = UserCreated(
        domain=tenancy.domain,
        role=Role.USER,
        email_digest=digest,
        email_sealed="sealed",
        projects=(project_id,),
    )
    await record(store, AggregateType.USER, user_id, created)
    access_key = f"AK{new_id().replace('-', '')[:18].upper()}"
    keypair = KeypairCreated(
        user_id=user_id, domain=tenancy.domain, secret_key_id=new_id(), policy=tenancy.policy
    )
    await record(store, AggregateType.KEYPAIR, access_key, keypair)
    return Tenancy(
        tenancy.domain, project_id, project_name, user_id, access_key, tenancy.policy,
        tenancy.resource_group,
    )  # fmt: skip
