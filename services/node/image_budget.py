"""The images on this machine (``LocalImage``) and which to remove when they outgrow the disk
budget (``evict``, pure). No subjects, no I/O: ``services.node.docker_pull.local_images`` reads
them from Docker.

An image is one thing on disk with any number of names (tags): it is kept whole while a kernel
uses any of its names, and evicting it means removing all of them (removing one tag of two
frees nothing). Sizes are each image's own full size, as Docker reports them, so layers shared
by two images count twice: the total overstates the disk used and eviction errs on the side
of removing one image more, never of overrunning the budget silently.
"""

from __future__ import annotations

from collections.abc import Sequence, Set
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True, slots=True)
class LocalImage:
    image_id: str
    refs: tuple[str, ...]
    """Its tags (``repo:tag``); empty for an untagged image, which ``evict`` never names."""
    size_bytes: int
    repo_digests: tuple[str, ...]
    """``repo@sha256:...`` for each registry it came from."""
    created: datetime
    last_used: datetime
    """When it was last pulled or tagged here (Docker's ``LastTagTime``), else ``created``; the
    agent may replace it with when a kernel last started from it."""


class Evictable(Protocol):
    @property
    def refs(self) -> tuple[str, ...]: ...
    @property
    def size_bytes(self) -> int: ...
    @property
    def last_used(self) -> datetime: ...


def evict(images: Sequence[Evictable], in_use: Set[str], budget_bytes: int) -> list[str]:
    """The names to remove so the images fit in ``budget_bytes``: every name of the least
    recently used images that no kernel uses (no name in ``in_use``), oldest first, until the
    rest fits. If even removing all of them does not fit, all of them (as much as can be
    done). Ties are broken by name, so the answer is the same on every run."""
    total = sum(image.size_bytes for image in images)
    candidates = sorted(
        (i for i in images if i.refs and not any(r in in_use for r in i.refs)),
        key=lambda i: (i.last_used, min(i.refs)),
    )
    chosen: list[str] = []
    for image in candidates:
        if total <= budget_bytes:
            break
        chosen += sorted(image.refs)
        total -= image.size_bytes
    return chosen


class ImageInUseError(Exception):
    """An image cannot be removed: a container (running or not) was made from it."""
