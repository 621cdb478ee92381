"""Sealed boxes: only the key a box was sealed to opens it; a changed byte, another key or a
malformed box is refused, never opened to garbage."""

from __future__ import annotations

import pytest

from schemas.sealed_box import BoxKey, SealedBoxError, seal_to


def test_the_key_it_was_sealed_to_opens_it() -> None:
    key = BoxKey()
    box = seal_to(key.public, b'{"password": "hunter2"}')

    assert key.open(box) == b'{"password": "hunter2"}'
    assert "hunter2" not in box
    assert seal_to(key.public, b"same") != seal_to(key.public, b"same")  # fresh each time


def test_another_key_a_changed_byte_or_garbage_is_refused() -> None:
    key, other = BoxKey(), BoxKey()
    box = seal_to(key.public, b"secret")
    with pytest.raises(SealedBoxError, match="not sealed to this key"):
        other.open(box)
    flipped = box[:-6] + ("A" if box[-6] != "A" else "B") + box[-5:]
    with pytest.raises(SealedBoxError):
        key.open(flipped)
    for bad in ("", "!!!", "QUJD"):
        with pytest.raises(SealedBoxError):
            key.open(bad)
    with pytest.raises(SealedBoxError, match="32 bytes"):
        seal_to("QUJD", b"x")
