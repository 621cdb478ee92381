"""An upload's part writer (``upload_bytes._PartWriter``) and write-behind: bodies cut into
pieces of every size land byte for byte, from any starting offset, written in whole chunks of
the file with no more than two batches held; a write-back request is only a hint."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from services.storage.upload_bytes import _PartWriter
from services.storage.write_behind import start_writeback

CHUNK = 64 * 1024


def pieces(data: bytes, seed: int) -> list[bytes]:
    """``data`` in pieces of 1 byte to three chunks, as reads and parsers hand them over."""
    rng, out, at = random.Random(seed), [], 0
    while at < len(data):
        size = rng.choice(
            [1, 7, 4096, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK, rng.randint(1, CHUNK)]
        )
        out.append(data[at : at + size])
        at += size
    return out


@pytest.mark.parametrize(("start", "seed"), [(0, 1), (1000, 2), (CHUNK, 3), (3 * CHUNK - 5, 4)])
async def test_pieces_of_every_size_land_in_order_from_any_offset(
    tmp_path: Path, start: int, seed: int
) -> None:
    head, body = os.urandom(start), os.urandom(20 * CHUNK + 123)
    part = tmp_path / "upload.part"
    part.write_bytes(head)
    fd = os.open(part, os.O_RDWR)
    writer, sent, biggest = _PartWriter(fd, start, CHUNK), 0, 0
    try:
        for piece in pieces(body, seed):
            await writer.add(piece)
            sent, biggest = sent + len(piece), max(biggest, len(piece))
            assert writer.position + writer.pending == start + sent
            assert writer.pending < 2 * (CHUNK + biggest)  # a batch in flight, one filling
            assert writer.position in (start, writer.position // CHUNK * CHUNK)  # whole chunks
        await writer.flush()
        assert (writer.position, writer.pending) == (start + len(body), 0)
    finally:
        writer.close()
    assert part.read_bytes() == head + body


def test_write_back_is_a_hint_that_never_fails(tmp_path: Path) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(b"x" * 10_000)
    fd = os.open(path, os.O_RDWR)
    try:
        start_writeback(fd, 0, 10_000)
        start_writeback(fd, 5_000, 0)
        start_writeback(fd, 20_000, 4096)  # past the end
    finally:
        os.close(fd)
    read, write = os.pipe()  # no pages to write back: refused by the kernel, ignored here
    try:
        start_writeback(read, 0, 4096)
    finally:
        os.close(read)
        os.close(write)
    assert path.read_bytes() == b"x" * 10_000
