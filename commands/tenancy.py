"""Tenancy aggregates, decided by the tenancy service: ``Domain``
(``ev.domain.<name>``), ``Project`` (``ev.project.<id>``) and ``ResourcePolicy``
(``ev.resource_policy.<kind>-<name>``). Users and keypairs are in ``commands.people``, resource
groups and images in ``commands.cluster`` (re-exported here: one import for all of tenancy).

Rules that need more than one aggregate (a project's domain exists, a policy name is known)
are the tenancy service's; the rules here need only the aggregate itself. Repeating a change
that is already true records nothing and answers False.
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel

from commands.aggregate import Aggregate
from commands.cluster import (
    GROUP_SCOPES,
    Image,
    ImageForgottenError,
    InvalidSettingsError,
    ResourceGroup,
)
from commands.people import Keypair, User
from events.domain.tenancy import (
    DomainCreated,
    DomainDeactivated,
    DomainModified,
    DomainReactivated,
    ProjectCreated,
    ProjectDeactivated,
    ProjectModified,
    ProjectReactivated,
    ResourcePolicyCreated,
    ResourcePolicyModified,
)
from schemas.fair_share import SHARE_DEFAULT
from schemas.subjects import AggregateType
from schemas.tenancy import (
    KeypairPolicyLimits,
    PolicyKind,
    SlotLimits,
    StoragePolicyLimits,
    policy_id_for,
)

__all__ = [
    "GROUP_SCOPES",
    "Domain",
    "Image",
    "ImageForgottenError",
    "InvalidSettingsError",
    "Keypair",
    "Project",
    "ResourceGroup",
    "ResourcePolicy",
    "User",
]


class Domain(Aggregate):
    aggregate_type = AggregateType.DOMAIN

    class State(BaseModel):
        name: str
        description: str
        total_resource_slots: SlotLimits
        active: bool
        fair_share: int = SHARE_DEFAULT

    def __init__(self) -> None:
        self.name = ""
        self.description = ""
        self.total_resource_slots = SlotLimits()
        self.active = True
        self.fair_share = SHARE_DEFAULT

    @classmethod
    def create(
        cls, name: str, description: str, total_resource_slots: SlotLimits, now: datetime,
        fair_share: int = SHARE_DEFAULT,
    ) -> Domain:  # fmt: skip
        return cls._create(
            cls.Created, id=name, timestamp=now, description=description,
            total_resource_slots=total_resource_slots, fair_share=fair_share,
        )  # fmt: skip

    def modify(
        self, description: str, total_resource_slots: SlotLimits, now: datetime,
        fair_share: int | None = None,
    ) -> bool:  # fmt: skip
        """``fair_share`` None keeps the domain's."""
        share = self.fair_share if fair_share is None else fair_share
        wanted = (description, total_resource_slots, share)
        if wanted == (self.description, self.total_resource_slots, self.fair_share):
            return False
        return self._trigger(
            self.Modified, now, description=description,
            total_resource_slots=total_resource_slots, fair_share=share,
        )  # fmt: skip

    def deactivate(self, reason: str, now: datetime) -> bool:
        return self.active and self._trigger(self.Deactivated, now, reason=reason)

    def reactivate(self, now: datetime) -> bool:
        return not self.active and self._trigger(self.Reactivated, now)

    class Created(DomainCreated, Aggregate.Created):
        def apply(self, domain: Domain) -> None:
            domain.name = self.originator_id
            domain.description = self.description
            domain.total_resource_slots = self.total_resource_slots
            domain.fair_share = self.fair_share

    class Modified(DomainModified, Aggregate.Event):
        def apply(self, domain: Domain) -> None:
            domain.description = self.description
            domain.total_resource_slots = self.total_resource_slots
            domain.fair_share = self.fair_share

    class Deactivated(DomainDeactivated, Aggregate.Event):
        def apply(self, domain: Domain) -> None:
            domain.active = False

    class Reactivated(DomainReactivated, Aggregate.Event):
        def apply(self, domain: Domain) -> None:
            domain.active = True


class Project(Aggregate):
    aggregate_type = AggregateType.PROJECT

    class State(BaseModel):
        domain: str
        name: str
        description: str
        total_resource_slots: SlotLimits
        policy: str
        active: bool
        fair_share: int = SHARE_DEFAULT

    def __init__(self) -> None:
        self.domain = ""
        self.name = ""
        self.description = ""
        self.total_resource_slots = SlotLimits()
        self.policy = "default"
        self.active = True
        self.fair_share = SHARE_DEFAULT

    @classmethod
    def create(
        cls, project_id: str, domain: str, name: str, description: str,
        total_resource_slots: SlotLimits, policy: str, now: datetime,
        fair_share: int = SHARE_DEFAULT,
    ) -> Project:  # fmt: skip
        return cls._create(
            cls.Created, id=project_id, timestamp=now, domain=domain, name=name,
            description=description, total_resource_slots=total_resource_slots, policy=policy,
            fair_share=fair_share,
        )  # fmt: skip

    def modify(
        self, description: str, total_resource_slots: SlotLimits, policy: str, now: datetime,
        fair_share: int | None = None,
    ) -> bool:  # fmt: skip
        """``fair_share`` None keeps the project's."""
        share = self.fair_share if fair_share is None else fair_share
        wanted = (description, total_resource_slots, policy, share)
        if wanted == (self.description, self.total_resource_slots, self.policy, self.fair_share):
            return False
        return self._trigger(
            self.Modified, now, description=description,
            total_resource_slots=total_resource_slots, policy=policy, fair_share=share,
        )  # fmt: skip

    def deactivate(self, reason: str, now: datetime) -> bool:
        return self.active and self._trigger(self.Deactivated, now, reason=reason)

    def reactivate(self, now: datetime) -> bool:
        return not self.active and self._trigger(self.Reactivated, now)

    class Created(ProjectCreated, Aggregate.Created):
        def apply(self, project: Project) -> None:
            project.domain = self.domain
            project.name = self.name
            project.description = self.description
            project.total_resource_slots = self.total_resource_slots
            project.policy = self.policy
            project.fair_share = self.fair_share

    class Modified(ProjectModified, Aggregate.Event):
        def apply(self, project: Project) -> None:
            project.description = self.description
            project.total_resource_slots = self.total_resource_slots
            project.policy = self.policy
            project.fair_share = self.fair_share

    class Deactivated(ProjectDeactivated, Aggregate.Event):
        def apply(self, project: Project) -> None:
            project.active = False

    class Reactivated(ProjectReactivated, Aggregate.Event):
        def apply(self, project: Project) -> None:
            project.active = True


def _check_limits(
    kind: PolicyKind, keypair: KeypairPolicyLimits | None, storage: StoragePolicyLimits | None
) -> None:
    # Admission reads ``keypair`` limits and storage reads ``storage`` ones: a policy with the
    # wrong half would silently limit nothing.
    if kind is PolicyKind.KEYPAIR and (keypair is None or storage is not None):
        raise InvalidSettingsError("a keypair resource policy sets 'keypair' limits, not 'storage'")
    if kind is not PolicyKind.KEYPAIR and (storage is None or keypair is not None):
        raise InvalidSettingsError(
            f"a {kind.value} resource policy sets 'storage' limits, not 'keypair'"
        )


class ResourcePolicy(Aggregate):
    aggregate_type = AggregateType.RESOURCE_POLICY

    class State(BaseModel):
        kind: PolicyKind
        name: str
        keypair: KeypairPolicyLimits | None
        storage: StoragePolicyLimits | None

    def __init__(self) -> None:
        self.kind = PolicyKind.KEYPAIR
        self.name = ""
        self.keypair: KeypairPolicyLimits | None = None
        self.storage: StoragePolicyLimits | None = None

    @classmethod
    def create(
        cls, kind: PolicyKind, name: str, keypair: KeypairPolicyLimits | None,
        storage: StoragePolicyLimits | None, now: datetime,
    ) -> ResourcePolicy:  # fmt: skip
        _check_limits(kind, keypair, storage)
        return cls._create(
            cls.Created, id=policy_id_for(kind, name), timestamp=now, kind=kind, name=name,
            keypair=keypair, storage=storage,
        )  # fmt: skip

    def modify(
        self, keypair: KeypairPolicyLimits | None, storage: StoragePolicyLimits | None,
        now: datetime,
    ) -> bool:  # fmt: skip
        _check_limits(self.kind, keypair, storage)
        if (keypair, storage) == (self.keypair, self.storage):
            return False
        return self._trigger(self.Modified, now, keypair=keypair, storage=storage)

    class Created(ResourcePolicyCreated, Aggregate.Created):
        def apply(self, policy: ResourcePolicy) -> None:
            policy.kind = self.kind
            policy.name = self.name
            policy.keypair = self.keypair
            policy.storage = self.storage

    class Modified(ResourcePolicyModified, Aggregate.Event):
        def apply(self, policy: ResourcePolicy) -> None:
            policy.keypair = self.keypair
            policy.storage = self.storage
