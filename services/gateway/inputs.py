"""Turning GraphQL input into commands: units parsed, every mistake named in one sentence."""

from __future__ import annotations

import re
from decimal import Decimal, InvalidOperation
from typing import Any

from pydantic import ValidationError

from commands.messages import CreateSession, explain
from schemas.principal import Actor, Tenant
from schemas.session import MAX_KERNELS
from schemas.tenancy import SessionOwner

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_MEMORY = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE)


class InputError(ValueError):
    """Input the gateway refuses before anything is sent."""


def parse_memory(text: str) -> int:
    """``"64m"``, ``"1.5GiB"``, ``"1073741824"`` → bytes."""
    match = _MEMORY.match(text)
    if match is None:
        raise InputError(f"memory {text!r} is not a size: use bytes or a unit, e.g. 512m or 2g")
    amount = Decimal(match.group(1)) * _UNITS[match.group(2).lower()]
    if amount <= 0:
        raise InputError(f"memory must be more than zero, got {text!r}")
    return int(amount)


def parse_amount(what: str, text: str) -> Decimal:
    try:
        amount = Decimal(text)
    except InvalidOperation:
        raise InputError(f"{what} {text!r} is not a number") from None
    if amount < 0:
        raise InputError(f"{what} must not be negative, got {text!r}")
    return amount


def create_session_command(
    raw: dict[str, Any],
    *,
    actor: Actor,
    tenant: Tenant,
    command_id: str | None,
    owner: SessionOwner | None = None,
) -> CreateSession:
    """Build the command from GraphQL input; raises InputError with a readable reason."""
    resources = {
        "cpu_milli": int(parse_amount("cpu", raw["cpu"]) * 1000),
        "memory_bytes": parse_memory(raw["memory"]),
        "gpu_hundredths": int(parse_amount("gpu", raw["gpu"]) * 100),
    }
    if Decimal(resources["cpu_milli"]) != parse_amount("cpu", raw["cpu"]) * 1000:
        raise InputError(f"cpu {raw['cpu']!r} is finer than 1/1000 of a core")
    if Decimal(resources["gpu_hundredths"]) != parse_amount("gpu", raw["gpu"]) * 100:
        raise InputError(f"gpu {raw['gpu']!r} is finer than 1/100 of a device")
    if raw.get("timeout_s") is not None and raw["type"] != "batch":
        raise InputError("timeoutSeconds applies to batch sessions only (type: batch)")
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
    # Left out, they take the spec's defaults (and its validation says what is wrong).
    for name in ("priority", "cluster_mode", "depends_on", "starts_at", "timeout_s"):
        if raw.get(name) is not None:
            spec[name] = raw[name]
    data: dict[str, Any] = {"actor": actor, "tenant": tenant, "spec": spec, "owner": owner}
    if command_id is not None:
        data["command_id"] = command_id
    try:
        return CreateSession.model_validate(data)
    except ValidationError as exc:
        raise InputError(explain(exc)) from exc
