"""``jetyard registry``: the registries images come from, for superadmins, through the SDK
(``jetyard.sdk.images``): ``add`` (the password or token read from stdin only, never an
argument), ``modify``, ``ls`` (whether a secret is set, never the secret), ``rescan`` (its
progress on stderr, then what it registered, updated, left unchanged and skipped, and why),
``rm``, and ``pull-policy IMAGE if-not-present|always|digest|group``. Exit status 0 done, 1
refused by the gateway (its message, and its code), 2 a usage or credentials problem."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

from jetyard.cli import common as ui
from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.config import ConfigError, Credentials
from jetyard.sdk.errors import JetyardError
from jetyard.sdk.images import PULL_POLICIES
from jetyard.sdk.models import RegistryInfo, RescanProgress, RescanResult

RESCAN_TIMEOUT_S = 1800.0
GROUP = "group"
"""``pull-policy IMAGE group``: the image follows its resource group's policy."""


def add_parser(sub: Any) -> None:
    registry = sub.add_parser(
        "registry", help="registries images come from: add, ls, rescan, rm (superadmins)"
    )
    ui.add_credential_options(registry)
    verbs = registry.add_subparsers(dest="registry_verb", required=True)

    add = verbs.add_parser("add", help="add a registry (a password or token from stdin)")
    add.add_argument("name", help="a name for it, e.g. lab")
    add.add_argument("url", help="http(s)://host[:port]")
    _settings(add)

    modify = verbs.add_parser("modify", help="change a registry; what is left out stays")
    modify.add_argument("name")
    modify.add_argument("--url", help="http(s)://host[:port]")
    _settings(modify)
    modify.add_argument(
        "--every-project", action="store_true", help="any project's sessions may use its images"
    )
    modify.add_argument("--verify-tls", action="store_true", default=None,
                        help="check its certificate again")  # fmt: skip

    ls = verbs.add_parser("ls", help="the registries (never a secret: whether one is set)")
    ls.add_argument("--all", "-a", action="store_true", help="removed ones too")
    ls.add_argument("--json", action="store_true", help="JSON lines, one registry each")

    rescan = verbs.add_parser("rescan", help="record the images its repositories hold")
    rescan.add_argument("name")
    rescan.add_argument("--repository", "-r", action="append", default=None, metavar="REPO",
                        help="only this repository, e.g. team/tool (repeatable)")  # fmt: skip
    rescan.add_argument("--json", action="store_true", help="the result as one JSON object")

    rm = verbs.add_parser("rm", help="remove a registry: no rescan or pull uses it again")
    rm.add_argument("name")
    rm.add_argument("--reason", default="")

    policy = verbs.add_parser("pull-policy", help="when nodes pull an image")
    policy.add_argument("image", help="a registered image, e.g. registry.lab:5000/team/tool:v1")
    policy.add_argument("policy", choices=(*PULL_POLICIES, GROUP),
                        help=f"{GROUP}: its resource group's policy")  # fmt: skip


def _settings(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--username", help="the account to pull and list with")
    parser.add_argument(
        "--password-stdin", action="store_true",
        help="read the password or token from stdin (asked for on a terminal)",
    )  # fmt: skip
    parser.add_argument(
        "--project", action="append", default=None, metavar="PROJECT",
        help="a project (id or DOMAIN/NAME) whose sessions may use its images (repeatable; "
        "none: every project)",
    )  # fmt: skip
    parser.add_argument("--ca-file", type=Path, help="the lab's own CA certificate (PEM)")
    parser.add_argument(
        "--no-verify-tls", dest="verify_tls", action="store_false", default=None,
        help="do not check its certificate",
    )  # fmt: skip


def _password() -> str:
    if sys.stdin.isatty():
        return getpass.getpass("password or token: ")
    return sys.stdin.readline().rstrip("\r\n")


def run(args: argparse.Namespace) -> int:
    try:
        signed_in = ui.credentials(args)
    except ConfigError as exc:
        print(f"jetyard registry: {exc}", file=sys.stderr)
        return ui.USAGE
    verb = f"jetyard registry {args.registry_verb}"
    try:
        ca_pem = (
            args.ca_file.read_text(encoding="utf-8") if getattr(args, "ca_file", None) else None
        )
    except (OSError, UnicodeDecodeError) as exc:
        print(f"{verb}: cannot read the CA file: {exc}", file=sys.stderr)
        return ui.USAGE
    if getattr(args, "every_project", False) and args.project:
        print(f"{verb}: --every-project or --project, not both", file=sys.stderr)
        return ui.USAGE
    password = _password() if getattr(args, "password_stdin", False) else None
    try:
        return asyncio.run(_call(args, signed_in, password, ca_pem))
    except JetyardError as exc:
        code = f" ({exc.code})" if exc.code and exc.code not in str(exc) else ""
        print(f"{verb}: {exc}{code}", file=sys.stderr)
        return ui.REFUSED


async def _call(
    args: argparse.Namespace, signed_in: Credentials, password: str | None, ca_pem: str | None
) -> int:
    # A rescan answers when it is done: a large registry takes longer than a query.
    timeout_s = RESCAN_TIMEOUT_S if args.registry_verb == "rescan" else 30.0
    async with AsyncClient.from_config(signed_in, timeout_s=timeout_s) as jy:
        registries, verb = jy.registries, args.registry_verb
        if verb == "add":
            said = await registries.add(
                args.name, args.url, username=args.username or "", password=password or "",
                projects=args.project or (), verify_tls=args.verify_tls is not False,
                ca_pem=ca_pem or "",
            )  # fmt: skip
        elif verb == "modify":
            said = await registries.modify(
                args.name, url=args.url, username=args.username, password=password,
                projects=[] if args.every_project else args.project,
                verify_tls=args.verify_tls, ca_pem=ca_pem,
            )  # fmt: skip
        elif verb == "rm":
            said = await registries.remove(args.name, args.reason)
        elif verb == "pull-policy":
            chosen = None if args.policy == GROUP else args.policy
            said = await registries.set_pull_policy(args.image, chosen)
        elif verb == "ls":
            return await _ls(jy, args)
        else:
            return await _rescan(jy, args)
        print(said.message or said.status.lower())
        return 0


async def _ls(jy: AsyncClient, args: argparse.Namespace) -> int:
    found = [r for r in await jy.registries.list() if args.all or not r.removed]
    if args.json:
        ui.json_lines(r.as_json() for r in found)
        return 0
    names = {p.id: f"{p.domain}/{p.name}" for p in await jy.admin.projects()} if found else {}
    columns = ("name", "url", "username", "secret", "projects", "tls", *(("removed",) * args.all))
    ui.table(columns, (_row(r, names, args.all) for r in found))
    return 0


def _row(r: RegistryInfo, names: dict[str, str], removed: bool) -> tuple[Any, ...]:
    tls = ("verified" if r.verify_tls else "not verified") + (", own CA" if r.has_ca else "")
    projects = ", ".join(names.get(p, p) for p in r.projects) or "every project"
    row = (r.name, r.url, r.username or None, "set" if r.has_secret else "none", projects, tls)
    return (*row, "yes" if r.removed else "no") if removed else row


def rescan_text(name: str, p: RescanProgress) -> str:
    """``rescanning lab: 2 of 3 repositories, 7 of 12 tags``."""
    return (
        f"rescanning {name}: {p.repositories_done} of {p.repositories_total} repositories, "
        f"{p.tags_done} of {p.tags_total} tags"
    )


def summary(result: RescanResult) -> list[str]:
    """What a rescan came to, a line for the counts and one per image registered, updated
    or skipped (with why)."""
    lines = [
        f"registry {result.registry}: {len(result.registered)} registered, "
        f"{len(result.updated)} updated, {result.unchanged} unchanged, "
        f"{len(result.skipped)} skipped"
    ]
    lines += [f"registered  {ref}" for ref in result.registered]
    lines += [f"updated     {ref}" for ref in result.updated]
    lines += [f"skipped     {s.reference}: {s.reason}" for s in result.skipped]
    return lines


async def _rescan(jy: AsyncClient, args: argparse.Namespace) -> int:
    console = Console(stderr=True)
    bar = Progress(
        TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        console=console, redirect_stdout=False, transient=True,
        disable=not console.is_terminal,
    )  # fmt: skip
    task = bar.add_task(f"rescanning {args.name}", total=None)
    repositories_said = [-1]

    def progressed(p: RescanProgress) -> None:
        bar.update(task, description=rescan_text(args.name, p), completed=p.tags_done,
                   total=p.tags_total or None)  # fmt: skip
        # Not a terminal (a pipe, a log): a line per repository done, not one per tag.
        if not console.is_terminal and p.repositories_done != repositories_said[0]:
            repositories_said[0] = p.repositories_done
            print(f"jetyard: {rescan_text(args.name, p)}", file=sys.stderr, flush=True)

    with bar:
        result = await jy.registries.rescan(args.name, args.repository, progress=progressed)
    if args.json:
        print(json.dumps(result.as_json()))
    else:
        print("\n".join(summary(result)))
    return 0
