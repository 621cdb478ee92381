"""A directory as a streamed tar, read back with the standard library."""

from __future__ import annotations

import io
import os
import tarfile
from pathlib import Path

from schemas.folder_paths import ROOT, parse_path
from services.storage.archive import tar_chunks


def test_the_archive_holds_files_and_directories_but_no_symlinks_or_fifos(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("secret")
    root = tmp_path / "folder"
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "small.txt").write_bytes(b"hello")
    big = os.urandom(300_000)
    (root / "d" / "e" / "big.bin").write_bytes(big)
    (root / "d" / "empty").write_bytes(b"")
    (root / "d" / "ファイル.txt").write_text("名前")
    (root / "d" / "out").symlink_to(outside)
    (root / "d" / "secret").symlink_to(outside / "secret.txt")
    os.mkfifo(root / "d" / "pipe")

    chunks = list(tar_chunks(root, parse_path("d"), "d", chunk_bytes=64 * 1024))
    assert max(len(chunk) for chunk in chunks) < 2 * 64 * 1024 + 4096
    data = b"".join(chunks)
    assert len(data) % tarfile.RECORDSIZE == 0
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        names = sorted(archive.getnames())
        assert names == sorted(
            ["d", "d/e", "d/e/big.bin", "d/small.txt", "d/empty", "d/ファイル.txt"]
        )
        assert archive.extractfile("d/e/big.bin").read() == big  # type: ignore[union-attr]
        assert archive.extractfile("d/small.txt").read() == b"hello"  # type: ignore[union-attr]
        assert archive.getmember("d/e").isdir()


def test_the_whole_folder_is_archived_under_its_name(tmp_path: Path) -> None:
    root = tmp_path / "folder"
    root.mkdir()
    (root / "x").write_bytes(b"x")
    data = b"".join(tar_chunks(root, ROOT, "f-1", chunk_bytes=4096))
    with tarfile.open(fileobj=io.BytesIO(data)) as archive:
        assert sorted(archive.getnames()) == ["f-1", "f-1/x"]
