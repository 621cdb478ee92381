"""A container registry images are found in and pulled from (``ev.registry.<id>``), decided by
the tenancy service. Its password or token is never part of it: ``secret_id`` names the value
sealed in ``jy-registry-secrets`` (see ``events.domain.tenancy.RegistryAdded``).

Repeating a change that is already true records nothing and answers False.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel

from commands.aggregate import Aggregate
from commands.errors import DomainError
from events.domain.tenancy import RegistryAdded, RegistryModified, RegistryRemoved
from schemas.subjects import AggregateType
from schemas.tenancy import registry_id_for


class RegistryRemovedError(DomainError):
    """A removed registry is changed only by adding it again."""


class RegistrySettings(BaseModel):
    """What an administrator sets (everything but the name, which is its id)."""

    url: str
    username: str = ""
    secret_id: str = ""
    projects: tuple[str, ...] = ()
    verify_tls: bool = True
    ca_pem: str = ""


class Registry(Aggregate):
    aggregate_type = AggregateType.REGISTRY

    class State(BaseModel):
        name: str
        kind: str
        settings: RegistrySettings
        removed: bool

    def __init__(self) -> None:
        self.name = ""
        self.kind = "docker"
        self.settings = RegistrySettings(url="")
        self.removed = False

    @property
    def host(self) -> str:
        """``host[:port]`` as image references name it (the URL without its scheme)."""
        return self.settings.url.split("://", 1)[-1].rstrip("/")

    def serves(self, project_id: str | None) -> bool:
        """Whether sessions of ``project_id`` may use its images (None: no project known)."""
        projects = self.settings.projects
        return not projects or (project_id is not None and project_id in projects)

    @classmethod
    def add(cls, name: str, kind: str, settings: RegistrySettings, now: datetime) -> Registry:
        return cls._create(
            cls.Added, id=registry_id_for(name), timestamp=now, name=name, kind=kind,
            **_fields(settings),
        )  # fmt: skip

    def add_again(self, kind: str, settings: RegistrySettings, now: datetime) -> bool:
        """A removed registry comes back; one still there is left as it is."""
        if not self.removed:
            return False
        return self._trigger(self.Readded, now, name=self.name, kind=kind, **_fields(settings))

    def modify(self, settings: RegistrySettings, now: datetime) -> bool:
        if self.removed:
            raise RegistryRemovedError(f"registry {self.name} was removed: add it again first")
        if settings == self.settings:
            return False
        return self._trigger(self.Modified, now, **_fields(settings))

    def remove(self, reason: str, now: datetime) -> bool:
        return not self.removed and self._trigger(self.Removed, now, reason=reason)

    # ``RegistryAdded`` both starts a registry and brings a removed one back.
    class Added(RegistryAdded, Aggregate.Created):
        def apply(self, registry: Registry) -> None:
            _added(registry, self)

    class Readded(RegistryAdded, Aggregate.Event):
        def apply(self, registry: Registry) -> None:
            _added(registry, self)

    class Modified(RegistryModified, Aggregate.Event):
        def apply(self, registry: Registry) -> None:
            registry.settings = _settings(self)

    class Removed(RegistryRemoved, Aggregate.Event):
        def apply(self, registry: Registry) -> None:
            registry.removed = True


def _fields(settings: RegistrySettings) -> dict[str, object]:
    return settings.model_dump()


def _settings(event: RegistryAdded | RegistryModified) -> RegistrySettings:
    return RegistrySettings(
        url=event.url, username=event.username, secret_id=event.secret_id,
        projects=event.projects, verify_tls=event.verify_tls, ca_pem=event.ca_pem,
    )  # fmt: skip


def _added(registry: Registry, event: RegistryAdded) -> None:
    registry.name = event.name
    registry.kind = event.kind
    registry.settings = _settings(event)
    registry.removed = False


def projects_of(ids: Iterable[str]) -> tuple[str, ...]:
    """Project ids in a stable order, once each (a set, as the events hold it)."""
    return tuple(sorted(set(ids)))
