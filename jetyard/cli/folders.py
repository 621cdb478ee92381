"""``jetyard vfolder``: virtual folders from the shell, through the SDK (``jetyard.sdk``): the
folders (create, ls, info, rename, clone, rm, restore, purge, share, accept, decline,
unshare, leave, quota) and their files (upload, download, files, mkdir, mv, delete), with a
progress bar. Signs in as the other user commands do (``jetyard.sdk.config``: options,
``JETYARD_*``, then what ``jetyard login`` kept). Exit status 1 with the server's words when
it refuses, 2 for a usage error."""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path, PurePosixPath
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from jetyard.cli.common import add_credential_options, credentials, json_lines, table
from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.config import ConfigError, Credentials
from jetyard.sdk.errors import JetyardError
from jetyard.sdk.folders import Folders
from jetyard.sdk.models import VFolder

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^([0-9]+)\s*([kmgt]?)(i?b)?$", re.IGNORECASE)


def size_bytes(text: str) -> int | None:
    """``10g``, ``512MiB``, ``1000``; ``none`` for no limit."""
    if text.lower() in ("none", "unlimited"):
        return None
    found = _SIZE.match(text.strip())
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 500m, 10g, none)")
    return int(found.group(1)) * _UNITS[found.group(2).lower()]


def human(count: int | None) -> str:
    if count is None:
        return "-"
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    raise AssertionError("unreachable")


def add_parser(sub: Any) -> None:
    """``jetyard vfolder ...`` under the main parser's subcommands."""
    vfolder = sub.add_parser("vfolder", help="virtual folders: create, upload, download, share")
    add_credential_options(vfolder)
    verbs = vfolder.add_subparsers(dest="verb", required=True)

    create = verbs.add_parser("create", help="create a folder")
    create.add_argument("name")
    create.add_argument("--project", help="a project folder, shared with its members")
    create.add_argument("--volume", help="the storage volume (default: the service's)")
    create.add_argument("--usage-mode", default="general", choices=["general", "data", "model"])
    create.add_argument("--quota", type=size_bytes, help="e.g. 10g")
    create.add_argument("--json", action="store_true")

    listing = verbs.add_parser("ls", help="list the folders you see")
    listing.add_argument("--status", help="ready, trashed, ...")
    listing.add_argument("--project", help="only this project's folders")
    listing.add_argument("--json", action="store_true", help="JSON lines, one folder each")

    info = verbs.add_parser("info", help="one folder in full")
    info.add_argument("folder", help="its name or id")
    info.add_argument("--json", action="store_true")

    upload = verbs.add_parser("upload", help="upload a file or a directory (resumable)")
    upload.add_argument("folder")
    upload.add_argument("local", type=Path)
    upload.add_argument(
        "remote",
        nargs="?",
        default="",
        help="target path (default: the local name at the root; "
        "ending in '/': the local name inside that directory)",
    )
    upload.add_argument("--quiet", "-q", action="store_true", help="no progress bar")

    download = verbs.add_parser("download", help="download a file (resumable) or a directory")
    download.add_argument("folder")
    download.add_argument("remote", help="a path in the folder ('' for the whole folder)")
    download.add_argument(
        "local",
        nargs="?",
        type=Path,
        help="where (default: its name here; an existing directory: its name inside)",
    )
    download.add_argument("--quiet", "-q", action="store_true", help="no progress bar")

    files = verbs.add_parser("files", help="list a directory of a folder")
    files.add_argument("folder")
    files.add_argument("path", nargs="?", default="")
    files.add_argument("--json", action="store_true", help="JSON lines, one entry each")

    for verb, text in (
        ("mkdir", "make a directory (and its parents)"),
        ("delete", "delete a file or directory in a folder"),
    ):
        one = verbs.add_parser(verb, help=text)
        one.add_argument("folder")
        one.add_argument("path")
        if verb == "delete":
            one.add_argument("-r", "--recursive", action="store_true")
    move = verbs.add_parser("mv", help="move or rename an entry in a folder (never replaces)")
    move.add_argument("folder")
    move.add_argument("source")
    move.add_argument("target")

    for verb, text in (
        ("rm", "move a folder to the trash"),
        ("restore", "take it back"),
        ("purge", "delete a trashed folder and its bytes for good"),
        ("accept", "accept an invitation"),
        ("decline", "decline one"),
        ("leave", "leave a folder shared with you"),
    ):
        verbs.add_parser(verb, help=text).add_argument("folder")
    for verb, text in (("rename", "rename a folder"), ("clone", "copy a folder")):
        named = verbs.add_parser(verb, help=text)
        named.add_argument("folder")
        named.add_argument("name")
    share = verbs.add_parser("share", help="invite a user (email or id)")
    share.add_argument("folder")
    share.add_argument("user")
    share.add_argument("--permission", default="ro", choices=["ro", "rw", "rwd"])
    unshare = verbs.add_parser("unshare", help="revoke a user's share or invitation")
    unshare.add_argument("folder")
    unshare.add_argument("user")
    quota = verbs.add_parser("quota", help="set a folder's quota ('none' clears it)")
    quota.add_argument("folder")
    quota.add_argument("size", type=size_bytes)


def _show(folder: VFolder, as_json: bool) -> None:
    if as_json:
        print(json.dumps(folder.as_json()))
        return
    for key, value in folder.as_json().items():
        if key in ("bytesUsed", "quotaBytes"):
            value = human(value)
        print(f"{key:>12}: {value}")


def _table(folders: list[VFolder]) -> None:
    columns = ("name", "id", "owner", "perm", "status", "used", "quota", "files", "links", "other")
    table(columns, (
        (f.name, f.id, f.owner_kind, f.permission or "-", f.status, human(f.bytes_used),
         human(f.quota_bytes), f.files, f.links, f.other_entries)
        for f in folders
    ))  # fmt: skip


def _bar(quiet: bool, what: str) -> tuple[Progress, Callable[[int, int | None], None]]:
    bar = Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        DownloadColumn(binary_units=True),
        TransferSpeedColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        disable=quiet,
    )
    task = bar.add_task(what, total=None)

    def progress(done: int, total: int | None) -> None:
        bar.update(task, completed=done, total=total)

    return bar, progress


async def _upload(jy: Folders, args: argparse.Namespace) -> None:
    bar, progress = _bar(args.quiet, f"{args.local.name} → {args.folder}")
    with bar:
        sent = await jy.upload(args.folder, args.local, args.remote, progress=progress)
    where = args.remote or args.local.resolve().name
    print(f"uploaded {human(sent)} to {args.folder}:{where}")


def _download_target(args: argparse.Namespace) -> Path:
    """As ``cp``: the remote name here, or inside ``local`` when that is a directory."""
    name = PurePosixPath(args.remote).name or args.folder
    local: Path = args.local or Path(name)
    return local / name if args.local is not None and local.is_dir() else local


async def _download(jy: Folders, args: argparse.Namespace) -> None:
    local = _download_target(args)
    bar, progress = _bar(args.quiet, f"{args.folder}:{args.remote or '/'} → {local}")
    with bar:
        received = await jy.download(args.folder, args.remote, local, progress=progress)
    print(f"downloaded {human(received)} to {local}")


async def _files(jy: Folders, args: argparse.Namespace) -> None:
    for entry in await jy.ls(args.folder, args.path):
        if args.json:
            print(json.dumps(entry.__dict__))
        else:
            mark = "/" if entry.type == "directory" else ""
            size = "" if entry.type == "directory" else human(entry.size)
            print(f"{size:>10}  {entry.mtime[:19]}  {entry.name}{mark}")


async def _folders(jy: Folders, args: argparse.Namespace) -> None:
    found = await jy.list(status=args.status, project=args.project)
    if args.json:
        json_lines(f.as_json() for f in found)
    else:
        _table(found)


async def _dispatch(jy: Folders, args: argparse.Namespace) -> None:
    verb = args.verb
    simple: dict[str, Callable[[], Awaitable[Any]]] = {
        "rm": lambda: jy.trash(args.folder),
        "restore": lambda: jy.restore(args.folder),
        "purge": lambda: jy.purge(args.folder),
        "accept": lambda: jy.accept(args.folder),
        "decline": lambda: jy.decline(args.folder),
        "leave": lambda: jy.leave(args.folder),
        "rename": lambda: jy.rename(args.folder, args.name),
        "clone": lambda: jy.clone(args.folder, args.name),
        "share": lambda: jy.share(args.folder, args.user, args.permission),
        "unshare": lambda: jy.revoke(args.folder, args.user),
        "quota": lambda: jy.set_quota(args.folder, args.size),
        "mkdir": lambda: jy.mkdir(args.folder, args.path),
        "delete": lambda: jy.rm(args.folder, args.path, recursive=args.recursive),
        "mv": lambda: jy.mv(args.folder, args.source, args.target),
    }
    if verb in simple:
        result = await simple[verb]()
        print(f"{verb}: done" + (f" ({result.name}, {result.status})" if result else ""))
    elif verb == "create":
        created = await jy.create(
            args.name,
            owner_kind="project" if args.project else "user",
            project=args.project,
            volume=args.volume,
            usage_mode=args.usage_mode,
            quota_bytes=args.quota,
        )
        print(
            json.dumps(created.as_json()) if args.json else f"created {created.name} ({created.id})"
        )
    elif verb == "info":
        _show(await jy.get(args.folder), args.json)
    else:
        command = {"ls": _folders, "files": _files, "upload": _upload, "download": _download}
        await command[verb](jy, args)


async def _run(args: argparse.Namespace, signed_in: Credentials) -> None:
    async with AsyncClient.from_config(signed_in) as client:
        await _dispatch(client.folders, args)


def run(args: argparse.Namespace) -> int:
    try:
        signed_in = credentials(args)
    except ConfigError as exc:
        print(f"jetyard vfolder: {exc}", file=sys.stderr)
        return 2
    try:
        asyncio.run(_run(args, signed_in))
    except JetyardError as exc:
        print(f"jetyard vfolder {args.verb}: {exc}", file=sys.stderr)
        return 1
    except OSError as exc:  # a local file: missing, unreadable, already there
        print(f"jetyard vfolder {args.verb}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(
            "jetyard vfolder: interrupted (an upload or download resumes when run again)",
            file=sys.stderr,
        )
        return 130
    return 0
