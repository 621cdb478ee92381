"""Who caused a change (actor) and whose it is (tenant): carried by every command and event."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict


class ActorKind(StrEnum):
    USER = "user"
    KEYPAIR = "keypair"
    SERVICE = "service"


class Actor(BaseModel):
    """An authenticated principal, by id only: names and emails never enter the log."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    kind: ActorKind
    id: str

    @classmethod
    def service(cls, name: str) -> Actor:
        return cls(kind=ActorKind.SERVICE, id=name)


class Tenant(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    domain: str
    project: str | None = None


SYSTEM_TENANT = Tenant(domain="default")
