"""``jetyard run``, ``ps``, ``logs``, ``rm``, ``images``, ``apps`` and ``quota``: compute
sessions from the shell, through the SDK (``jetyard.sdk.sessions``), signed in as
``jetyard.sdk.config`` says. A session is named by its id, its name, or a unique prefix of its
id (8+ characters: ``Sessions.resolve``); ``ps`` says how each ended (``terminated`` when its
end was asked for) and its resources in total; ``quota`` says held, waiting and limit apart.

``jetyard run IMAGE -- CMD...`` creates a batch session, says its status changes on stderr,
streams its output to stdout live (the ``sessionOutput`` subscription, from line 0) and exits
with its exit code. While its image is pulled (PULLING), the pulls' progress is drawn on
stderr (``jetyard.cli.pulls``); a failed pull says why, and the session's end follows. An
interactive one (``--type interactive``) is followed until it runs,
then its id is printed (exit 1 if it ended instead); ``--detach`` prints the id at once.
Ctrl-C leaves the session as it is and says how to follow or stop it.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import webbrowser
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from datetime import UTC, datetime

from jetyard.cli import common as ui
from jetyard.cli.pulls import show_pulls
from jetyard.cli.sessions_args import add_parsers, env_pairs
from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.config import ConfigError, Credentials
from jetyard.sdk.errors import JetyardError
from jetyard.sdk.models import Mount, QuotaSlot, StatusChange
from jetyard.sdk.sessions import FINAL, no_session

__all__ = ["COMMANDS", "add_parsers", "run"]


def _say(text: str) -> None:
    print(f"jetyard: {text}", file=sys.stderr, flush=True)


def _change(session_id: str, change: StatusChange) -> str:
    position, length = change.queue_position, change.queue_length
    queue = f" ({position} of {length} waiting)" if position else ""
    reason = f": {change.reason}" if change.reason else ""
    return f"session {session_id} {change.status}{queue}{reason}"


async def _follow(jy: AsyncClient, session_id: str, until: str = "") -> StatusChange | None:
    """Say each status change until a final one (or ``until``); the last one."""
    said, last = "", None
    async with aclosing(jy.sessions.statuses(session_id)) as changes:
        async for last in changes:
            line = _change(session_id, last)
            if line != said:
                _say(line)
                said = line
            if last.status == until:
                break
    return last


async def _stream(jy: AsyncClient, session_id: str, kernel: str | None, tagged: bool) -> None:
    async with aclosing(jy.sessions.output(session_id, 0, kernel)) as chunks:
        async for chunk in chunks:
            tag = f"[{chunk.kernel_id[:8]}] " if tagged else ""
            for line in chunk.lines:
                sys.stdout.write(f"{tag}{line}\n")
            sys.stdout.flush()


async def _run_session(jy: AsyncClient, args: argparse.Namespace, started: list[str]) -> int:
    outcome = await jy.sessions.create(
        args.image,
        command=args.cmd or None,
        type=args.type,
        cpu=args.cpu,
        memory=args.memory,
        gpu=args.gpu,
        cluster_size=args.cluster_size,
        mounts=[Mount.model_validate(m) for m in args.mount],
        env=env_pairs(args.env),
        name=args.name,
    )
    session_id = str(outcome.session_id)
    started.append(session_id)
    if args.detach:
        print(session_id)
        return 0
    pulling = asyncio.create_task(show_pulls(jy, session_id))
    try:
        if args.type == "interactive":
            last = await _follow(jy, session_id, until="RUNNING")
            if last is None or last.status != "RUNNING":
                return ui.REFUSED
            print(session_id)
            return 0
        following = asyncio.create_task(_follow(jy, session_id))
        try:
            await _stream(jy, session_id, None, (args.cluster_size or 1) > 1)
            await following
        finally:
            following.cancel()
    finally:
        pulling.cancel()
    ended = await jy.sessions.wait(session_id)
    if ended.status == "TERMINATED" and ended.exit_code is not None:
        return ended.exit_code
    _say(f"session {session_id} ended {ended.status} with no exit code: {ended.status_reason}")
    return 1


async def _ps(jy: AsyncClient, args: argparse.Namespace) -> int:
    found = await jy.sessions.list(status=args.status)
    if not (args.all or args.status):
        found = [s for s in found if s.status not in FINAL]
    if args.json:
        ui.json_lines(s.as_json() for s in found)
        return 0
    now = datetime.now(UTC)
    # The resources are the session's total: every kernel's together. A waiting session says
    # why it waits (in a fair-share group, with its owner's factors: docs/scheduling.md).
    columns = ("id", "name", "image", "type", "status", "kernels", "cpu", "memory", "gpu",
               "ended", "created", "waits because")  # fmt: skip
    ui.table(columns, (
        (s.id, s.name, s.image, s.type, s.status, s.cluster_size, s.resources.cpu,
         ui.human_bytes(int(s.resources.memory_bytes)), s.resources.gpu, s.ended_as,
         ui.ago(s.created_at, now), s.status_reason if s.status == "PENDING" else None)
        for s in found
    ))  # fmt: skip
    return 0


async def _kernel(jy: AsyncClient, session_id: str, kernel: str) -> str:
    """A kernel's id, from its id or its index in the session (0: the main one)."""
    if not kernel.isdigit():
        return kernel
    session = await jy.sessions.get(session_id)
    if session is None:
        raise no_session(session_id)
    if int(kernel) >= len(session.kernel_ids):
        raise JetyardError(f"session {session_id} has {len(session.kernel_ids)} kernel(s)")
    return session.kernel_ids[int(kernel)]


async def _logs(jy: AsyncClient, args: argparse.Namespace) -> int:
    args.session = await jy.sessions.resolve(args.session)
    if args.kernel is not None:
        await _stream(jy, args.session, await _kernel(jy, args.session, args.kernel), False)
        return 0
    session = await jy.sessions.get(args.session)
    if args.follow:
        tagged = session is not None and session.cluster_size > 1
        await _stream(jy, args.session, None, tagged)
        return 0
    if session is None:
        raise no_session(args.session)
    sys.stdout.write(await jy.sessions.logs(args.session))
    return 0


async def _rm(jy: AsyncClient, args: argparse.Namespace) -> int:
    failed = 0
    for ref in args.sessions:
        try:
            session_id = await jy.sessions.resolve(ref)
            outcome = await jy.sessions.terminate(session_id, args.reason)
            print(f"{session_id}: {outcome.message or outcome.status.lower()}")
        except JetyardError as exc:
            print(f"jetyard rm: {ref}: {exc}", file=sys.stderr)
            failed = ui.REFUSED
    return failed


async def _apps(jy: AsyncClient, args: argparse.Namespace) -> int:
    args.session = await jy.sessions.resolve(args.session)
    if args.app is not None:
        access = await jy.apps.start(args.session, args.app)
        print(access.url)
        if args.open:
            webbrowser.open(access.url)
        return 0
    ports = await jy.apps.list(args.session)
    if args.json:
        ui.json_lines(p.as_json() for p in ports)
        return 0
    columns = ("kernel", "app", "protocol", "port", "state", "public")
    ui.table(columns, ((p.kernel_id[:12], p.name, p.protocol, p.port, p.state, p.public)
                       for p in ports))  # fmt: skip
    _say(f"and `terminal` in any running session: jetyard shell {args.session}")
    return 0


async def _images(jy: AsyncClient, args: argparse.Namespace) -> int:
    found = await jy.sessions.images()
    if args.json:
        ui.json_lines(i.as_json() for i in found)
        return 0
    columns = ("image", "registered", "registry", "held on", "groups", "apps")
    ui.table(columns, ((i.name, "yes" if i.registered else "no", i.registry, _hosts(i.hosts),
                        ",".join(i.resource_groups) or None, ",".join(i.apps) or None)
                       for i in found))  # fmt: skip
    if any(not i.nodes and i.registry for i in found):
        _say("an image of a registry no node holds yet is pulled by the node a session lands on")
    if any(not i.nodes and not i.registry for i in found):
        _say("an image no node holds and no registry has waits for a node that holds it")
    return 0


def _hosts(hosts: list[str], shown: int = 3) -> str | None:
    """The nodes that hold an image: a few by name, then how many more."""
    if len(hosts) <= shown:
        return ",".join(hosts) or None
    return f"{','.join(hosts[:shown])} +{len(hosts) - shown} more"


def _amount(slot: str, value: str) -> str:
    if value == "unlimited" or slot != "memory":
        return value
    return ui.human_bytes(int(value))


def _three(slot: QuotaSlot) -> str:
    """``held / waiting / limit``: three numbers, never added together."""
    return " / ".join(_amount(slot.slot, v) for v in (slot.held, slot.waiting, slot.limit))


async def _quota(jy: AsyncClient, args: argparse.Namespace) -> int:
    found = await jy.admin.quotas()
    if args.json:
        ui.json_lines(q.as_json() for q in found)
        return 0
    columns = ("scope", "name", "running", "waiting", "cpu", "memory", "gpu")
    ui.table(columns, (
        (q.scope, q.name, q.holding, q.waiting,
         *(_three(s) for s in sorted(q.slots, key=lambda s: SLOT_ORDER.index(s.slot))))
        for q in found
    ))  # fmt: skip
    _say("each resource: held by running sessions / asked for by waiting ones / the limit")
    return 0


SLOT_ORDER = ("cpu", "memory", "gpu")

HANDLERS: dict[str, Callable[[AsyncClient, argparse.Namespace], Awaitable[int]]] = {
    "ps": _ps,
    "logs": _logs,
    "rm": _rm,
    "images": _images,
    "apps": _apps,
    "quota": _quota,
}
COMMANDS = ("run", *HANDLERS)


def run(args: argparse.Namespace) -> int:
    try:
        signed_in = ui.credentials(args)
    except ConfigError as exc:
        print(f"jetyard {args.command}: {exc}", file=sys.stderr)
        return ui.USAGE
    started: list[str] = []
    try:
        return asyncio.run(_call(args, signed_in, started))
    except JetyardError as exc:
        print(f"jetyard {args.command}: {exc}", file=sys.stderr)
        return ui.REFUSED
    except KeyboardInterrupt:
        if started:
            sid = started[0]
            _say(
                f"session {sid} goes on: `jetyard logs -f {sid}` follows it, "
                f"`jetyard rm {sid}` ends it"
            )
        return ui.INTERRUPTED


async def _call(args: argparse.Namespace, signed_in: Credentials, started: list[str]) -> int:
    async with AsyncClient.from_config(signed_in) as jy:
        if args.command == "run":
            return await _run_session(jy, args, started)
        return await HANDLERS[args.command](jy, args)
