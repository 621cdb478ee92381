"""Unpacking a folder's archive on the user's machine (``jetyard.sdk.unpack``): a plain tree
arrives whole; every hostile member (links, devices, escapes by name, members outside the
top, a name twice) stops the unpack and leaves nothing, also when the archive comes through
``FolderFiles.download`` from a server (``httpx.MockTransport``)."""

from __future__ import annotations

import io
import os
import tarfile
import threading
from pathlib import Path

import httpx
import pytest

from jetyard.sdk import JetyardError
from jetyard.sdk.files import FolderFiles
from jetyard.sdk.transfer import Access
from jetyard.sdk.unpack import ArchiveFeed, UnsafeArchive, unpack_into


def member(
    name: str, kind: bytes = tarfile.REGTYPE, data: bytes = b"", **extra: object
) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.size = len(data) if kind == tarfile.REGTYPE else 0
    info.mode = 0o644
    for key, value in extra.items():
        setattr(info, key, value)
    return info, data


def archive(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if info.isreg() else None)
    return out.getvalue()


def unpack(data: bytes, target: Path, chunk: int = 700) -> None:
    feed = ArchiveFeed()

    def network() -> None:
        for at in range(0, len(data), chunk):
            if not feed.put(data[at : at + chunk]):
                break
        feed.close()

    sender = threading.Thread(target=network)
    sender.start()
    try:
        unpack_into(feed, target)
    finally:
        sender.join(10)
    assert not sender.is_alive()


TOP = member("top", tarfile.DIRTYPE)


def test_a_plain_tree_is_unpacked_beneath_the_target(tmp_path: Path) -> None:
    data = archive(
        TOP,
        member("top/a", tarfile.DIRTYPE),
        member("top/a/x.bin", data=bytes(range(256)) * 100),
        member("top/run.sh", data=b"#!/bin/sh\n", mode=0o4755),
        member("top/é.txt", data="ü".encode()),
    )
    unpack(data, tmp_path / "out")
    assert (tmp_path / "out" / "a" / "x.bin").read_bytes() == bytes(range(256)) * 100
    assert (tmp_path / "out" / "é.txt").read_text() == "ü"
    assert (tmp_path / "out" / "run.sh").stat().st_mode & 0o7777 == 0o755  # no setuid
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


HOSTILE = {
    "symlink": member("top/passwd", tarfile.SYMTYPE, linkname="/etc/passwd"),
    "hard link": member("top/shadow", tarfile.LNKTYPE, linkname="/etc/shadow"),
    "device": member("top/disk", tarfile.BLKTYPE),
    "fifo": member("top/pipe", tarfile.FIFOTYPE),
    "dot-dot": member("top/../../escaped.txt", data=b"x"),
    "absolute": member("/tmp/escaped.txt", data=b"x"),
    "outside the top": member("other/x.txt", data=b"x"),
    "backslash": member("top/..\\..\\x.txt", data=b"x"),
    "look-alike slash": member("top/a\u2215..\u2215x", data=b"x"),
}


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_a_hostile_member_stops_the_unpack_and_leaves_nothing(tmp_path: Path, hostile: str) -> None:
    data = archive(TOP, member("top/fine.txt", data=b"ok"), HOSTILE[hostile])
    with pytest.raises(UnsafeArchive):
        unpack(data, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_a_member_named_twice_is_refused(tmp_path: Path) -> None:
    data = archive(TOP, member("top/x", data=b"1"), member("top/x", data=b"2"))
    with pytest.raises(UnsafeArchive, match="twice"):
        unpack(data, tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


def test_an_archive_must_start_with_its_top_directory(tmp_path: Path) -> None:
    with pytest.raises(UnsafeArchive, match="top directory"):
        unpack(archive(member("top/x", data=b"1")), tmp_path / "out")


def test_a_truncated_archive_is_an_error_and_leaves_nothing(tmp_path: Path) -> None:
    data = archive(TOP, member("top/x", data=b"1" * 5000))
    with pytest.raises(JetyardError):
        unpack(data[:2000], tmp_path / "out")
    assert list(tmp_path.iterdir()) == []


async def test_a_hostile_archive_from_the_server_is_refused_by_download(tmp_path: Path) -> None:
    hostile = archive(TOP, member("top/ok", data=b"ok"), HOSTILE["symlink"])

    def serve(request: httpx.Request) -> httpx.Response:
        if request.url.path.endswith("/download"):
            message = {"error": "is_a_directory", "message": "'top' is a directory"}
            return httpx.Response(409, json=message)
        return httpx.Response(200, content=hostile)

    async def grants(
        operation: str, path: str, *, size: int | None = None, prefix: bool = False
    ) -> Access:
        return Access(f"http://storage.test/folders/local/f/{operation}", "t", operation, path)

    async with httpx.AsyncClient(transport=httpx.MockTransport(serve)) as http:
        with pytest.raises(UnsafeArchive, match="symbolic link"):
            await FolderFiles(http, grants).download("top", tmp_path / "top")
    assert os.listdir(tmp_path) == []
