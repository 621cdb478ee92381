"""The ``jetyard`` command line. For users, through the SDK: ``login``/``logout``
(``login_cli``), ``run``, ``ps``, ``logs``, ``rm``, ``apps`` (``session_cli``), ``shell``
(``shell_cli``), ``vfolder`` (``vfolder_cli``), ``completion``. For operators, on NATS: stream
set-up, the embedded stack (``up``), audit replay (``log``), the views' rebuild, the
quarantine, the AsyncAPI document; they act on the running stack unless told otherwise
(``operator_target``)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import sys
from dataclasses import asdict
from pathlib import Path

import argcomplete

from commands.asyncapi import build_document, differences, render
from events.bus import ServerUnsuitableError, connect, ensure_streams
from events.quarantine import Quarantine
from events.store import EventStore, decode
from events.tail import Tail
from events.writes import AggregateRef
from jetyard import completion, login_cli, session_cli, shell_cli, vfolder_cli
from jetyard.natsserver import NatsServer
from jetyard.operator_target import nats_settings, projection_settings
from jetyard.runtime import DataDirBusyError, default_data_dir
from jetyard.serve import SERVICES, serve
from jetyard.session_args import split_command
from jetyard.stacks import NoStackError
from jetyard.up import UpOptions, up
from schemas.subjects import AggregateType

USER_COMMANDS = {"run", "ps", "logs", "rm", "apps"}


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


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="jetyard", description="GPU cluster manager on NATS JetStream"
    )
    sub = root.add_subparsers(dest="command", required=True)

    def with_nats(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
        p.add_argument(
            "--data-dir",
            help="the stack whose data directory this is (env JETYARD_DATA_DIR; default: "
            "the running `jetyard up`)",
        )
        p.add_argument("--url", help="NATS URL instead (env JETYARD_NATS_URL)")
        p.add_argument("--token", help="NATS token (env JETYARD_NATS_TOKEN)")
        return p

    login_cli.add_parsers(sub)
    session_cli.add_parsers(sub)

    with_nats(sub.add_parser("streams", help="create or update every stream and bucket"))
    log = with_nats(
        sub.add_parser("log", help="replay the event log as JSON lines with their seq (audit)")
    )
    log.add_argument("--from-seq", type=int, default=1, help="first stream sequence to print")
    log.add_argument("--aggregate", help="only one aggregate, as <type>/<id>")
    up = sub.add_parser("up", help="start the whole system on this machine (embedded defaults)")
    up.add_argument(
        "--data-dir",
        default=os.environ.get("JETYARD_DATA_DIR", str(default_data_dir())),
        help="where the log, views and logs live (env JETYARD_DATA_DIR)",
    )
    up.add_argument(
        "--gateway-port",
        type=int,
        default=int(os.environ.get("JETYARD_GATEWAY_PORT", "8080")),
        help="GraphQL port (env JETYARD_GATEWAY_PORT)",
    )
    up.add_argument(
        "--nats-port",
        type=int,
        default=int(os.environ.get("JETYARD_NATS_PORT", "0")),
        help="NATS port, 0 for a free one (env JETYARD_NATS_PORT)",
    )
    up.add_argument(
        "--agent-backend",
        choices=["auto", "docker", "simulated"],
        default=os.environ.get("JETYARD_AGENT_BACKEND", "auto"),
        help="containers on Docker, or simulated (env JETYARD_AGENT_BACKEND)",
    )
    projections = with_nats(sub.add_parser("projections", help="read-model maintenance"))
    projections.add_argument("action", choices=["rebuild"], help="rebuild every view from the log")
    quarantine = with_nats(
        sub.add_parser("quarantine", help="events consumers could not fold (list, release)")
    )
    quarantine.add_argument("action", choices=["list", "release"], nargs="?", default="list")
    quarantine.add_argument("--consumer", help="release: the consumer named in the list")
    quarantine.add_argument("--seq", type=int, help="release: the event's stream sequence")
    serve = sub.add_parser("serve", help="run one service against an external NATS (JETYARD_*)")
    serve.add_argument("service", choices=sorted(SERVICES))
    asyncapi = sub.add_parser("asyncapi", help="the AsyncAPI document of every subject (JSON)")
    where = asyncapi.add_mutually_exclusive_group()
    where.add_argument(
        "--output", metavar="PATH", help="write it to this file instead of printing it"
    )
    where.add_argument(
        "--check", metavar="PATH", help="exit 1, naming what differs, unless this file matches"
    )
    vfolder_cli.add_parser(sub)
    shell_cli.add_parser(sub)
    completion.add_parser(sub)
    nats = sub.add_parser("nats", help="run a development nats-server with the streams declared")
    nats.add_argument("--data-dir", default=".jetyard/nats", help="where JetStream keeps data")
    nats.add_argument("--port", type=int, default=4222)
    return root


def parse(argv: list[str], root: argparse.ArgumentParser | None = None) -> argparse.Namespace:
    """The arguments, with ``run``'s command taken whole from after its ``--``."""
    given, after_dashes = split_command(argv)
    args = (root or parser()).parse_args(given)
    if after_dashes is not None:
        args.cmd = after_dashes
    return args


def main(argv: list[str] | None = None) -> int:
    root = parser()
    argcomplete.autocomplete(root)  # answers the shell and exits when it asks (completion.py)
    args = parse(sys.argv[1:] if argv is None else argv, root)
    try:
        if args.command in USER_COMMANDS:
            return session_cli.run(args)
        if args.command in ("login", "logout"):
            return login_cli.login(args) if args.command == "login" else login_cli.logout(args)
        if args.command == "completion":
            return completion.run(args)
        if args.command == "up":
            options = UpOptions(
                data_dir=Path(args.data_dir).expanduser(),
                gateway_port=args.gateway_port,
                nats_port=args.nats_port,
                agent_backend=args.agent_backend,
                restart_delay_s=float(os.environ.get("JETYARD_UP_RESTART_DELAY_S", "1.0")),
            )
            return up(options)
        if args.command == "serve":
            return serve(args.service)
        if args.command == "asyncapi":
            return _asyncapi(args)
        if args.command == "vfolder":
            return vfolder_cli.run(args)
        if args.command == "shell":
            return shell_cli.run(args)
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
    except BrokenPipeError:  # `jetyard log | head`: the reader had enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
    except (
        ConnectionError,
        ServerUnsuitableError,
        DataDirBusyError,
        NoStackError,
        ValueError,
    ) as exc:
        print(f"jetyard: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
