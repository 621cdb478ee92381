"""The usage view's storage: its tables (``usage_sessions``, ``usage_kernels``), its read shapes
(``SessionTags``: whose a session is; ``KernelInterval``: one kernel's hold on its slots, from
its start to its release) and the mapping between rows and records. The fold that fills them is
``projections.usage.view``; the accounting over them is ``projections.usage.accounting``."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import JSON, BigInteger, Column, Index, MetaData, String, Table

from projections.db import UTCDateTime, slot_columns, slot_values, slots_from
from schemas.resources import ResourceSlots


@dataclass(frozen=True, slots=True)
class UsageTables:
    metadata: MetaData
    sessions: Table
    kernels: Table


@lru_cache(maxsize=8)
def tables(suffix: str = "") -> UsageTables:
    """The view's tables; a rebuild builds a second set under a suffix and swaps it in."""
    md = MetaData()
    sessions = Table(
        f"usage_sessions{suffix}",
        md,
        Column("session_id", String(64), primary_key=True),
        Column("name", String(64)),
        Column("user_id", String(64), nullable=False),
        Column("project_id", String(64), nullable=False),
        Column("domain", String(64), nullable=False),
        Column("resource_group", String(64), nullable=False),
        Column("last_seq", BigInteger, nullable=False),
    )
    kernels = Table(
        f"usage_kernels{suffix}",
        md,
        Column("kernel_id", String(64), primary_key=True),
        Column("session_id", String(64), nullable=False),
        Column("node_id", String(64), nullable=False),
        # Copied from the session when the kernel was allocated: a report reads one table.
        Column("session_name", String(64)),
        Column("user_id", String(64), nullable=False),
        Column("project_id", String(64), nullable=False),
        Column("domain", String(64), nullable=False),
        Column("resource_group", String(64), nullable=False),
        *slot_columns(),
        Column("devices", JSON, nullable=False),  # [{index, uuid, hundredths}]
        Column("allocated_at", UTCDateTime, nullable=False),
        Column("started_at", UTCDateTime),  # NULL: never ran (nothing accrued)
        Column("ended_at", UTCDateTime),  # NULL while it holds its slots
        Column("end_reason", String),
        Column("last_seq", BigInteger, nullable=False),
    )
    # A report reads the kernels that started before its end, narrowed by its scope.
    Index(f"ix_{kernels.name}_started", kernels.c.started_at)
    Index(f"ix_{kernels.name}_domain", kernels.c.domain, kernels.c.started_at)
    Index(f"ix_{kernels.name}_user", kernels.c.user_id, kernels.c.started_at)
    # The gateway keeps the open intervals (who holds which GPU now) by reading only the rows
    # changed since its last read; the first read takes the open ones.
    Index(f"ix_{kernels.name}_changed", kernels.c.last_seq)
    Index(f"ix_{kernels.name}_open", kernels.c.ended_at)
    return UsageTables(md, sessions, kernels)


@dataclass(frozen=True, slots=True)
class SessionTags:
    """Whose a session is and where it runs: what its kernels' usage is counted under."""

    session_id: str
    name: str | None
    user_id: str
    """Empty for a session from before tenancy (it had no owner)."""
    project_id: str
    domain: str
    resource_group: str
    last_seq: int


@dataclass(frozen=True, slots=True)
class HeldDevice:
    """A device a kernel held: whole (``hundredths`` 100) or a share in hundredths."""

    index: int
    uuid: str
    hundredths: int


@dataclass(frozen=True, slots=True)
class KernelInterval:
    """One kernel's hold on its slots: it accrues from ``started_at`` (its agent reported it
    running) until ``ended_at`` (its node ledger released the slots: it ended, failed, was
    stopped, or its node was lost); open while ``ended_at`` is None. The view's one read
    shape: the fold returns it, the report query reads it, the accounting clips it."""

    kernel_id: str
    session_id: str
    node_id: str
    session_name: str | None
    user_id: str
    project_id: str
    domain: str
    resource_group: str
    slots: ResourceSlots
    devices: tuple[HeldDevice, ...]
    allocated_at: datetime
    started_at: datetime | None
    ended_at: datetime | None
    end_reason: str | None
    last_seq: int


_PLAIN = tuple(f.name for f in fields(KernelInterval) if f.name not in ("slots", "devices"))


def kernel_to_row(record: KernelInterval) -> dict[str, Any]:
    return {
        **{name: getattr(record, name) for name in _PLAIN},
        **slot_values("", record.slots),
        "devices": [
            {"index": d.index, "uuid": d.uuid, "hundredths": d.hundredths} for d in record.devices
        ],
    }


def kernel_from_row(row: Any) -> KernelInterval:
    devices = tuple(
        HeldDevice(int(d["index"]), str(d["uuid"]), int(d["hundredths"])) for d in row.devices
    )
    return KernelInterval(
        **{name: getattr(row, name) for name in _PLAIN}, slots=slots_from(row), devices=devices
    )


def session_to_row(record: SessionTags) -> dict[str, Any]:
    return {f.name: getattr(record, f.name) for f in fields(SessionTags)}


def session_from_row(row: Any) -> SessionTags:
    return SessionTags(**{f.name: getattr(row, f.name) for f in fields(SessionTags)})
