"""The ``jetyard`` command line: the parser of every command group and ``main``, which hands
each command to its group. For users, through the SDK: ``login``/``logout`` (``login``),
``run``, ``ps``, ``logs``, ``rm``, ``images``, ``apps`` (``sessions``), ``shell``, ``vfolder``
(``folders``), ``endpoint`` (``endpoints``: model serving), ``completion``; for admins,
``admin`` (people, keypairs) and ``registry`` (registries, rescans, pull policies). For
operators, on NATS: stream set-up, audit replay (``log``), the views' rebuild, the
quarantine, the AsyncAPI document (``operator``), the sealed log's verification and backups
(``audit``), and the runtime: ``up`` and ``serve``
(``up``)."""

from __future__ import annotations

import argparse
import os
import sys

import argcomplete

from events.bus import ServerUnsuitableError
from jetyard.cli import (
    admin,
    audit,
    completion,
    endpoints,
    folders,
    join,
    login,
    operator,
    registry,
    sessions,
    shell,
    up,
)
from jetyard.cli.sessions_args import split_command
from jetyard.runtime.data_dir import DataDirBusyError
from jetyard.stacks import NoStackError


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(
        prog="jetyard", description="GPU cluster manager on NATS JetStream"
    )
    sub = root.add_subparsers(dest="command", required=True)
    login.add_parsers(sub)
    sessions.add_parsers(sub)
    operator.add_stream_parsers(sub)
    up.add_up_parser(sub)
    operator.add_view_parsers(sub)
    up.add_serve_parser(sub)
    operator.add_asyncapi_parser(sub)
    folders.add_parser(sub)
    endpoints.add_parser(sub)
    shell.add_parser(sub)
    completion.add_parser(sub)
    operator.add_nats_parser(sub)
    admin.add_parser(sub)
    registry.add_parser(sub)
    join.add_parser(sub)
    audit.add_parser(sub)
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
        if args.command in sessions.COMMANDS:
            return sessions.run(args)
        if args.command in ("login", "logout"):
            return login.login(args) if args.command == "login" else login.logout(args)
        if args.command == "completion":
            return completion.run(args)
        if args.command in up.COMMANDS:
            return up.run(args)
        if args.command == "vfolder":
            return folders.run(args)
        if args.command == "endpoint":
            return endpoints.run(args)
        if args.command == "shell":
            return shell.run(args)
        if args.command == "admin":
            return admin.run(args)
        if args.command == "registry":
            return registry.run(args)
        if args.command == "join":
            return join.run(args)
        if args.command in audit.COMMANDS:
            return audit.run(args)
        return operator.run(args)
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
