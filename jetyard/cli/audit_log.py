"""``jetyard audit log`` and ``jetyard audit refusals``: the log and the refused requests as
an auditor (or administrator) reads them through the gateway, signed in like every user
command: JSON lines, oldest first; ``log --follow`` waits for more.

    jetyard audit log --aggregate session --actor keypair:AK... --since 2026-11-01T00:00:00Z
    jetyard audit log --follow | jq -c '[.seq, .name, .actor]'
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from jetyard.cli import common as ui
from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.config import ConfigError, Credentials
from jetyard.sdk.errors import JetyardError

FOLLOW_EVERY_S = 1.0


def add_parsers(actions: Any) -> None:
    log = actions.add_parser(
        "log", help="the log's events through the gateway, as JSON lines (auditors, admins)"
    )
    log.add_argument("--after", type=int, default=0, help="events after this log position")
    log.add_argument("--aggregate", metavar="TYPE[/ID]", help="e.g. session, or user/<id>")
    log.add_argument("--name", action="append", metavar="EVENT", help="only these event names")
    log.add_argument("--actor", help="kind:id (user:, keypair:, service:) or a bare id")
    log.add_argument("--domain", help="one domain's (superadmins, superauditors)")
    log.add_argument("--since", type=_time, help="stored at or after (ISO 8601)")
    log.add_argument("--until", type=_time, help="stored at or before (ISO 8601)")
    log.add_argument("--follow", action="store_true", help="keep waiting for new events")
    ui.add_credential_options(log)
    refusals = actions.add_parser(
        "refusals", help="requests the gateway refused (the access log), as JSON lines"
    )
    refusals.add_argument("--since", type=_time, help="from this time (ISO 8601)")
    refusals.add_argument("--domain", help="one domain's (superadmins, superauditors)")
    refusals.add_argument("--first", type=int, default=100)
    ui.add_credential_options(refusals)


def _time(text: str) -> datetime:
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an ISO 8601 time: {text!r}") from None
    if found.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a time zone (Z or +hh:mm)")
    return found


def _filters(args: argparse.Namespace) -> dict[str, Any]:
    kind, _, ident = (args.aggregate or "").partition("/")
    return {
        "aggregate_type": kind or None, "aggregate_id": ident or None, "names": args.name,
        "actor": args.actor, "domain": args.domain, "since": args.since, "until": args.until,
    }  # fmt: skip


async def _log(client: AsyncClient, args: argparse.Namespace) -> None:
    after, filters = args.after, _filters(args)
    while True:
        page = await client.audit.page(after=after, **filters)
        ui.json_lines(event.as_json() for event in page.events)
        after = max(after, page.next_after)  # `since` counts only while `after` is 0
        if page.has_more:
            continue
        if not args.follow:
            return
        await asyncio.sleep(FOLLOW_EVERY_S)


async def _refusals(client: AsyncClient, args: argparse.Namespace) -> None:
    found = await client.audit.refusals(first=args.first, since=args.since, domain=args.domain)
    ui.json_lines(e.as_json() for e in found)


Work = Callable[[AsyncClient, argparse.Namespace], Awaitable[None]]


async def _run(work: Work, args: argparse.Namespace, signed_in: Credentials) -> None:
    async with AsyncClient.from_config(signed_in) as client:
        await work(client, args)


def run_signed_in(args: argparse.Namespace, work: Work) -> int:
    """``work`` with a client signed in as the command line or the config says; a refusal
    is said on stderr with the action's name (what ``audit log``, ``refusals`` and ``state``
    share)."""
    try:
        signed_in = ui.credentials(args)
    except ConfigError as exc:
        print(f"jetyard audit: {exc}", file=sys.stderr)
        return ui.USAGE
    try:
        asyncio.run(_run(work, args, signed_in))
    except JetyardError as exc:
        print(f"jetyard audit {args.action}: {exc}", file=sys.stderr)
        return ui.REFUSED
    except KeyboardInterrupt:
        return ui.INTERRUPTED
    return 0


def run(args: argparse.Namespace) -> int:
    return run_signed_in(args, _log if args.action == "log" else _refusals)
