"""Where each running kernel's published output ends, kept on this node's disk as well as in
``JY_OUTPUT``: the stream drops a kernel's messages once they are older than its age limit, and
a follower that (re)starts after that would find nothing and number the output from line 0
again. With the file it goes on from where the stream lost track. Reads and writes files under
``<data dir>/output/`` only; no subjects.

One small JSON file per kernel, written after each publish (a replace, so a crash leaves the
old or the new one, never half of one) and removed once the kernel's output is all published.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger(__name__)


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
    """The subject's last stream sequence (0: nothing published; always 0 as read from a
    file, which is kept for when the stream has nothing of the kernel)."""


class PositionFiles:
    def __init__(self, directory: Path) -> None:
        self._dir = directory

    def read(self, kernel_id: str) -> Position | None:
        try:
            found = json.loads(self._path(kernel_id).read_text())
            return Position(int(found["line"]), int(found["at_ns"]), int(found["same"]), 0)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError) as exc:
            log.warning("output position of kernel %s unreadable (%r): ignored", kernel_id, exc)
            return None

    def write(self, kernel_id: str, at: Position) -> None:
        path = self._path(kernel_id)
        try:
            self._dir.mkdir(parents=True, exist_ok=True)
            partial = path.with_suffix(".part")
            partial.write_text(json.dumps({"line": at.line, "at_ns": at.at_ns,
                                           "same": at.same}))  # fmt: skip
            os.replace(partial, path)
        except OSError as exc:  # the stream still has it; only an expiry would need this
            log.warning("output position of kernel %s not kept: %r", kernel_id, exc)

    def forget(self, kernel_id: str) -> None:
        with contextlib.suppress(OSError):
            self._path(kernel_id).unlink()

    def _path(self, kernel_id: str) -> Path:
        if not kernel_id or "/" in kernel_id or kernel_id.startswith("."):
            raise ValueError(f"not a kernel id: {kernel_id!r}")
        return self._dir / f"{kernel_id}.json"
