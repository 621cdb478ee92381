"""The one sealed-token format the folder, app and terminal tokens share: a token of one kind
is never read as another, and what is malformed, forged or unreadable is said apart."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from schemas.sealed import SealError, seal, unseal

KEY = b"k" * 32


class Claims(BaseModel):
    who: str
    n: int = 0


class Other(BaseModel):
    what: bool


def test_a_sealed_token_reads_back_under_its_version_and_key_only() -> None:
    token = seal(KEY, "x1", Claims(who="ann", n=3))
    assert unseal(KEY, "x1", token, Claims, max_payload=100) == Claims(who="ann", n=3)
    for version, key, reason in (("y1", KEY, "malformed"), ("x1", b"o" * 32, "forged")):
        with pytest.raises(SealError) as refused:
            unseal(key, version, token, Claims, max_payload=100)
        assert refused.value.reason == reason


def test_huge_short_and_unreadable_tokens_are_refused_by_kind() -> None:
    token = seal(KEY, "x1", Claims(who="a" * 200))
    with pytest.raises(SealError, match="malformed"):
        unseal(KEY, "x1", token, Claims, max_payload=50)  # longer than this kind allows
    with pytest.raises(SealError, match="malformed"):
        unseal(KEY, "x1", "x1." + "A" * 10_000_000, Claims, max_payload=50)
    other = seal(KEY, "x1", Other(what=True))  # genuine, but not claims of this kind
    with pytest.raises(SealError, match="unreadable"):
        unseal(KEY, "x1", other, Claims, max_payload=100)
