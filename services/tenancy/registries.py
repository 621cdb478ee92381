"""The tenancy service's decisions on registries (``cmd.registry.*``) and on what their rescans
found (``cmd.image.record_scan``, ``cmd.image.set_pull_policy``), on the folded ``Directory``."""

from __future__ import annotations

from datetime import datetime

from commands import admin as a
from commands.directory import Directory
from commands.outcome import Code, Rejected
from commands.registry import Registry, RegistrySettings, projects_of
from commands.tenancy import Image
from schemas.subjects import AggregateType
from schemas.tenancy import image_id_for, registry_id_for
from services.tenancy.common import (
    Change,
    Decision,
    Who,
    acted,
    cluster_admin,
    exists,
    missing,
    working_copy,
)


def _settings(cmd: a.AddRegistry | a.ModifyRegistry, d: Directory) -> RegistrySettings | Rejected:
    unknown = [p for p in cmd.projects if p not in d.projects]
    if unknown:
        return Rejected(Code.NOT_FOUND, f"there is no project with the id {unknown[0]}")
    return RegistrySettings(
        url=cmd.url.rstrip("/"), username=cmd.username, secret_id=cmd.secret_id,
        projects=projects_of(cmd.projects), verify_tls=cmd.verify_tls, ca_pem=cmd.ca_pem,
    )  # fmt: skip


def add_registry(cmd: a.AddRegistry, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := cluster_admin(who, "add registries"):
        return refused
    settings = _settings(cmd, d)
    if isinstance(settings, Rejected):
        return settings
    registry_id = registry_id_for(cmd.name)
    known = d.registries.get(registry_id)
    if known is None:
        return Change(
            (Registry.add(cmd.name, cmd.kind, settings, now),), f"registry {cmd.name} added"
        )
    if not known.removed:
        return exists(d, AggregateType.REGISTRY, registry_id, cmd, f"registry {cmd.name}")
    copy = working_copy(known)
    copy.add_again(cmd.kind, settings, now)
    return Change((copy,), f"registry {cmd.name} added again")


def _registry(d: Directory, name: str) -> Registry | Rejected:
    registry = d.registries.get(registry_id_for(name))
    if registry is None:
        return missing(f"registry {name}")
    return registry


def modify_registry(cmd: a.ModifyRegistry, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := cluster_admin(who, "change registries"):
        return refused
    registry = _registry(d, cmd.name)
    if isinstance(registry, Rejected):
        return registry
    settings = _settings(cmd, d)
    if isinstance(settings, Rejected):
        return settings
    return acted(
        registry, f"registry {cmd.name}", lambda x: x.modify(settings, now), "modified",
        "already had these settings",
    )  # fmt: skip


def remove_registry(cmd: a.RemoveRegistry, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := cluster_admin(who, "remove registries"):
        return refused
    registry = _registry(d, cmd.name)
    if isinstance(registry, Rejected):
        return registry
    return acted(
        registry, f"registry {cmd.name}", lambda x: x.remove(cmd.reason, now), "removed",
        "was already removed",
    )  # fmt: skip


def record_scanned_image(
    cmd: a.RecordScannedImage, d: Directory, who: Who, now: datetime
) -> Decision:
    if refused := cluster_admin(who, "record what a rescan found"):
        return refused
    registry = _registry(d, cmd.registry)
    if isinstance(registry, Rejected):
        return registry
    if registry.removed:
        return Rejected(Code.INVALID, f"registry {cmd.registry} was removed")
    if not cmd.name.startswith(registry.host + "/"):
        return Rejected(
            Code.INVALID, f"image {cmd.name} is not in registry {cmd.registry} ({registry.host})"
        )
    image_id = image_id_for(cmd.name)
    known = d.images.get(image_id)
    facts = (
        registry.id, cmd.digest, cmd.architecture, cmd.size_bytes, cmd.min_resources,
        cmd.service_ports, now,
    )  # fmt: skip
    if known is None:
        return Change((Image.found(cmd.name, *facts),), f"image {cmd.name} registered")
    return acted(known, f"image {cmd.name}", lambda x: x.scanned(*facts), "updated", "unchanged")


def set_image_pull_policy(
    cmd: a.SetImagePullPolicy, d: Directory, who: Who, now: datetime
) -> Decision:
    if refused := cluster_admin(who, "change images"):
        return refused
    image = d.images.get(image_id_for(cmd.name))
    if image is None:
        return missing(f"image {cmd.name}")
    return acted(
        image, f"image {cmd.name}", lambda x: x.set_pull_policy(cmd.policy, now),
        "pull policy set", "already had this pull policy",
    )  # fmt: skip
