"""The sessions view's storage: its tables (``sessions``, ``session_status_history``), its one
read shape (``SessionRecord``) and history entry (``StatusEntry``), and the mapping between
rows and records. The fold that fills them is ``projections.sessions.view``."""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Column,
    Index,
    Integer,
    MetaData,
    String,
    Table,
)

from projections.db import UTCDateTime
from schemas.fair_share import FairShareStanding
from schemas.service_ports import ReportedPort
from schemas.session import SessionStatus
from schemas.vfolder import Mount


@dataclass(frozen=True, slots=True)
class SessionTables:
    metadata: MetaData
    sessions: Table
    history: Table


@lru_cache(maxsize=8)
def tables(suffix: str = "") -> SessionTables:
    """The view's tables; a rebuild builds a second set under a suffix and swaps it in."""
    md = MetaData()
    sessions = Table(
        f"sessions{suffix}",
        md,
        Column("id", String(64), primary_key=True),
        Column("created_seq", BigInteger, nullable=False),  # the keyset for pagination
        Column("name", String(64)),
        Column("status", String(16), nullable=False),
        Column("status_reason", String, nullable=False),
        Column("type", String(16), nullable=False),
        Column("image", String(256), nullable=False),
        Column("resource_group", String(64), nullable=False),
        Column("cpu_milli", BigInteger, nullable=False),
        Column("memory_bytes", BigInteger, nullable=False),
        Column("gpu_hundredths", BigInteger, nullable=False),
        Column("command", JSON),
        Column("kernel_ids", JSON, nullable=False),
        Column("node_ids", JSON, nullable=False),
        Column("exit_code", Integer),
        Column("result", String(16)),  # success | failure | terminated; NULL before, cancelled
        Column("depends_on", JSON, nullable=False),
        Column("starts_at", UTCDateTime),
        Column("timeout_s", Integer),
        Column("cluster_mode", String(16), nullable=False),
        Column("kernel_count", Integer, nullable=False),
        Column("mounts", JSON, nullable=False),  # [{folder_id, name, volume, path, read_only}]
        # [{kernel_id, name, protocol, port, address, state, public}], as its agents reported
        Column("service_ports", JSON, nullable=False),
        Column("project", String(64)),  # the envelope's tenant project
        Column("owner_kind", String(16), nullable=False),  # who asked: the envelope's actor
        Column("owner_id", String(128), nullable=False),
        # Whose it is (SessionRequested.owner); NULL for sessions from before tenancy.
        Column("access_key", String(64)),
        Column("user_id", String(64)),
        Column("project_id", String(64)),
        Column("domain", String(64)),
        Column("priority", Integer, nullable=False),
        Column("admitted", Boolean, nullable=False),
        # {domain, project, user}: the fair-share factors its last pending reason said.
        Column("fair_share", JSON),
        Column("created_at", UTCDateTime, nullable=False),
        Column("updated_at", UTCDateTime, nullable=False),
        Column("last_seq", BigInteger, nullable=False),
    )
    Index(f"ix_{sessions.name}_created", sessions.c.created_seq, unique=True)
    Index(f"ix_{sessions.name}_status", sessions.c.status, sessions.c.created_seq)
    # A domain admin's and a user's listings: an index range scan however deep the page.
    Index(f"ix_{sessions.name}_domain", sessions.c.domain, sessions.c.created_seq)
    Index(f"ix_{sessions.name}_user", sessions.c.user_id, sessions.c.created_seq)
    history = Table(
        f"session_status_history{suffix}",
        md,
        Column("session_id", String(64), primary_key=True),
        Column("seq", BigInteger, primary_key=True),
        Column("status", String(16), nullable=False),
        Column("reason", String, nullable=False),
        Column("at", UTCDateTime, nullable=False),
    )
    return SessionTables(md, sessions, history)


class KernelPort(ReportedPort):
    """One app of one of the session's kernels."""

    kernel_id: str


@dataclass(frozen=True, slots=True)
class SessionRecord:
    """One row of the view, and the view's one read shape: ``apply`` folds it, the queries
    return it (``projections.queries.SessionView``) and the gateway resolves GraphQL from it.
    Its fields are the table's columns, one for one (``to_row``/``from_row``)."""

    id: str
    created_seq: int
    name: str | None
    status: SessionStatus
    status_reason: str
    type: str
    image: str
    resource_group: str
    cpu_milli: int
    memory_bytes: int
    gpu_hundredths: int
    command: tuple[str, ...] | None
    kernel_ids: tuple[str, ...]
    node_ids: tuple[str, ...]
    exit_code: int | None
    result: str | None
    """success | failure | terminated once ended (``schemas.session.result_of``); None before,
    or cancelled."""
    depends_on: tuple[str, ...]
    starts_at: datetime | None
    timeout_s: int | None
    cluster_mode: str
    kernel_count: int
    mounts: tuple[Mount, ...]
    """The folders it mounts (``SessionRequested.mounts``)."""
    service_ports: tuple[KernelPort, ...]
    """Its kernels' apps as their agents found them (``KernelServicePortsReported``), in
    kernel order."""
    project: str | None
    owner_kind: str
    owner_id: str
    access_key: str | None
    user_id: str | None
    project_id: str | None
    domain: str | None
    priority: int
    admitted: bool
    """Slots reserved on every scope (at once for a session from before tenancy)."""
    fair_share: FairShareStanding | None
    """While PENDING in a fair-share group: its owner's factors, as its reason says them
    (``SessionPendingReasonChanged.fair_share``); None otherwise."""
    created_at: datetime
    updated_at: datetime
    last_seq: int
    """The seq of the last event applied to this row: older or repeated events change nothing."""


@dataclass(frozen=True, slots=True)
class StatusEntry:
    """One row of the status history; also what the gateway's live feed yields."""

    session_id: str
    seq: int
    status: SessionStatus
    reason: str
    at: datetime


_COLUMNS = tuple(f.name for f in fields(SessionRecord))
_LISTS = ("command", "kernel_ids", "node_ids", "depends_on")
"""Tuples in the record, JSON lists in the table."""


def to_row(record: SessionRecord) -> dict[str, Any]:
    row = {name: getattr(record, name) for name in _COLUMNS}
    row["status"] = record.status.value
    row["mounts"] = [m.model_dump(mode="json") for m in record.mounts]
    row["service_ports"] = [p.model_dump(mode="json") for p in record.service_ports]
    row["fair_share"] = None if record.fair_share is None else record.fair_share.model_dump()
    for name in _LISTS:
        row[name] = None if row[name] is None else list(row[name])
    return row


def from_row(row: Any) -> SessionRecord:
    values = {name: getattr(row, name) for name in _COLUMNS}
    values["status"] = SessionStatus(row.status)
    values["mounts"] = tuple(Mount.model_validate(m) for m in row.mounts)
    values["service_ports"] = tuple(KernelPort.model_validate(p) for p in row.service_ports)
    shares = row.fair_share
    values["fair_share"] = None if shares is None else FairShareStanding.model_validate(shares)
    for name in _LISTS:
        values[name] = None if values[name] is None else tuple(values[name])
    return SessionRecord(**values)


def entry_from_row(row: Any) -> StatusEntry:
    return StatusEntry(row.session_id, row.seq, SessionStatus(row.status), row.reason, row.at)
