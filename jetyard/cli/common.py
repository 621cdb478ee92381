"""What the user commands share: the credential options (``--endpoint``, ``--access-key``,
``--secret-key``, resolved by ``jetyard.sdk.config``), rich tables that keep whole ids in a
pipe, JSON lines for ``--json``, and the exit statuses (0 done, 1 refused by the server, 2 a
usage or credentials problem, 130 interrupted)."""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from rich.console import Console
from rich.table import Table

from jetyard.sdk.config import Credentials, resolve

REFUSED, USAGE, INTERRUPTED = 1, 2, 130


def add_credential_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--endpoint",
        help="the gateway (env JETYARD_ENDPOINT; else what `jetyard login` kept, else the "
        "running `jetyard up`'s, else http://127.0.0.1:8080)",
    )
    parser.add_argument("--access-key", help="a keypair's access key (env JETYARD_ACCESS_KEY)")
    parser.add_argument("--secret-key", help="its secret key (env JETYARD_SECRET_KEY)")


def credentials(args: argparse.Namespace) -> Credentials:
    """The endpoint and the credentials to use; ``ConfigError`` when there are none."""
    found = resolve(
        getattr(args, "endpoint", None),
        getattr(args, "access_key", None),
        getattr(args, "secret_key", None),
    )
    return found.checked()


def console(stderr: bool = False) -> Console:
    """A terminal's width on a terminal; wide in a pipe or a file, so ids are never cut."""
    found = Console(stderr=stderr)
    return found if found.is_terminal else Console(stderr=stderr, width=400)


def table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    shown = Table(box=None, pad_edge=False)
    for column in columns:
        shown.add_column(column)
    for row in rows:
        shown.add_row(*("-" if cell is None else str(cell) for cell in row))
    console().print(shown)


def json_lines(rows: Iterable[dict[str, Any]]) -> None:
    for row in rows:
        print(json.dumps(row), flush=True)


def human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024:
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.4g} {unit}"
        size /= 1024
    return f"{size:.4g} TiB"


def ago(when: datetime, now: datetime) -> str:
    seconds = max(0, int((now - when).total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return f"{seconds}s ago"
