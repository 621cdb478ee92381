"""``jetyard audit state --at``: sessions, nodes, folders and the tenancy (domains, projects,
users, their keypairs without secrets, resource policies) as they were at a moment, as one
JSON object, read through the gateway's ``asOf`` as an administrator or auditor reads them.

    jetyard audit state --at 2026-11-24T14:00:00Z | jq '.sessions[] | [.id, .status]'
    jetyard audit state --at 18250 --only sessions --only nodes
"""

from __future__ import annotations

import argparse
import json
from datetime import datetime
from typing import Any

from jetyard.cli import common as ui
from jetyard.cli.audit_log import run_signed_in
from jetyard.sdk.async_client import AsyncClient

PARTS = ("sessions", "nodes", "folders", "domains", "projects", "users", "keypairs", "policies")


def add_parser(actions: Any) -> None:
    state = actions.add_parser(
        "state",
        help="sessions, nodes, folders and the tenancy as they were at a moment, as one JSON "
        "object (auditors, admins)",
    )
    state.add_argument(
        "--at", required=True, type=_moment, metavar="TIME|POSITION",
        help="an ISO 8601 time with its zone (the last event stored by then) or a log position",
    )  # fmt: skip
    state.add_argument(
        "--only", action="append", choices=PARTS, help="only these parts (again for more)"
    )
    ui.add_credential_options(state)


MAX_POSITION = 2**31 - 1  # GraphQL's Int


def _moment(text: str) -> datetime | int:
    if text.isdigit():
        if len(text) > 10 or int(text) > MAX_POSITION:
            raise argparse.ArgumentTypeError(f"a log position is at most {MAX_POSITION:,}")
        return int(text)
    try:
        found = datetime.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 time or a log position: {text!r}"
        ) from None
    if found.tzinfo is None:
        raise argparse.ArgumentTypeError(f"{text!r} needs a time zone (Z or +hh:mm)")
    return found


async def state(client: AsyncClient, at: datetime | int, parts: tuple[str, ...]) -> dict[str, Any]:
    """The parts asked for, at the position ``at`` names (a time is resolved once, so every
    part is read at the same position)."""
    position = at if isinstance(at, int) else await client.audit.position_at(at)
    admin = client.admin
    out: dict[str, Any] = {"position": position}
    if isinstance(at, datetime):
        out["at"] = at.isoformat()
    if "sessions" in parts:
        out["sessions"] = [s.as_json() for s in await client.sessions.list(as_of=position)]
    if "nodes" in parts:
        out["nodes"] = [n.as_json() for n in await admin.nodes(as_of=position)]
    if "folders" in parts:
        out["folders"] = [f.as_json() for f in await client.folders.list(as_of=position)]
    if "domains" in parts:
        out["domains"] = [d.as_json() for d in await admin.domains(as_of=position)]
    if "projects" in parts:
        out["projects"] = [p.as_json() for p in await admin.projects(as_of=position)]
    users = await admin.users(as_of=position) if {"users", "keypairs"} & set(parts) else []
    if "users" in parts:
        out["users"] = [u.as_json() for u in users]
    if "keypairs" in parts:
        out["keypairs"] = [
            k.as_json() for u in users for k in await admin.keypairs(u.id, as_of=position)
        ]
    if "policies" in parts:
        out["policies"] = [p.as_json() for p in await admin.policies(as_of=position)]
    return out


async def _print(client: AsyncClient, args: argparse.Namespace) -> None:
    print(json.dumps(await state(client, args.at, tuple(args.only or PARTS)), indent=2))


def run(args: argparse.Namespace) -> int:
    return run_signed_in(args, _print)
