"""Tenancy state folded from ``ev.domain.*``, ``ev.project.*``, ``ev.user.*``,
``ev.keypair.*``, ``ev.resource_policy.*``, ``ev.resource_group.*``, ``ev.image.*``,
``ev.registry.*`` and ``ev.join_token.*``: who a
request's actor is, which limits bind a scope, which resource groups a tenant may use.

The tenancy service decides on it, the gateway and the storage service fold it to authorise,
and the scheduler folds it inside its own state (calling ``evolve`` directly), so ``evolve``
relies on nothing but the aggregates it holds: each aggregate skips versions it already has.
Reads and writes nothing itself.
"""

from __future__ import annotations

import logging
from typing import Any

from commands.aggregate import Aggregate
from commands.authorisation import Principal
from commands.correction import Correction
from commands.errors import DomainError
from commands.join_token import JoinToken
from commands.registry import Registry
from commands.tenancy import (
    Domain,
    Image,
    Keypair,
    Project,
    ResourceGroup,
    ResourcePolicy,
    User,
)
from events.envelope import StoredEvent
from events.fold import FoldedState
from schemas.fair_share import SHARE_DEFAULT
from schemas.images import ImageSource, source_of
from schemas.principal import Actor, ActorKind
from schemas.subjects import AggregateType, event_subject, events_of
from schemas.tenancy import (
    DefaultForUnspecified,
    GroupScheduling,
    KeypairPolicyLimits,
    PolicyKind,
    ScopeKind,
    SessionOwner,
    SlotLimits,
    image_id_for,
    policy_id_for,
    user_id_for,
)

log = logging.getLogger(__name__)

TENANCY_TYPES = (
    AggregateType.DOMAIN,
    AggregateType.PROJECT,
    AggregateType.USER,
    AggregateType.KEYPAIR,
    AggregateType.RESOURCE_POLICY,
    AggregateType.RESOURCE_GROUP,
    AggregateType.IMAGE,
    AggregateType.REGISTRY,
    AggregateType.JOIN_TOKEN,
    AggregateType.CORRECTION,
)
TENANCY_SUBJECTS = [events_of(kind) for kind in TENANCY_TYPES]
"""The filters a fold of the directory reads."""

CLASSES: dict[AggregateType, type[Aggregate]] = {
    cls.aggregate_type: cls
    for cls in (
        Domain,
        Project,
        User,
        Keypair,
        ResourcePolicy,
        ResourceGroup,
        Image,
        Registry,
        JoinToken,
        Correction,
    )
}

# What an unknown scope is limited to: nothing. Admission then refuses rather than admits on
# limits it cannot see (a policy named but not yet folded, or deleted data).
NOTHING = (SlotLimits(), DefaultForUnspecified.LIMITED)


class NoKeypairError(DomainError):
    """A session needs a keypair to be owned by, and the person has none in use.
    ``extensions`` is what the gateway answers (GraphQL takes an error's own extensions): a
    refusal with its code and what to do, never an internal error."""

    extensions = {"code": "no-keypair"}


class Directory(FoldedState):
    folds_corrections = True  # the directory keeps ev.correction.* (the tenancy service's)

    def __init__(self) -> None:
        super().__init__()
        self.domains: dict[str, Domain] = {}
        self.projects: dict[str, Project] = {}
        self.users: dict[str, User] = {}
        self.keypairs: dict[str, Keypair] = {}
        self.policies: dict[str, ResourcePolicy] = {}
        self.groups: dict[str, ResourceGroup] = {}
        self.images: dict[str, Image] = {}
        self.registries: dict[str, Registry] = {}
        """By registry id (``registry_id_for(name)``)."""
        self.join_tokens: dict[str, JoinToken] = {}
        """By token id (never holding a secret: only its digest)."""
        self.corrections: dict[str, Correction] = {}
        """Operators' corrections of quarantined aggregates, by correction id."""
        """Subjects whose events this code cannot fold; nothing is decided on them."""
        self._created_by: dict[str, str] = {}
        self._by_type: dict[AggregateType, dict[str, Any]] = {
            AggregateType.DOMAIN: self.domains,
            AggregateType.PROJECT: self.projects,
            AggregateType.USER: self.users,
            AggregateType.KEYPAIR: self.keypairs,
            AggregateType.RESOURCE_POLICY: self.policies,
            AggregateType.RESOURCE_GROUP: self.groups,
            AggregateType.IMAGE: self.images,
            AggregateType.REGISTRY: self.registries,
            AggregateType.JOIN_TOKEN: self.join_tokens,
            AggregateType.CORRECTION: self.corrections,
        }

    # ---- folding -------------------------------------------------------------------------

    def evolve(self, event: StoredEvent) -> None:
        # An event that cannot be applied raises: the fold holds the aggregate (quarantine)
        # and calls ``forget``, so the directory never answers from half an aggregate.
        envelope = event.envelope
        table = self._by_type.get(envelope.aggregate_type)
        if table is None:
            return
        known: Aggregate | None = table.get(envelope.aggregate_id)
        if known is None:
            created = CLASSES[envelope.aggregate_type].rehydrate([envelope])
            assert created is not None
            table[created.id] = created
            self._created_by[envelope.subject] = envelope.causation_id
        else:
            known.evolve([envelope])

    def forget(self, subject: str) -> None:
        self.broken.add(subject)
        parts = subject.split(".", 2)
        if len(parts) == 3:
            for kind, table in self._by_type.items():
                if kind == parts[1]:
                    table.pop(parts[2], None)

    def is_broken(self, kind: AggregateType, aggregate_id: str) -> bool:
        return event_subject(kind, aggregate_id) in self.broken

    def created_by(self, kind: AggregateType, aggregate_id: str) -> str | None:
        """The command (causation id) that created an aggregate: a create redelivered after
        it was stored is recognised as done, not refused as a duplicate."""
        return self._created_by.get(event_subject(kind, aggregate_id))

    # ---- who is asking -------------------------------------------------------------------

    def principal(self, actor: Actor) -> Principal | None:
        """The person behind a keypair or user actor; None when the keypair, the user or
        their domain is unknown or deactivated (and for services, which are not people)."""
        if actor.kind is ActorKind.KEYPAIR:
            keypair = self.keypairs.get(actor.id)
            if keypair is None or not keypair.active:
                return None
            return self._person(keypair.user_id, actor.id)
        if actor.kind is ActorKind.USER:
            user = self.users.get(actor.id)
            if user is None:
                return None
            default = self.keypairs.get(user.default_access_key or "")
            access_key = default.id if default is not None and default.active else None
            return self._person(actor.id, access_key)
        return None

    def _person(self, user_id: str, access_key: str | None) -> Principal | None:
        user = self.users.get(user_id)
        if user is None or not user.active:
            return None
        domain = self.domains.get(user.domain)
        if domain is None or not domain.active:
            return None
        # A deactivated project grants nothing (no new sessions in it).
        projects = frozenset(p for p in user.projects if self._active_project(p))
        return Principal(user.id, user.role, user.domain, projects, access_key)

    def _active_project(self, project_id: str) -> bool:
        project = self.projects.get(project_id)
        return project is not None and project.active

    def user_by_digest(self, digest: str) -> User | None:
        return self.users.get(user_id_for(digest))

    def owner(self, principal: Principal, project_id: str) -> SessionOwner:
        """Whose a new session is: every scope its slots are reserved on."""
        if principal.access_key is None:
            raise NoKeypairError(
                f"user {principal.user_id[:8]} has no active keypair to own sessions: an "
                f"admin of domain {principal.domain} issues one (`jetyard admin keypair "
                "create EMAIL`, or Issue keypair on the console's People page)"
            )
        return SessionOwner(
            access_key=principal.access_key,
            user_id=principal.user_id,
            project_id=project_id,
            domain=principal.domain,
        )

    # ---- limits --------------------------------------------------------------------------

    def keypair_limits(self, access_key: str) -> KeypairPolicyLimits | None:
        """The limits of the keypair's policy; None if the keypair or policy is unknown."""
        keypair = self.keypairs.get(access_key)
        if keypair is None:
            return None
        policy = self.policies.get(policy_id_for(PolicyKind.KEYPAIR, keypair.policy))
        return policy.keypair if policy is not None else None

    def scope_limits(
        self, kind: ScopeKind, scope_id: str
    ) -> tuple[SlotLimits, DefaultForUnspecified]:
        """The slots a scope may hold at once, and what unnamed slots are limited to. An
        unknown scope may hold nothing."""
        if kind is ScopeKind.KEYPAIR:
            limits = self.keypair_limits(scope_id)
            if limits is None:
                return NOTHING
            return limits.total_resource_slots, limits.default_for_unspecified
        if kind is ScopeKind.USER:
            return SlotLimits(), DefaultForUnspecified.UNLIMITED
        scope: Project | Domain | None = (
            self.projects.get(scope_id) if kind is ScopeKind.PROJECT else self.domains.get(scope_id)
        )
        if scope is None:
            return NOTHING
        return scope.total_resource_slots, DefaultForUnspecified.UNLIMITED

    def scope_name(self, kind: ScopeKind, scope_id: str) -> str:
        """A readable name for reasons users see ("project ml-team is at its gpu limit")."""
        if kind is ScopeKind.PROJECT:
            project = self.projects.get(scope_id)
            return project.name if project is not None else scope_id[:8]
        if kind is ScopeKind.USER:
            return scope_id[:8]  # the id is all there is: emails never leave the seal
        return scope_id  # a domain's id is its name; a keypair's its access key

    # ---- what may be used ----------------------------------------------------------------

    def allowed_groups(self, domain: str, project_id: str, access_key: str) -> set[str]:
        """Active resource groups associated with the domain, the project or the keypair."""
        return {
            name
            for name, group in self.groups.items()
            if group.active
            and (
                domain in group.domains
                or project_id in group.projects
                or access_key in group.keypairs
            )
        }

    def group_scheduling(self, name: str) -> GroupScheduling:
        """How a group queues and places; ``GroupScheduling()`` for a group no admin has
        created (``default`` before ``jetyard up`` bootstraps it, or a group only agents name)."""
        group = self.groups.get(name)
        return GroupScheduling() if group is None else group.scheduling

    def fair_share(self, level: str, key: str) -> int:
        """The share of a domain (by name), project or user (by id) for fair share
        (``placement.fairshare.ShareOf``); 1 for one not known."""
        found: Domain | Project | User | None
        if level == "domain":
            found = self.domains.get(key)
        elif level == "project":
            found = self.projects.get(key)
        else:
            found = self.users.get(key)
        return found.fair_share if found is not None else SHARE_DEFAULT

    def image(self, name: str) -> Image | None:
        """A registered image (not forgotten) by name."""
        image = self.images.get(image_id_for(name))
        return image if image is not None and not image.forgotten else None

    def image_source(self, name: str, project_id: str | None, group: str) -> ImageSource | None:
        """Where a node pulls ``name`` from for a session of ``project_id`` in ``group``: its
        registry when a rescan found it there, the registry is still added and serves the
        project; None otherwise (then only a node that holds the image runs it)."""
        image = self.image(name)
        if image is None or not image.registry:
            return None
        registry = self.registries.get(image.registry)
        if registry is None or registry.removed or not registry.serves(project_id):
            return None
        policy = image.pull_policy or self.group_scheduling(group).pull_policy
        return source_of(name, image.registry, image.digest, policy)
