"""The operator commands, on NATS: ``streams`` (declare every stream and bucket),
``bootstrap`` (the first superadmin of a ``jetyard serve`` installation), ``log`` (the
audit replay), ``projections rebuild``, ``quarantine`` (list, release), ``nats`` (a development
nats-server) and ``asyncapi`` (the document of every subject). They act on the running stack
unless told otherwise (``jetyard.cli.operator_target``); ``log`` reads every subject's events,
``streams`` and ``quarantine release`` write the streams' and the quarantine's set-up."""

from __future__ import annotations

import argparse
import asyncio
import json
import signal
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

from commands.asyncapi import build_document, differences, render
from events.bus import connect, ensure_streams
from events.quarantine import Quarantine
from events.store import EventStore, decode
from events.tail import Tail
from events.writes import AggregateRef
from jetyard.cli.operator_target import nats_settings, projection_settings, with_nats_options
from jetyard.runtime.natsserver import NatsServer
from schemas.subjects import AggregateType

COMMANDS = ("streams", "bootstrap", "log", "projections", "quarantine", "nats", "asyncapi")


def _json_line(seq: int, body: dict[str, object]) -> str:
    return json.dumps({"seq": seq, **body})


async def _streams(args: argparse.Namespace) -> int:
    bus = await connect(nats_settings(args), name="jetyard-cli")
    try:
        await ensure_streams(bus)
        server = bus.nc.connected_server_version
        print(f"streams ready on nats-server {server.major}.{server.minor}.{server.patch}")
    finally:
        await bus.close()
    return 0


def _bootstrap(args: argparse.Namespace) -> int:
    """The first superadmin of an installation run with ``jetyard serve`` (``jetyard up`` does
    this itself): made once, with the gateway's secrets key, its credentials written to
    ``<data dir>/admin.json`` (owner-only). Needs the tenancy service running."""
    # Imported here: the gateway's modules are heavy, and every `jetyard` process (a service
    # under `jetyard serve` too) imports this module.
    from jetyard.runtime.bootstrap import AdminCredentials, bootstrap
    from services.gateway.app import secrets_key_of
    from services.gateway.settings import GatewaySettings

    key = secrets_key_of(GatewaySettings())
    where = Path(args.data_dir).expanduser()
    where.mkdir(parents=True, exist_ok=True)

    async def made() -> AdminCredentials | None:
        bus = await connect(nats_settings(args), name="jetyard-bootstrap")
        try:
            return await bootstrap(bus, where, key)
        finally:
            await bus.close()

    admin = asyncio.run(made())
    if admin is None:
        print(f"already done: the first superadmin is in {where / 'admin.json'}")
    else:
        print(f"superadmin {admin.email}: credentials in {where / 'admin.json'} (owner-only)")
    return 0


async def _log(args: argparse.Namespace) -> int:
    """Print events as JSON lines (``{"seq": ..., <the envelope>}``), in log order: the
    audit replay, for ``jq``."""
    bus = await connect(nats_settings(args), name="jetyard-log")
    try:
        if args.aggregate:
            kind, _, aggregate_id = args.aggregate.partition("/")
            history = await EventStore(bus).read(AggregateRef(AggregateType(kind), aggregate_id))
            for event in history.events:
                print(_json_line(event.seq, event.envelope.model_dump(mode="json")))
            return 0
        store = EventStore(bus)
        end = await store.stream_last_seq()
        tail = Tail(bus, from_seq=args.from_seq)
        while tail.position < end:
            batch = await tail.fetch_raw(timeout=2.0)
            if not batch:
                break
            for message in batch:
                try:
                    body = decode(message).envelope.model_dump(mode="json")
                except Exception as exc:  # the log keeps what no code can read: say so
                    body = {"subject": message.subject, "unreadable": repr(exc)[:300]}
                print(_json_line(message.seq, body))
        await tail.close()
    finally:
        await bus.close()
    return 0


async def _quarantine(args: argparse.Namespace) -> int:
    """List what consumers quarantined, or release one entry."""
    bus = await connect(nats_settings(args), name="jetyard-quarantine")
    try:
        quarantine = await Quarantine.open(bus)
        if args.action == "release":
            if args.consumer is None or args.seq is None:
                print("jetyard: release needs --consumer and --seq", file=sys.stderr)
                return 2
            if not await quarantine.release(args.consumer, args.seq):
                print(f"jetyard: {args.consumer} has nothing quarantined at seq {args.seq}")
                return 1
            print(f"released seq {args.seq} of {args.consumer}: restart it to fold it again")
            return 0
        entries = await quarantine.entries()
        for poison in entries:
            print(json.dumps(asdict(poison)))
        if not entries:
            print("nothing is quarantined", file=sys.stderr)
        return 0
    finally:
        await bus.close()


async def _projections(args: argparse.Namespace) -> int:
    """Rebuild every view into shadow tables from the first event, then swap them in."""
    from projections.rebuild import rebuild_views

    views = projection_settings(args)
    print(f"rebuilding the views in {views.database_url}", file=sys.stderr, flush=True)
    return await rebuild_views(views, nats_settings(args))


def _nats(args: argparse.Namespace) -> int:
    """Run a development nats-server in the foreground, with every stream declared."""
    server = NatsServer(data_dir=Path(args.data_dir), port=args.port).start()
    print(f"nats-server listening on {server.url} (data in {args.data_dir}); Ctrl-C stops it")
    try:
        asyncio.run(_streams(argparse.Namespace(url=server.url, token=None)))
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    finally:
        server.stop()
    return 0


def _asyncapi(args: argparse.Namespace) -> int:
    """Print or write the AsyncAPI document, or check that a file matches the code."""
    document = build_document()
    if args.check:
        path = Path(args.check)
        try:
            text = path.read_text()
            checked_in = json.loads(text)
        except (OSError, ValueError) as exc:
            print(f"jetyard: cannot read {path}: {exc}", file=sys.stderr)
            return 1
        found = differences(checked_in, document)
        if not found and text != render(document):
            found = ["the layout differs (keys or indentation)"]
        if found:
            print(f"jetyard: {path} does not match the code:", file=sys.stderr)
            for line in found:
                print(f"  {line}", file=sys.stderr)
            print(f"run `jetyard asyncapi --output {path}`", file=sys.stderr)
            return 1
        print(f"{path} matches the code")
        return 0
    if args.output:
        Path(args.output).write_text(render(document))
        print(f"wrote {args.output}")
        return 0
    sys.stdout.write(render(document))
    return 0


def add_stream_parsers(sub: Any) -> None:
    """``streams`` and ``log``."""
    with_nats_options(sub.add_parser("streams", help="create or update every stream and bucket"))
    made = sub.add_parser(
        "bootstrap",
        help="the first superadmin, for an installation run with `jetyard serve` "
        "(JETYARD_GATEWAY_SECRETS_KEY and JETYARD_NATS_*; needs the tenancy service)",
    )
    made.add_argument("--data-dir", required=True, help="where admin.json is written")
    made.add_argument("--url", help="NATS URL instead (env JETYARD_NATS_URL)")
    made.add_argument("--token", help="NATS token (env JETYARD_NATS_TOKEN)")
    log = with_nats_options(
        sub.add_parser("log", help="replay the event log as JSON lines with their seq (audit)")
    )
    log.add_argument("--from-seq", type=int, default=1, help="first stream sequence to print")
    log.add_argument("--aggregate", help="only one aggregate, as <type>/<id>")


def add_view_parsers(sub: Any) -> None:
    """``projections`` and ``quarantine``."""
    projections = with_nats_options(sub.add_parser("projections", help="read-model maintenance"))
    projections.add_argument("action", choices=["rebuild"], help="rebuild every view from the log")
    quarantine = with_nats_options(
        sub.add_parser("quarantine", help="events consumers could not fold (list, release)")
    )
    quarantine.add_argument("action", choices=["list", "release"], nargs="?", default="list")
    quarantine.add_argument("--consumer", help="release: the consumer named in the list")
    quarantine.add_argument("--seq", type=int, help="release: the event's stream sequence")


def add_asyncapi_parser(sub: Any) -> None:
    asyncapi = sub.add_parser("asyncapi", help="the AsyncAPI document of every subject (JSON)")
    where = asyncapi.add_mutually_exclusive_group()
    where.add_argument(
        "--output", metavar="PATH", help="write it to this file instead of printing it"
    )
    where.add_argument(
        "--check", metavar="PATH", help="exit 1, naming what differs, unless this file matches"
    )


def add_nats_parser(sub: Any) -> None:
    nats = sub.add_parser("nats", help="run a development nats-server with the streams declared")
    nats.add_argument("--data-dir", default=".jetyard/nats", help="where JetStream keeps data")
    nats.add_argument("--port", type=int, default=4222)


def run(args: argparse.Namespace) -> int:
    if args.command == "asyncapi":
        return _asyncapi(args)
    if args.command == "bootstrap":
        return _bootstrap(args)
    if args.command == "nats":
        # Blocked so that sigwait() receives them instead of the default handlers.
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        return _nats(args)
    command = {
        "streams": _streams,
        "log": _log,
        "projections": _projections,
        "quarantine": _quarantine,
    }[args.command]
    return asyncio.run(command(args))
