"""Data-plane tokens: signing, verification and every refusal (pure)."""

from __future__ import annotations

import base64
import json

import pytest

from schemas.folder_paths import parse_path
from services.storage.tokens import (
    Claims,
    Operation,
    TokenError,
    UsedTokens,
    check_scope,
    issue,
    verify,
)

KEY = b"k" * 32
NOW = 1_800_000_000.0
TTL = 3600.0


def claims(**changes: object) -> Claims:
    values: dict[str, object] = {
        "op": Operation.DOWNLOAD,
        "volume": "local",
        "folder": "f-1",
        "path": "data/x.csv",
        "exp": int(NOW) + 60,
    }
    values.update(changes)
    return Claims.model_validate(values)


def refused(code: str, token: str, key: bytes = KEY, now: float = NOW) -> TokenError:
    with pytest.raises(TokenError) as error:
        verify(key, token, now=now, max_ttl_s=TTL)
    assert error.value.code == code
    return error.value


def test_a_signed_token_verifies_to_its_claims() -> None:
    granted = claims(op=Operation.UPLOAD, max_bytes=1024, once=True)
    token = issue(KEY, granted)
    assert token.startswith("v1.")
    assert verify(KEY, token, now=NOW, max_ttl_s=TTL) == granted


def test_the_payload_is_compact_json_of_the_claims() -> None:
    token = issue(KEY, claims())
    payload = token.split(".")[1]
    decoded = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert decoded["op"] == "download"
    assert decoded["folder"] == "f-1"
    assert "prefix" not in decoded  # defaults left out


def test_a_changed_payload_or_signature_or_key_is_refused() -> None:
    token = issue(KEY, claims())
    version, payload, signature = token.split(".")
    other = issue(KEY, claims(folder="f-2")).split(".")[1]
    refused("token_invalid", f"{version}.{other}.{signature}")
    flipped = signature[:-2] + ("A" if signature[-2] != "A" else "B") + signature[-1]
    refused("token_invalid", f"{version}.{payload}.{flipped}")
    assert "signature" in refused("token_invalid", token, key=b"x" * 32).message


@pytest.mark.parametrize(
    "token",
    ["", "v1", "v1..", "v2.abc.def", "v1.a b.c", "Bearer x", "v1." + "a" * 5000 + ".b" * 43],
)
def test_malformed_tokens_are_refused(token: str) -> None:
    refused("token_invalid", token)


def test_expired_tokens_and_tokens_living_too_long_are_refused() -> None:
    assert "expired" in refused("token_expired", issue(KEY, claims(exp=int(NOW) - 1))).message
    refused("token_expired", issue(KEY, claims(exp=int(NOW))))
    refused("token_invalid", issue(KEY, claims(exp=int(NOW + TTL) + 10)))


def test_a_token_whose_path_breaks_the_rules_cannot_even_be_made() -> None:
    with pytest.raises(ValueError, match=r"'\.\.' component"):
        claims(path="../x")


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"op": Operation.DELETE}, "wrong_operation"),
        ({"volume": "other"}, "wrong_folder"),
        ({"folder": "f-2"}, "wrong_folder"),
        ({"paths": ("data/y.csv",)}, "path_not_allowed"),
        ({"paths": ("data",)}, "path_not_allowed"),
        ({"paths": ("data/x.csv/z",)}, "path_not_allowed"),
    ],
)
def test_a_token_never_works_for_another_operation_folder_or_path(
    changes: dict[str, object], code: str
) -> None:
    asked: dict[str, object] = {
        "op": Operation.DOWNLOAD,
        "volume": "local",
        "folder": "f-1",
        "paths": ("data/x.csv",),
    }
    asked.update(changes)
    paths = tuple(parse_path(str(text)) for text in asked.pop("paths"))  # type: ignore[attr-defined]
    with pytest.raises(TokenError) as error:
        check_scope(claims(), paths=paths, **asked)  # type: ignore[arg-type]
    assert error.value.code == code
    assert error.value.status == 403


def test_a_prefix_token_covers_its_subtree_by_components() -> None:
    granted = claims(path="data", prefix=True)
    for inside in ("data", "data/x", "data/a/b/c"):
        check_scope(
            granted,
            op=Operation.DOWNLOAD,
            volume="local",
            folder="f-1",
            paths=(parse_path(inside),),
        )
    for outside in ("datab/x", "dat", ""):
        with pytest.raises(TokenError, match="beneath"):
            check_scope(
                granted,
                op=Operation.DOWNLOAD,
                volume="local",
                folder="f-1",
                paths=(parse_path(outside),),
            )


def test_a_one_use_token_is_refused_the_second_time_and_forgotten_after_expiry() -> None:
    used = UsedTokens()
    once = claims(once=True, exp=int(NOW) + 30)
    used.use(once, now=NOW)
    with pytest.raises(TokenError) as error:
        used.use(once, now=NOW + 1)
    assert error.value.code == "token_used"
    many = claims()
    used.use(many, now=NOW)
    used.use(many, now=NOW)  # not one-use: never remembered
    assert len(used) == 1
    used.use(claims(once=True), now=NOW + 120)  # a later call prunes the expired jti
    assert len(used) == 1
