"""The arguments of ``jetyard run``, ``ps``, ``logs``, ``rm``, ``images`` and ``apps``
(``jetyard.cli.sessions``), and the small parsers they need: ``--mount folder[:path[:ro]]``,
``--env NAME=VALUE``, and the split of ``run IMAGE [options] -- CMD...`` at its ``--``."""

from __future__ import annotations

import argparse
from typing import Any

from jetyard.cli.common import add_credential_options


def mount(text: str) -> dict[str, Any]:
    """``data``, ``data:/mnt/data``, ``data:/mnt/data:ro``, ``data::ro`` (default path)."""
    folder, _, rest = text.partition(":")
    path, _, mode = rest.partition(":")
    if not folder or mode not in ("", "ro", "rw"):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not folder[:path[:ro|rw]] (e.g. data, data:/data, data:/data:ro)"
        )
    return {"folder": folder, "path": path or None, "read_only": mode == "ro"}


def env_pair(text: str) -> tuple[str, str]:
    name, sep, value = text.partition("=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"{text!r} is not NAME=VALUE")
    return name, value


def env_pairs(pairs: list[tuple[str, str]]) -> dict[str, str] | None:
    return dict(pairs) or None


COMMAND_AFTER_DASHES = ("run", "shell")
SESSION_HELP = "the session's id, its name, or a unique prefix of its id (8+ characters)"


def split_command(argv: list[str]) -> tuple[list[str], list[str] | None]:
    """``run IMAGE [options] -- CMD...`` (and ``shell SESSION [options] -- CMD...``): the
    arguments to parse, and the command after the first ``--`` (None without one). Only for
    these: elsewhere ``--`` keeps its meaning."""
    if not argv or argv[0] not in COMMAND_AFTER_DASHES or "--" not in argv:
        return argv, None
    cut = argv.index("--")
    return argv[:cut], argv[cut + 1 :]


def add_parsers(sub: Any) -> None:
    run = sub.add_parser(
        "run",
        help="run a session: IMAGE [options] -- CMD...; batch: follow it, exit with its code",
        description="Create a session, say its status changes (and draw its image's pull) on "
        "stderr, stream its output to stdout and exit with its exit code (batch, the "
        "default); an interactive one prints its id and returns. Put the command after `--`.",
    )
    run.add_argument("image", help="e.g. jetyard-busybox:latest")
    run.add_argument("cmd", nargs="*", help="the command (after --)")
    run.add_argument("--type", choices=["batch", "interactive"], default="batch")
    run.add_argument("--cpu", default="1", help="cores per kernel, e.g. 0.5 (default 1)")
    run.add_argument("--memory", default="256m", help="per kernel, e.g. 512m, 2g (default 256m)")
    run.add_argument("--gpu", default="0", help="GPUs per kernel: 1, 2, or a share like 0.25")
    run.add_argument("--cluster-size", type=int, help="kernels (default 1)")
    run.add_argument(
        "--mount",
        type=mount,
        action="append",
        default=[],
        metavar="FOLDER[:PATH[:ro]]",
        help="a virtual folder (repeatable)",
    )
    run.add_argument(
        "--env",
        "-e",
        type=env_pair,
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an environment variable (repeatable)",
    )
    run.add_argument("--name", help="a name for the session")
    run.add_argument("--detach", "-d", action="store_true",
                     help="print the session id and return without following it")  # fmt: skip
    add_credential_options(run)

    ps = sub.add_parser("ps", help="list your sessions (live ones; --all for every one)")
    ps.add_argument("--all", "-a", action="store_true", help="ended sessions too")
    ps.add_argument("--status", help="only this status (PENDING, RUNNING, TERMINATED, ...)")
    ps.add_argument("--json", action="store_true", help="JSON lines, one session each")
    add_credential_options(ps)

    logs = sub.add_parser("logs", help="a session's output; -f follows it live")
    logs.add_argument("session", help=SESSION_HELP)
    logs.add_argument("--follow", "-f", action="store_true", help="live, until the session ends")
    logs.add_argument("--kernel", help="one kernel, by id or index (0: main); follows as -f")
    add_credential_options(logs)

    rm = sub.add_parser("rm", help="terminate sessions (a PENDING one is cancelled)")
    rm.add_argument("sessions", nargs="+", metavar="SESSION", help=SESSION_HELP)
    rm.add_argument("--reason", default="user request")
    add_credential_options(rm)

    images = sub.add_parser(
        "images", help="the images a session can run: registered, and held by the nodes"
    )
    images.add_argument("--json", action="store_true", help="JSON lines, one image each")
    add_credential_options(images)

    quota = sub.add_parser(
        "quota", help="what you hold, what your waiting sessions ask for, and your limits"
    )
    quota.add_argument("--json", action="store_true", help="JSON lines, one scope each")
    add_credential_options(quota)

    apps = sub.add_parser("apps", help="a session's apps; with APP, the URL to open it")
    apps.add_argument("session", help=SESSION_HELP)
    apps.add_argument("app", nargs="?", help="an app's name: print its URL (startApp)")
    apps.add_argument("--open", action="store_true", help="and open it in a browser")
    apps.add_argument("--json", action="store_true", help="JSON lines, one app each")
    add_credential_options(apps)
