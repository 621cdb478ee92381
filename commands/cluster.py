"""Where and from what sessions run, decided by the tenancy service:
``ResourceGroup`` (``ev.resource_group.<name>``: its scheduling settings, and the domains,
projects and keypairs that may use it) and ``Image`` (``ev.image.<id>``).

Rules that need more than one aggregate (an associated project exists) are the tenancy
service's. Repeating a change that is already true records nothing and answers False.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel

from commands.aggregate import Aggregate
from commands.errors import DomainError
from events.domain.tenancy import (
    ImageForgotten,
    ImageModified,
    ImagePullPolicySet,
    ImageRegistered,
    ImageScanned,
    ResourceGroupAssociated,
    ResourceGroupCreated,
    ResourceGroupDeactivated,
    ResourceGroupDisassociated,
    ResourceGroupModified,
    ResourceGroupReactivated,
)
from schemas.images import PullPolicy
from schemas.resources import ResourceSlots
from schemas.service_ports import ServicePort, ServicePortError, check_service_ports
from schemas.session import SessionType
from schemas.subjects import AggregateType
from schemas.tenancy import (
    CREATED_SCHEDULING,
    AgentSelection,
    GroupScheduling,
    QueuePolicy,
    ScopeKind,
    SlotLimits,
    image_id_for,
)


class InvalidSettingsError(DomainError):
    """The values given break a rule of the aggregate itself (not its current state)."""


class ImageForgottenError(DomainError):
    """A forgotten image is changed only by registering it again."""


GROUP_SCOPES = (ScopeKind.DOMAIN, ScopeKind.PROJECT, ScopeKind.KEYPAIR)


class ResourceGroup(Aggregate):
    aggregate_type = AggregateType.RESOURCE_GROUP

    class State(BaseModel):
        name: str
        description: str
        scheduling: GroupScheduling
        allowed_session_types: tuple[SessionType, ...]
        domains: frozenset[str]
        projects: frozenset[str]
        keypairs: frozenset[str]
        active: bool

    def __init__(self) -> None:
        self.name = ""
        self.description = ""
        self.scheduling = CREATED_SCHEDULING
        self.allowed_session_types: tuple[SessionType, ...] = tuple(SessionType)
        # Frozen sets, replaced on change: a working copy never shares a set with the folded one.
        self.domains: frozenset[str] = frozenset()
        self.projects: frozenset[str] = frozenset()
        self.keypairs: frozenset[str] = frozenset()
        self.active = True

    @property
    def queue_policy(self) -> QueuePolicy:
        return self.scheduling.queue_policy

    @property
    def agent_selection(self) -> AgentSelection:
        return self.scheduling.agent_selection

    @classmethod
    def create(
        cls, name: str, description: str, scheduling: GroupScheduling,
        allowed_session_types: Iterable[SessionType], now: datetime,
    ) -> ResourceGroup:  # fmt: skip
        types = _session_types(allowed_session_types)
        return cls._create(
            cls.Created, id=name, timestamp=now, description=description,
            allowed_session_types=types, scheduling=scheduling,
        )  # fmt: skip

    def modify(
        self, description: str, scheduling: GroupScheduling,
        allowed_session_types: Iterable[SessionType], now: datetime,
    ) -> bool:  # fmt: skip
        types = _session_types(allowed_session_types)
        held = (self.description, self.scheduling, self.allowed_session_types)
        if (description, scheduling, types) == held:
            return False
        return self._trigger(
            self.Modified, now, description=description, allowed_session_types=types,
            scheduling=scheduling,
        )  # fmt: skip

    def members(self, scope: ScopeKind) -> frozenset[str]:
        if scope not in GROUP_SCOPES:
            raise InvalidSettingsError(
                f"resource groups are associated with a domain, project or keypair, not a {scope}"
            )
        return {
            ScopeKind.DOMAIN: self.domains,
            ScopeKind.PROJECT: self.projects,
            ScopeKind.KEYPAIR: self.keypairs,
        }[scope]

    def associate(self, scope: ScopeKind, scope_id: str, now: datetime) -> bool:
        if scope_id in self.members(scope):
            return False
        return self._trigger(self.Associated, now, scope=scope, scope_id=scope_id)

    def disassociate(self, scope: ScopeKind, scope_id: str, now: datetime) -> bool:
        if scope_id not in self.members(scope):
            return False
        return self._trigger(self.Disassociated, now, scope=scope, scope_id=scope_id)

    def deactivate(self, reason: str, now: datetime) -> bool:
        return self.active and self._trigger(self.Deactivated, now, reason=reason)

    def reactivate(self, now: datetime) -> bool:
        return not self.active and self._trigger(self.Reactivated, now)

    def _set_members(self, scope: ScopeKind, members: frozenset[str]) -> None:
        setattr(self, {"domain": "domains", "project": "projects"}.get(scope, "keypairs"), members)

    class Created(ResourceGroupCreated, Aggregate.Created):
        def apply(self, group: ResourceGroup) -> None:
            group.name = self.originator_id
            _settings(group, self)

    class Modified(ResourceGroupModified, Aggregate.Event):
        def apply(self, group: ResourceGroup) -> None:
            _settings(group, self)

    class Associated(ResourceGroupAssociated, Aggregate.Event):
        def apply(self, group: ResourceGroup) -> None:
            group._set_members(self.scope, group.members(self.scope) | {self.scope_id})

    class Disassociated(ResourceGroupDisassociated, Aggregate.Event):
        def apply(self, group: ResourceGroup) -> None:
            group._set_members(self.scope, group.members(self.scope) - {self.scope_id})

    class Deactivated(ResourceGroupDeactivated, Aggregate.Event):
        def apply(self, group: ResourceGroup) -> None:
            group.active = False

    class Reactivated(ResourceGroupReactivated, Aggregate.Event):
        def apply(self, group: ResourceGroup) -> None:
            group.active = True


def _settings(group: ResourceGroup, event: ResourceGroupCreated | ResourceGroupModified) -> None:
    group.description = event.description
    group.allowed_session_types = event.allowed_session_types
    group.scheduling = event.scheduling


def _session_types(types: Iterable[SessionType]) -> tuple[SessionType, ...]:
    found = tuple(dict.fromkeys(types))  # in order, once each
    if not found:
        raise InvalidSettingsError("a resource group must allow at least one session type")
    return found


class Image(Aggregate):
    aggregate_type = AggregateType.IMAGE

    class State(BaseModel):
        name: str
        min_resources: ResourceSlots
        max_resources: SlotLimits
        forgotten: bool
        service_ports: tuple[ServicePort, ...] = ()  # a default: older snapshots have none
        registry: str = ""
        digest: str = ""
        architecture: str = ""
        size_bytes: int = 0
        pull_policy: PullPolicy | None = None

    def __init__(self) -> None:
        self.name = ""
        self.min_resources = ResourceSlots()
        self.max_resources = SlotLimits()
        self.forgotten = False
        self.service_ports: tuple[ServicePort, ...] = ()
        self.registry = ""
        """The registry a rescan found it in ("": registered by hand)."""
        self.digest = ""
        self.architecture = ""
        self.size_bytes = 0
        self.pull_policy: PullPolicy | None = None
        """None: its resource group's."""

    @classmethod
    def register(
        cls, name: str, min_resources: ResourceSlots, max_resources: SlotLimits, now: datetime,
        service_ports: Iterable[ServicePort] = (),
    ) -> Image:  # fmt: skip
        return cls._create(
            cls.Registered, id=image_id_for(name), timestamp=now, name=name,
            min_resources=min_resources, max_resources=max_resources,
            service_ports=_apps(service_ports),
        )  # fmt: skip

    def register_again(
        self, min_resources: ResourceSlots, max_resources: SlotLimits, now: datetime,
        service_ports: Iterable[ServicePort] = (),
    ) -> bool:  # fmt: skip
        """A forgotten image comes back; one still registered is left as it is."""
        if not self.forgotten:
            return False
        return self._trigger(
            self.Reregistered, now, name=self.name, min_resources=min_resources,
            max_resources=max_resources, service_ports=_apps(service_ports),
        )  # fmt: skip

    def modify(
        self, min_resources: ResourceSlots, max_resources: SlotLimits, now: datetime,
        service_ports: Iterable[ServicePort] | None = None,
    ) -> bool:  # fmt: skip
        """Change its settings; ``service_ports`` None keeps the apps it has."""
        if self.forgotten:
            raise ImageForgottenError(f"image {self.name} is forgotten: register it again first")
        apps = self.service_ports if service_ports is None else _apps(service_ports)
        wanted = (min_resources, max_resources, apps)
        if wanted == (self.min_resources, self.max_resources, self.service_ports):
            return False
        return self._trigger(
            self.Modified, now, min_resources=min_resources, max_resources=max_resources,
            service_ports=apps,
        )  # fmt: skip

    def forget(self, reason: str, now: datetime) -> bool:
        return not self.forgotten and self._trigger(self.Forgotten, now, reason=reason)

    @classmethod
    def found(
        cls, name: str, registry: str, digest: str, architecture: str, size_bytes: int,
        min_resources: ResourceSlots, service_ports: Iterable[ServicePort], now: datetime,
    ) -> Image:  # fmt: skip
        """First seen by a rescan of ``registry``."""
        return cls._create(
            cls.Registered, id=image_id_for(name), timestamp=now, name=name,
            min_resources=min_resources, max_resources=SlotLimits(),
            service_ports=_apps(service_ports), registry=registry, digest=digest,
            architecture=architecture, size_bytes=size_bytes,
        )  # fmt: skip

    def scanned(
        self, registry: str, digest: str, architecture: str, size_bytes: int,
        min_resources: ResourceSlots, service_ports: Iterable[ServicePort], now: datetime,
    ) -> bool:  # fmt: skip
        """What a rescan found now: recorded only if it differs from what is known (a tag
        that moved, other labels), so a rescan of an unchanged registry writes nothing. A
        forgotten image stays forgotten (an administrator chose that)."""
        if self.forgotten:
            return False
        apps = _apps(service_ports)
        known = (self.registry, self.digest, self.architecture, self.size_bytes)
        if known == (registry, digest, architecture, size_bytes) and (
            (self.min_resources, self.service_ports) == (min_resources, apps)
        ):
            return False
        return self._trigger(
            self.Scanned, now, registry=registry, digest=digest, architecture=architecture,
            size_bytes=size_bytes, min_resources=min_resources, service_ports=apps,
        )  # fmt: skip

    def set_pull_policy(self, policy: PullPolicy | None, now: datetime) -> bool:
        if self.forgotten:
            raise ImageForgottenError(f"image {self.name} is forgotten: register it again first")
        if policy == self.pull_policy:
            return False
        return self._trigger(self.PullPolicySet, now, policy=policy)

    # ``ImageRegistered`` both starts an image and brings a forgotten one back; loading picks
    # the class by whether the image exists.
    class Registered(ImageRegistered, Aggregate.Created):
        def apply(self, image: Image) -> None:
            _registered(image, self)

    class Reregistered(ImageRegistered, Aggregate.Event):
        def apply(self, image: Image) -> None:
            _registered(image, self)

    class Modified(ImageModified, Aggregate.Event):
        def apply(self, image: Image) -> None:
            image.min_resources = self.min_resources
            image.max_resources = self.max_resources
            image.service_ports = self.service_ports

    class Forgotten(ImageForgotten, Aggregate.Event):
        def apply(self, image: Image) -> None:
            image.forgotten = True

    class Scanned(ImageScanned, Aggregate.Event):
        def apply(self, image: Image) -> None:
            image.registry = self.registry
            image.digest = self.digest
            image.architecture = self.architecture
            image.size_bytes = self.size_bytes
            image.min_resources = self.min_resources
            image.service_ports = self.service_ports

    class PullPolicySet(ImagePullPolicySet, Aggregate.Event):
        def apply(self, image: Image) -> None:
            image.pull_policy = self.policy


def _registered(image: Image, event: ImageRegistered) -> None:
    image.name = event.name
    image.min_resources = event.min_resources
    image.max_resources = event.max_resources
    image.service_ports = event.service_ports
    image.forgotten = False
    if event.registry:  # registered by hand again: where it was found stays known
        image.registry = event.registry
        image.digest = event.digest
        image.architecture = event.architecture
        image.size_bytes = event.size_bytes


def _apps(ports: Iterable[ServicePort]) -> tuple[ServicePort, ...]:
    try:
        return check_service_ports(ports)
    except ServicePortError as exc:
        raise InvalidSettingsError(str(exc)) from None
