"""Turning ``createSession``'s GraphQL input into the ``CreateSession`` command: units parsed,
every mistake named in one sentence (``InputError``). Pure."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from commands.messages import CreateSession, explain
from schemas.bounds import (
    DEFAULT_LIMITS,
    MEMORY_MIN_BYTES,
    BoundsError,
    InputLimits,
    cpu_milli,
    gpu_hundredths,
    memory_bytes,
)
from schemas.principal import Actor, Tenant
from schemas.session import MAX_KERNELS, check_request
from schemas.tenancy import SessionOwner
from schemas.vfolder import MAX_MOUNTS, mount_path_problem
from services.gateway.core.inputs import InputError


def create_session_command(
    raw: dict[str, Any],
    *,
    actor: Actor,
    tenant: Tenant,
    command_id: str | None,
    owner: SessionOwner | None = None,
    limits: InputLimits = DEFAULT_LIMITS,
) -> CreateSession:
    """Build the command from GraphQL input; raises InputError with a readable reason."""
    try:
        resources = {
            "cpu_milli": cpu_milli(raw["cpu"], limits),
            "memory_bytes": memory_bytes(raw["memory"], limits, least=MEMORY_MIN_BYTES),
            "gpu_hundredths": gpu_hundredths(raw["gpu"], limits),
        }
    except BoundsError as exc:
        raise InputError(str(exc)) from None
    if raw.get("timeout_s") is not None and raw["type"] != "batch":
        raise InputError("timeoutSeconds applies to batch sessions only (type: batch)")
    if raw.get("requeue_on_node_loss") and raw["type"] != "batch":
        raise InputError("requeueOnNodeLoss applies to batch sessions only (type: batch)")
    size: int = 1 if raw.get("cluster_size") is None else raw["cluster_size"]
    if not 1 <= size <= MAX_KERNELS:
        raise InputError(f"clusterSize must be 1 to {MAX_KERNELS} kernels, got {size}")
    spec: dict[str, Any] = {
        "image": raw["image"],
        "type": raw["type"],
        # A cluster is N identical kernels; cpu, memory and gpu are each kernel's.
        "kernels": [{"resources": resources}] * size,
        "command": raw.get("command"),
        "env": raw.get("env") or {},
        "name": raw.get("name"),
        "resource_group": raw.get("resource_group") or "default",
    }
    mounts: list[dict[str, Any]] = raw.get("mounts") or []
    if len(mounts) > MAX_MOUNTS:
        raise InputError(f"at most {MAX_MOUNTS} mounts, got {len(mounts)}")
    for mount in mounts:
        problem = None if mount.get("path") is None else mount_path_problem(mount["path"])
        if problem is not None:
            raise InputError(f"mounts: {problem}")
    spec["mounts"] = mounts
    # Left out, they take the spec's defaults (and its validation says what is wrong).
    optional = ("priority", "cluster_mode", "depends_on", "starts_at", "timeout_s")
    for name in (*optional, "requeue_on_node_loss"):
        if raw.get(name) is not None:
            spec[name] = raw[name]
    data: dict[str, Any] = {"actor": actor, "tenant": tenant, "spec": spec, "owner": owner}
    if command_id is not None:
        data["command_id"] = command_id
    try:
        command = CreateSession.model_validate(data)
        check_request(command.spec, limits)
    except ValidationError as exc:
        raise InputError(explain(exc)) from exc
    except BoundsError as exc:
        raise InputError(str(exc)) from None
    return command
