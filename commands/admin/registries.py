"""Admin commands on registries (``cmd.registry.*``) and on what a rescan found in them
(``cmd.image.record_scan``, ``cmd.image.set_pull_policy``).

No password or token is carried: the gateway seals it in ``jy-registry-secrets`` under a new
``secret_id`` first, and the command names that id."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from commands.admin.fields import ImageName, Name, Reason
from commands.messages import Command
from schemas.ids import Token
from schemas.images import PullPolicy
from schemas.resources import ResourceSlots
from schemas.service_ports import ServicePort
from schemas.subjects import AggregateType

REG, IM = AggregateType.REGISTRY, AggregateType.IMAGE

RegistryUrl = Annotated[
    str, Field(min_length=8, max_length=512, pattern=r"^https?://[A-Za-z0-9.\-]+(:[0-9]{1,5})?/?$")
]
"""``http(s)://host[:port]``: a registry's root (no path: the v2 API is at its root)."""
Username = Annotated[str, Field(max_length=256)]
CaPem = Annotated[str, Field(max_length=16384)]
Digest = Annotated[str, Field(max_length=80, pattern=r"^(sha256:[0-9a-f]{64})?$")]


class _RegistrySettings(Command):
    url: RegistryUrl
    username: Username = ""
    secret_id: Token | Literal[""] = ""
    projects: tuple[Token, ...] = Field(default=(), max_length=256)
    """Project ids whose sessions may use its images; none: every project."""
    verify_tls: bool = True
    ca_pem: CaPem = ""

    @field_validator("ca_pem")
    @classmethod
    def _pem(cls, value: str) -> str:
        if value and "-----BEGIN CERTIFICATE-----" not in value:
            raise ValueError("ca_pem must be a PEM certificate (-----BEGIN CERTIFICATE-----)")
        return value


class AddRegistry(_RegistrySettings):
    """The registry's id is ``registry_id_for(name)``."""

    aggregate_type, verb = REG, "add"
    name: Name
    kind: Literal["docker"] = "docker"


class ModifyRegistry(_RegistrySettings):
    """Its whole settings after the change."""

    aggregate_type, verb = REG, "modify"
    name: Name


class RemoveRegistry(Command):
    aggregate_type, verb = REG, "remove"
    name: Name
    reason: Reason = ""


class RecordScannedImage(Command):
    """What a rescan of ``registry`` found for one tag: registered if new, recorded if
    changed, nothing if the same."""

    aggregate_type, verb = IM, "record_scan"
    name: ImageName
    registry: Name
    digest: Digest
    architecture: Annotated[str, Field(max_length=32)] = ""
    size_bytes: int = Field(default=0, ge=0)
    min_resources: ResourceSlots = ResourceSlots()
    service_ports: tuple[ServicePort, ...] = ()


class SetImagePullPolicy(Command):
    """None: the image's resource group's policy decides."""

    aggregate_type, verb = IM, "set_pull_policy"
    name: ImageName
    policy: PullPolicy | None = None
