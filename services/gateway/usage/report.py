"""Usage reports: the one function behind both the ``usage`` query and ``GET /usage.csv``, so
the two always say the same numbers (``docs/usage.md``). Checks the range and the filters,
narrows the report to what the caller may see (a user: their own use; a domain's admin or
monitor: their domain's; a superadmin: everything), reads the usage view and names the rows.
Reads the usage view, the tenancy directory and (for users' emails) ``jy-people``; writes
nothing."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from commands.authorisation import Principal
from projections.usage.accounting import UsageGroup, UsageLine
from projections.usage.queries import UsageScope
from schemas.ids import InvalidTokenError, check_token
from schemas.tenancy import Role, project_id_for
from services.gateway.context import Services
from services.gateway.core.visibility import sees_email

MAX_RANGE = timedelta(days=366)
CSV_COLUMNS = (
    "key", "name", "sessions", "cpu_core_seconds", "memory_gib_seconds", "gpu_seconds",
    "gpu_device_seconds",
)  # fmt: skip
"""The CSV's header: units in the names. ``gpu_device_seconds`` holds one
``<node>/<device>:<seconds>:<share seconds>`` per GPU, separated by ``;``."""


class UsageInputError(ValueError):
    """A report asked for with a bad range or filter: the gateway's ``invalid``."""


@dataclass(frozen=True, slots=True)
class UsageAsk:
    start: datetime
    end: datetime
    group_by: UsageGroup
    domain: str | None = None
    project: str | None = None
    """A project's id, or its name in ``domain`` (else the caller's domain)."""
    user_id: str | None = None
    resource_group: str | None = None


@dataclass(frozen=True, slots=True)
class UsageReport:
    start: datetime
    end: datetime
    group_by: UsageGroup
    lines: tuple[UsageLine, ...]


def checked(ask: UsageAsk) -> UsageAsk:
    """The ask with its times in UTC, or ``UsageInputError`` naming what is wrong."""
    for what, value in (("from", ask.start), ("to", ask.end)):
        if value.tzinfo is None or value.utcoffset() is None:
            raise UsageInputError(
                f"{what} {value.isoformat()} has no time zone: give one (e.g. 2026-03-01T00:00:00Z)"
            )
    try:
        start, end = ask.start.astimezone(UTC), ask.end.astimezone(UTC)
    except OverflowError:  # year 1 east of UTC, year 9999 west of it
        raise UsageInputError("from and to must lie between the years 1 and 9999 in UTC") from None
    if end <= start:
        raise UsageInputError(
            f"to must be after from, got {start.isoformat()} .. {end.isoformat()}"
        )
    if end - start > MAX_RANGE:
        raise UsageInputError(
            f"a report covers at most {MAX_RANGE.days} days, got {(end - start).days}: "
            "ask for it in parts"
        )
    filters = {
        "domain": ask.domain, "projectId": ask.project, "userId": ask.user_id,
        "resourceGroup": ask.resource_group,
    }  # fmt: skip
    try:
        for what, given in filters.items():
            if given is not None:
                check_token(given, what)
    except InvalidTokenError as exc:
        raise UsageInputError(str(exc)) from exc
    return replace(ask, start=start, end=end)


def scope_of(me: Principal, ask: UsageAsk, services: Services) -> UsageScope | None:
    """The report's scope for this caller; None when the filters name what they may not see
    (answered as no use at all, as for anything another tenant owns)."""
    domain, user_id = ask.domain, ask.user_id
    if not me.reads_every_domain:
        if domain not in (None, me.domain):
            return None
        domain = me.domain
        if me.role is Role.USER:
            if user_id not in (None, me.user_id):
                return None
            user_id = me.user_id
    project = ask.project
    if project is not None and project not in services.directory.projects:
        project = project_id_for(domain or me.domain, project)
    return UsageScope(
        domain=domain, project_id=project, user_id=user_id, resource_group=ask.resource_group
    )


async def usage_report(
    services: Services, me: Principal, ask: UsageAsk, now: datetime
) -> UsageReport:
    ask = checked(ask)
    scope = scope_of(me, ask, services)
    lines: list[UsageLine] = []
    if scope is not None:
        lines = await services.views.usage.usage(
            group_by=ask.group_by, start=ask.start, end=ask.end, now=now, scope=scope
        )
    named = [replace(line, name=await _name(services, me, ask.group_by, line)) for line in lines]
    return UsageReport(ask.start, ask.end, ask.group_by, tuple(named))


async def _name(
    services: Services, me: Principal, group_by: UsageGroup, line: UsageLine
) -> str | None:
    """A readable name: the session's, the user's email (when the caller may see it), the
    project's; a domain and a resource group are their own names."""
    directory = services.directory
    match group_by:
        case UsageGroup.SESSION:
            return line.name
        case UsageGroup.USER:
            user = directory.users.get(line.key)
            if user is None or not sees_email(me, user):
                return None
            return await services.people.unseal(line.key, user.email_sealed)
        case UsageGroup.PROJECT:
            project = directory.projects.get(line.key)
            return project.name if project is not None else None
        case UsageGroup.DOMAIN | UsageGroup.RESOURCE_GROUP:
            return line.key


def csv_text(report: UsageReport) -> str:
    """The report as CSV: the header, then one row per line as the GraphQL answer has it
    (the same floats, written as Python and JSON write them)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for line in report.lines:
        writer.writerow(
            (
                line.key, line.name or "", line.sessions, repr(line.cpu_core_seconds),
                repr(line.memory_gib_seconds), repr(line.gpu_seconds), _devices(line),
            )
        )  # fmt: skip
    return out.getvalue()


def _devices(line: UsageLine) -> str:
    parts: Iterable[str] = (
        f"{d.node_id}/{d.device}:{d.seconds!r}:{d.share_seconds!r}" for d in line.devices
    )
    return ";".join(parts)
