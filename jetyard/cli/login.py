"""``jetyard login`` and ``jetyard logout``: keep (or drop) the gateway and the credentials the
user commands and ``Client.from_config`` use (``jetyard.sdk.config``). A keypair is checked
with a signed ``viewer`` query before it is kept; a password is sent once to the ``login``
mutation and only the token it returns, and its expiry, are kept. Secrets come from the
terminal (not echoed) or, piped, from the first line of stdin; never from the command line
unless given there. Exit status 0 signed in, 1 refused, 2 a usage error."""

from __future__ import annotations

import argparse
import asyncio
import getpass
import os
import sys
from typing import Any

from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.config import (
    ConfigError,
    Credentials,
    config_path,
    forget,
    load,
    resolve,
    save,
    token_expiry,
)
from jetyard.sdk.errors import JetyardError


def add_parsers(sub: Any) -> None:
    login = sub.add_parser(
        "login", help="sign in to a gateway: a keypair or an email and password, kept for you"
    )
    login.add_argument("--endpoint", help="the gateway (default: as the other commands find it)")
    how = login.add_mutually_exclusive_group(required=True)
    how.add_argument("--access-key", help="a keypair's access key")
    how.add_argument("--email", help="your email: the password is asked for, or read from stdin")
    login.add_argument(
        "--secret-key", help="the keypair's secret key (default: asked for, or read from stdin)"
    )
    sub.add_parser("logout", help="end the kept login and remove it")


def _secret(what: str) -> str:
    if sys.stdin.isatty():
        return getpass.getpass(f"{what}: ")
    return sys.stdin.readline().rstrip("\r\n")


async def _check(credentials: Credentials) -> str:
    async with AsyncClient.from_config(credentials) as jy:
        me = await jy.admin.viewer()
    return f"{me.user_id} ({me.role}, domain {me.domain})"


async def _login(args: argparse.Namespace, endpoint: str) -> tuple[Credentials, str]:
    if args.access_key:
        secret = args.secret_key or _secret(f"secret key of {args.access_key}")
        found = Credentials(endpoint, args.access_key, secret)
        return found, await _check(found)
    password = _secret(f"password of {args.email}")
    async with AsyncClient(endpoint) as anonymous:
        issued = await anonymous.login(args.email, password)
    found = Credentials(
        endpoint,
        token=issued.token,
        token_expires_at=token_expiry(issued.expires_in_s),
        email=args.email,
    )
    return found, await _check(found)


def login(args: argparse.Namespace) -> int:
    if args.secret_key and not args.access_key:
        print("jetyard login: --secret-key goes with --access-key", file=sys.stderr)
        return 2
    try:
        endpoint = args.endpoint or resolve().endpoint
        found, who = asyncio.run(_login(args, endpoint))
    except (JetyardError, ConfigError) as exc:
        print(f"jetyard login: {exc}", file=sys.stderr)
        return 1
    path = save(found)
    until = found.token_expires_at
    said = f" until {until.isoformat(timespec='minutes')}" if until else ""
    print(f"signed in to {endpoint} as {who}{said}; kept in {path}")
    if os.environ.get("JETYARD_ACCESS_KEY") or os.environ.get("JETYARD_SECRET_KEY"):
        print(
            "note: JETYARD_ACCESS_KEY/JETYARD_SECRET_KEY are set in this shell and are used "
            "instead of this login while they are",
            file=sys.stderr,
        )
    return 0


def logout(args: argparse.Namespace) -> int:
    try:
        kept = load()
    except ConfigError:
        kept = None
    if kept is not None and kept.token:
        try:

            async def end() -> None:
                async with AsyncClient.from_config(kept) as jy:
                    await jy.logout()

            asyncio.run(end())
        except JetyardError as exc:  # an expired or revoked token: nothing left to end
            print(f"jetyard logout: the gateway said: {exc}", file=sys.stderr)
    if forget():
        print(f"signed out of {kept.endpoint if kept else 'the gateway'}; removed {config_path()}")
    else:
        print(f"not signed in (no {config_path()})")
    return 0
