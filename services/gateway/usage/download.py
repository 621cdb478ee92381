"""``GET /usage.csv?from=ISO&to=ISO&groupBy=user&...``: the ``usage`` query's report as a CSV
download, made by the same function (``report.usage_report``), so its rows are the GraphQL
answer's. Sits behind the gateway's ``Authenticated`` middleware (``edge``) like ``/graphql``
(signed or logged in; rate limited; in the access log). Bad input is a 400 coded
``invalid``. Reads the usage view; writes nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from starlette.datastructures import QueryParams
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Receive, Scope, Send

from commands.authorisation import Principal
from projections.usage.accounting import UsageGroup
from services.gateway.context import Services
from services.gateway.usage.report import UsageAsk, UsageInputError, csv_text, usage_report

PARAMETERS = ("from", "to", "groupBy", "domain", "projectId", "userId", "resourceGroup")


def usage_csv_app(services: Services, principal_key: str) -> ASGIApp:
    """The endpoint; ``principal_key`` is where ``Authenticated`` left the caller."""

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        principal: Principal | None = scope.get(principal_key)
        response = await answer(services, principal, request.query_params, datetime.now(UTC))
        await response(scope, receive, send)

    return app


async def answer(
    services: Services, me: Principal | None, params: QueryParams, now: datetime
) -> Response:
    if me is None:  # Authenticated lets no anonymous request this far; said anyway
        return _problem(401, "unauthenticated", "sign the request or send a login token")
    try:
        report = await usage_report(services, me, ask_of(params), now)
    except UsageInputError as exc:
        return _problem(400, "invalid", str(exc))
    stamp = "%Y%m%dT%H%M%SZ"
    name = (
        f"usage-{report.group_by.value}-{report.start.strftime(stamp)}-"
        f"{report.end.strftime(stamp)}.csv"
    )
    return Response(
        csv_text(report),
        media_type="text/csv; charset=utf-8",
        headers={"content-disposition": f'attachment; filename="{name}"'},
    )


def ask_of(params: QueryParams) -> UsageAsk:
    """The query string as a report's ask: the ``usage`` query's arguments, by name."""
    unknown = sorted(set(params.keys()) - set(PARAMETERS))
    if unknown:
        raise UsageInputError(f"unknown parameter {unknown[0][:40]!r}: use {', '.join(PARAMETERS)}")
    values: dict[str, str] = {}
    for key in params:
        given = params.getlist(key)
        if len(given) > 1:
            raise UsageInputError(f"{key} is given {len(given)} times: give it once")
        values[key] = given[0]
    return UsageAsk(
        start=_time(values, "from"), end=_time(values, "to"), group_by=_group(values),
        domain=values.get("domain"), project=values.get("projectId"),
        user_id=values.get("userId"), resource_group=values.get("resourceGroup"),
    )  # fmt: skip


def _time(values: dict[str, str], key: str) -> datetime:
    if key not in values:
        raise UsageInputError(f"{key} is required: an ISO 8601 time, e.g. 2026-03-01T00:00:00Z")
    try:
        return datetime.fromisoformat(values[key])
    except ValueError:
        raise UsageInputError(
            f"{key} {values[key][:40]!r} is not an ISO 8601 time (e.g. 2026-03-01T00:00:00Z)"
        ) from None


def _group(values: dict[str, str]) -> UsageGroup:
    given = values.get("groupBy")
    allowed = " | ".join(g.value for g in UsageGroup)
    if given is None:
        raise UsageInputError(f"groupBy is required: {allowed}")
    wanted = given.lower().replace("resourcegroup", "resource_group")
    try:
        return UsageGroup(wanted)
    except ValueError:
        raise UsageInputError(f"groupBy must be {allowed}, got {given[:40]!r}") from None


def _problem(status: int, code: str, message: str) -> Response:
    body = json.dumps({"errors": [{"message": message, "extensions": {"code": code}}]})
    return Response(body, status_code=status, media_type="application/json")
