"""``jetyard admin``: bringing people in, through the SDK (``jetyard.sdk.admin``), signed in as
an administrator. ``user create EMAIL --project NAME`` makes a person in a project (by name)
with a default keypair (and a fair share with ``--fair-share``) and prints their password
once (and a keypair's secret with ``--keypair``); ``user import FILE.csv`` does it for a
whole roster and prints a CSV of who was created with their passwords; ``user list``,
``user join``, ``keypair create``; ``node`` (join tokens, removing a node:
``jetyard.cli.admin_nodes``).
Exit status 0 done, 1 refused by the gateway, 2 a usage or credentials problem."""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
from pathlib import Path
from typing import Any

from jetyard.cli import admin_nodes
from jetyard.cli import common as ui
from jetyard.sdk.admin import Newcomer, NewUser, PartlyAddedError, RosterError, read_roster
from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.config import ConfigError, Credentials
from jetyard.sdk.errors import JetyardError
from schemas.fair_share import SHARE_MOST

ROLES = ("user", "admin", "monitor", "superadmin")
OUTPUT_COLUMNS = ("email", "name", "project", "role", "user_id", "password")


def add_parser(sub: Any) -> None:
    admin = sub.add_parser(
        "admin", help="administration: bring people in (users, keypairs), machines (node)"
    )
    ui.add_credential_options(admin)
    what = admin.add_subparsers(dest="admin_object", required=True)
    user = what.add_parser("user", help="people of your domain")
    verbs = user.add_subparsers(dest="admin_verb", required=True)

    create = verbs.add_parser("create", help="a person in a project, their password shown once")
    create.add_argument("email")
    create.add_argument(
        "--project", action="append", required=True, help="a project's name (may repeat)"
    )
    create.add_argument("--role", default="user", choices=ROLES)
    create.add_argument("--password", help="default: a new one, printed once")
    create.add_argument("--domain", help="default: your own")
    create.add_argument(
        "--fair-share",
        type=fair_share,
        metavar="N",
        help=f"their share among their project's users for fair share, 1 to {SHARE_MOST} "
        "(default 1; docs/scheduling.md)",
    )
    create.add_argument(
        "--keypair", action="store_true", help="also issue a keypair and print its secret once"
    )
    create.add_argument("--json", action="store_true", help="one JSON object (for scripts)")

    imported = verbs.add_parser(
        "import", help="everyone in a CSV file (email,name,project,role); prints their passwords"
    )
    imported.add_argument("file", type=Path, help="CSV with a header line; - reads stdin")
    imported.add_argument("--domain", help="default: your own")

    listed = verbs.add_parser("list", help="the people you may see")
    listed.add_argument("--domain")
    listed.add_argument("--json", action="store_true", help="JSON lines")

    join = verbs.add_parser("join", help="add a person to a project")
    join.add_argument("email", help="an email or a user id")
    join.add_argument("project", help="a project's name")

    keypair = what.add_parser("keypair", help="keypairs: issue one (its secret shown once)")
    kverbs = keypair.add_subparsers(dest="admin_verb", required=True)
    issue = kverbs.add_parser("create", help="a new keypair for a person")
    issue.add_argument("email", help="an email or a user id")
    issue.add_argument("--policy", help="a keypair resource policy (default: default)")
    admin_nodes.add_parsers(what)


def fair_share(text: str) -> int:
    """``--fair-share``: a whole number within the bounds the gateway takes."""
    try:
        given = int(text)
    except ValueError:
        given = 0
    if not 1 <= given <= SHARE_MOST:
        raise argparse.ArgumentTypeError(
            f"a share is a whole number from 1 to {SHARE_MOST}, got {text!r}"
        )
    return given


def run(args: argparse.Namespace) -> int:
    try:
        signed_in = ui.credentials(args)
    except ConfigError as exc:
        print(f"jetyard admin: {exc}", file=sys.stderr)
        return ui.USAGE
    try:
        roster = _roster(args.file) if args.admin_verb == "import" else []
        return asyncio.run(_call(args, signed_in, roster))
    except OSError as exc:
        print(f"jetyard admin: {exc}", file=sys.stderr)
        return ui.USAGE
    except RosterError as exc:
        print(f"jetyard admin: {args.file}: {exc}; nobody was created", file=sys.stderr)
        return ui.USAGE
    except JetyardError as exc:
        print(f"jetyard admin: {exc}", file=sys.stderr)
        return ui.REFUSED


def _roster(path: Path) -> list[Newcomer]:
    text = sys.stdin.read() if str(path) == "-" else path.read_text(encoding="utf-8")
    return read_roster(text)


async def _call(args: argparse.Namespace, signed_in: Credentials, roster: list[Newcomer]) -> int:
    async with AsyncClient.from_config(signed_in) as jy:
        if args.admin_object == "node":
            return await admin_nodes.call(jy, args)
        if args.admin_object == "keypair":
            issued = await jy.admin.create_keypair(args.email, policy=args.policy)
            print(f"access key: {issued.access_key}")
            print(f"secret key: {issued.secret_key}")
            print("(the secret key is shown this once: hand it over now)", file=sys.stderr)
            return 0
        if args.admin_verb == "create":
            return await _create(jy, args)
        if args.admin_verb == "import":
            return await _import(jy, args, roster)
        if args.admin_verb == "join":
            said = await jy.admin.add_user_to_project(args.email, args.project)
            print(said.message)
            return 0
        return await _list(jy, args)


async def _create(jy: AsyncClient, args: argparse.Namespace) -> int:
    made = await jy.admin.add_user(
        args.email, args.project, role=args.role, password=args.password, domain=args.domain,
        fair_share=args.fair_share,
    )  # fmt: skip
    keys = await jy.admin.create_keypair(made.user_id) if args.keypair else None
    if args.json:
        shown: dict[str, Any] = {
            "email": made.email, "user_id": made.user_id, "domain": made.domain,
            "projects": list(made.projects), "role": made.role, "password": made.password,
        }  # fmt: skip
        if keys is not None:
            shown |= {"access_key": keys.access_key, "secret_key": keys.secret_key}
        print(json.dumps(shown))
        return 0
    print(
        f"created {made.email} ({made.role}, user {made.user_id}) in domain {made.domain}, "
        f"project {', '.join(made.projects)}"
    )
    print(f"password: {made.password}")
    if keys is not None:
        print(f"access key: {keys.access_key}")
        print(f"secret key: {keys.secret_key}")
    print(
        "(shown this once: hand it over now; they sign in with "
        f"`jetyard login --email {made.email}` or on the console)",
        file=sys.stderr,
    )
    return 0


async def _import(jy: AsyncClient, args: argparse.Namespace, roster: list[Newcomer]) -> int:
    out = csv.writer(sys.stdout, lineterminator="\n")
    out.writerow(OUTPUT_COLUMNS)

    def added(row: Newcomer, made: NewUser) -> None:
        # Written as each is made: a run stopped part-way still shows who exists.
        out.writerow((made.email, row.name, row.project, made.role, made.user_id, made.password))
        sys.stdout.flush()

    try:
        made = await jy.admin.add_users(roster, domain=args.domain, on_added=added)
    except PartlyAddedError as exc:
        print(f"jetyard admin: {args.file}: {exc}", file=sys.stderr)
        return ui.REFUSED
    print(f"created {len(made)} user(s); the passwords above are shown this once", file=sys.stderr)
    return 0


async def _list(jy: AsyncClient, args: argparse.Namespace) -> int:
    users = await jy.admin.users(args.domain)
    names = {p.id: p.name for p in await jy.admin.projects(args.domain)}
    if args.json:
        ui.json_lines(
            {"email": u.email, "id": u.id, "role": u.role, "domain": u.domain,
             "projects": [names.get(p, p) for p in u.projects],
             "keypair": u.default_access_key, "active": u.active}
            for u in users
        )  # fmt: skip
        return 0
    ui.table(
        ("EMAIL", "ID", "ROLE", "DOMAIN", "PROJECTS", "KEYPAIR", "ACTIVE"),
        (
            (u.email, u.id, u.role, u.domain, ", ".join(names.get(p, p) for p in u.projects),
             u.default_access_key, "yes" if u.active else "no")
            for u in users
        ),
    )  # fmt: skip
    return 0
