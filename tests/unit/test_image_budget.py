"""``evict`` (``services/node/image_budget.py``): the least recently used images no kernel uses,
all their names, until the rest fits the disk budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from services.node.image_budget import LocalImage, evict

T0 = datetime(2026, 1, 1, tzinfo=UTC)
MB = 1 << 20


def image(refs: str, size_mb: int, used_day: int) -> LocalImage:
    when = T0 + timedelta(days=used_day)
    names = tuple(refs.split(",")) if refs else ()
    return LocalImage(
        image_id=f"sha256:{refs or 'none'}", refs=names, size_bytes=size_mb * MB,
        repo_digests=(), created=T0, last_used=when,
    )  # fmt: skip


IMAGES = [
    image("old:1", 100, 1),
    image("mid:1,mid:latest", 200, 2),  # one image, two names
    image("new:1", 300, 3),
    image("", 50, 0),  # untagged: cannot be named, never chosen
]

CASES = [
    # (why, in use, budget MB, evicted)
    ("everything fits", set(), 650, []),
    ("the oldest first", set(), 600, ["old:1"]),
    ("then the next, with all its names", set(), 400, ["old:1", "mid:1", "mid:latest"]),
    ("an image in use is skipped", {"old:1"}, 400, ["mid:1", "mid:latest", "new:1"]),
    ("any of its names in use keeps it", {"mid:latest"}, 400, ["old:1", "new:1"]),
    ("cannot fit: all that may go", {"new:1"}, 10, ["old:1", "mid:1", "mid:latest"]),
    ("nothing may go", {"old:1", "mid:1", "new:1"}, 10, []),
]


@pytest.mark.parametrize(
    ("why", "in_use", "budget_mb", "evicted"), CASES, ids=[c[0] for c in CASES]
)
def test_evict(why: str, in_use: set[str], budget_mb: int, evicted: list[str]) -> None:
    assert evict(IMAGES, in_use, budget_mb * MB) == evicted


def test_equal_ages_are_broken_by_name() -> None:
    same = [image("b:1", 10, 1), image("a:1", 10, 1), image("c:1", 10, 1)]
    assert evict(same, set(), 15 * MB) == ["a:1", "b:1"]
    assert evict(list(reversed(same)), set(), 15 * MB) == ["a:1", "b:1"]
