"""Where each running kernel's published output ends, kept on this node's disk as well as in
``JY_OUTPUT``: the stream drops a kernel's messages once they are older than its age limit (or
pushed out by its size limit), and a follower that (re)starts after that would find nothing and
number the output from line 0 again. With the file it goes on from where the stream lost
track. Reads and writes one file under ``<data dir>/output/`` only; no subjects.

One JSON file per agent, ``<name>.json``: kernel id -> [lines published, time of the last line
(ns), lines at that time], for each kernel whose output is not all published yet. It is kept
in memory and written (a replace, so a crash leaves the old or the new one, never half of one)
at most every ``KEEP_EVERY_S`` while something changed, and on ``flush`` (the agent's stop).
A position is wanted only once the stream has dropped the kernel's output, long after it was
published, and a follower that starts reads the stream first: a file a second behind the
stream loses nothing unless the agent dies within that second *and* the stream then drops
that very output before the agent is back. Writing the file after every publish of every
kernel (a file each) cost the agents more than publishing the output did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)

KEEP_EVERY_S = 1.0


@dataclass(frozen=True, slots=True)
class Position:
    """How far a kernel's output is published."""

    line: int
    """Lines published: the number (0-based) of the next one."""
    at_ns: int
    """The engine time of the last published line."""
    same: int
    """How many published lines have exactly that time."""
    seq: int
    """The subject's last stream sequence (0: nothing published; always 0 as read from the
    file, which is kept for when the stream has nothing of the kernel)."""


Kept = dict[str, tuple[int, int, int]]


class PositionFiles:
    def __init__(
        self, directory: Path, name: str = "positions", *, every_s: float = KEEP_EVERY_S
    ) -> None:
        if not name or "/" in name or name.startswith("."):
            raise ValueError(f"not a file name for output positions: {name!r}")
        self._dir = directory
        self._file = directory / f"{name}.json"
        self._every_s = every_s
        self._kept: Kept | None = None
        """Kernel id -> (line, at_ns, same); None until the file is read (at the first use)."""
        self._dirty = False
        self._timer: asyncio.TimerHandle | None = None

    def read(self, kernel_id: str) -> Position | None:
        found = self._loaded().get(kernel_id)
        return None if found is None else Position(*found, 0)

    def write(self, kernel_id: str, at: Position) -> None:
        self._loaded()[kernel_id] = (at.line, at.at_ns, at.same)
        self._changed()

    def forget(self, kernel_id: str) -> None:
        if self._loaded().pop(kernel_id, None) is not None:
            self._changed()

    def flush(self) -> None:
        """Write the file now if anything changed since it was last written. A failure is
        logged and tried again at the next change (the stream still has the output)."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if not self._dirty:
            return
        kept = self._loaded()
        data = json.dumps({k: list(v) for k, v in kept.items()}, separators=(",", ":")).encode()
        partial = f"{self._file}.part"
        try:
            try:
                _write(partial, data)
            except FileNotFoundError:  # no directory yet (or removed): make it
                self._dir.mkdir(parents=True, exist_ok=True)
                _write(partial, data)
            os.replace(partial, self._file)
            self._dirty = False
        except OSError as exc:
            log.warning("output positions not kept in %s: %r", self._file, exc)

    def _changed(self) -> None:
        self._dirty = True
        if self._timer is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:  # no event loop (a tool, a test): at once
            self.flush()
            return
        self._timer = loop.call_later(self._every_s, self.flush)

    def _loaded(self) -> Kept:
        if self._kept is None:
            self._kept = self._read_file()
        return self._kept

    def _read_file(self) -> Kept:
        try:
            with open(self._file, "rb") as file:
                found = json.loads(file.read())
            return {
                str(kernel): (int(line), int(at_ns), int(same))
                for kernel, (line, at_ns, same) in found.items()
            }
        except FileNotFoundError:
            return {}
        except (OSError, ValueError, TypeError, AttributeError) as exc:
            log.warning("output positions in %s unreadable (%r): ignored", self._file, exc)
            with contextlib.suppress(OSError):
                os.replace(self._file, f"{self._file}.unreadable")  # kept for a look
            return {}


def _write(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
    finally:
        os.close(fd)
