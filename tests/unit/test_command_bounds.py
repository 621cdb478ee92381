"""The bounds every command's raw input is held to (``commands.messages.out_of_bounds``): the
walk that names nothing (clean input's) and the one that names the first bad value find the
same inputs bad, and the sentences name the place."""

from __future__ import annotations

import random
from typing import Any

from commands.messages import _walk, out_of_bounds
from schemas.bounds import CEILING

BAD_SCALARS: list[Any] = [
    "a\x00b", "\x7f", "x\x85", "\u2028", "\x1b[31m", CEILING, -CEILING, float("nan"),
    float("inf"), float("-inf"), float(CEILING),
]  # fmt: skip
GOOD_SCALARS: list[Any] = [
    "", "text", "tab\tand\nnewline", "é中λ", 0, -5, CEILING - 1, 1.5, True, False, None,
]  # fmt: skip


def _value(rng: random.Random, depth: int, bad: bool) -> Any:
    """A nested value; with ``bad``, exactly one bad scalar somewhere in it."""
    if depth == 0 or rng.random() < 0.3:
        return rng.choice(BAD_SCALARS if bad else GOOD_SCALARS)
    size = rng.randint(1, 4)
    spot = rng.randrange(size) if bad else -1
    items = [_value(rng, depth - 1, i == spot) for i in range(size)]
    if rng.random() < 0.5:
        return items
    keys = [f"k{i}" for i in range(size)]
    if bad and rng.random() < 0.2:  # the bad value may be a key
        keys[spot] = "bad\x01key"
        items[spot] = _value(rng, depth - 1, False)
    return dict(zip(keys, items, strict=True))


def test_the_walk_naming_nothing_and_the_sentences_find_the_same_inputs() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        bad = rng.random() < 0.5
        value = {"spec": _value(rng, 5, bad)}
        found = out_of_bounds(value)
        assert (_walk(value, None, 0) is not None) == bad, value  # the walk naming nothing
        assert (found is not None) == bad, (value, found)


def test_sentences_name_the_place() -> None:
    assert out_of_bounds({"spec": {"env": {"A": "x\x00"}}}) == (
        "spec.env.A contains a control character (U+0000)"
    )
    assert out_of_bounds({"n": [1, 2, float("nan")]}) == "n[2] is not a finite number in range"
    assert (
        out_of_bounds({"a\x02": 1}) == "a key of the command contains a control character (U+0002)"
    )
    deep: Any = 1
    for _ in range(40):
        deep = [deep]
    assert out_of_bounds({"x": deep}) is not None and "nested too deep" in str(out_of_bounds(deep))
    assert out_of_bounds({"fine": ["tab\there", {"k": 3}]}) is None
