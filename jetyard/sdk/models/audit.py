"""What the SDK returns for the audit trail (``jetyard.sdk.audit``): one event of the log as
auditors read it, a page of them, and one refusal from the access log."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from jetyard.sdk.wire import Model


class AuditEvent(Model):
    seq: int
    name: str
    aggregate_type: str
    aggregate_id: str
    version: int
    at: datetime
    actor: str
    domain: str
    project: str | None = None
    event_id: str
    causation_id: str
    correlation_id: str
    payload: dict[str, Any]


class AuditPage(Model):
    events: list[AuditEvent]
    next_after: int
    has_more: bool
    scanned: int


class AccessEntry(Model):
    seq: int
    at: datetime
    domain: str | None = None
    user_id: str | None = None
    access_key: str | None = None
    role: str | None = None
    source: str
    operation: str
    outcome: str
