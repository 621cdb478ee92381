"""The audit trail from Python, reached as ``AsyncClient.audit`` (``Client.audit`` blocks):
the log's events as an auditor or administrator may read them, filtered and paged, and the
refused requests of the access log.

    async with AsyncClient.from_config() as jy:
        async for event in jy.audit.events(aggregate_type="session", actor="keypair:AK..."):
            print(event.seq, event.name, event.aggregate_id)

Filters are those of the ``auditLog`` query (docs/api.md, "Audit"): ``aggregate_type``,
``aggregate_id``, ``names``, ``actor``, ``domain``, ``since``, ``until``, ``until_seq``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Any

from jetyard.sdk.models.audit import AccessEntry, AuditPage
from jetyard.sdk.models.audit import AuditEvent as AuditEvent
from jetyard.sdk.wire import Caller, arguments, camel_name, literal, selection

PAGE = selection(AuditPage)
ACCESS = selection(AccessEntry)


def _filter(values: dict[str, Any]) -> str:
    given = {
        camel_name(k): v.isoformat() if isinstance(v, datetime) else v
        for k, v in values.items()
        if v is not None
    }
    return "{" + ", ".join(f"{k}: {literal(v)}" for k, v in given.items()) + "}"


class Audit:
    """The audit calls of one ``AsyncClient``."""

    def __init__(self, client: Caller) -> None:
        self._client = client

    async def page(self, *, after: int = 0, first: int = 100, **filters: Any) -> AuditPage:
        """One page of events after log position ``after`` that match ``filters``."""
        data = await self._client.graphql(
            f"{{ auditLog(after: {after}, first: {first}, filter: {_filter(filters)}) "
            f"{{ {PAGE} }} }}"
        )
        return AuditPage.model_validate(data["auditLog"])

    async def events(
        self, *, after: int = 0, page_size: int = 100, **filters: Any
    ) -> AsyncIterator[AuditEvent]:
        """Every matching event after ``after`` up to the log's end as the pages reach it."""
        while True:
            page = await self.page(after=after, first=page_size, **filters)
            for event in page.events:
                yield event
            after = page.next_after
            if not page.has_more:
                return

    async def position_at(self, at: datetime) -> int:
        """The log position of the moment ``at``: its last event stored at or before it
        (what ``asOf: {at}`` answers for; the listings take the position as ``as_of``)."""
        data = await self._client.graphql(
            "query($at: DateTime!) { sessions(first: 1, asOf: {at: $at}) { seq } }",
            {"at": at.isoformat()},
        )
        return int(data["sessions"]["seq"])

    async def refusals(
        self, *, after: int = 0, first: int = 100, since: datetime | None = None,
        domain: str | None = None,
    ) -> list[AccessEntry]:  # fmt: skip
        """Requests the gateway refused, oldest first, from the access log."""
        args = arguments(
            first=first, after=after or None, domain=domain,
            since=since.isoformat() if since else None, refusedOnly=True,
        )  # fmt: skip
        data = await self._client.graphql(f"{{ accessLog{args} {{ {ACCESS} }} }}")
        return [AccessEntry.model_validate(e) for e in data["accessLog"]]
