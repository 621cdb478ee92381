"""Join tokens, given / when / then on an in-memory store: only a superadmin makes or revokes
one, the log keeps only its secret's digest, a join with the right secret is recorded (who
joined with which token) and one with a wrong, expired or revoked token is refused with the
reason, storing nothing."""

from __future__ import annotations

from datetime import timedelta

import pytest

from commands import admin as a
from commands.join_token import JoinRefusedError, UnknownJoinTokenError, digest, new_token, parse
from commands.outcome import Code
from events.domain.join import JoinTokenCreated, JoinTokenRevoked, NodeJoined
from tests.unit.scenario import T0
from tests.unit.tenancy.support import Org, by

TOKEN_ID, SECRET, TOKEN = new_token()
SHA = digest(SECRET)


def create(**more: object) -> a.CreateJoinToken:
    fields = {"token_id": TOKEN_ID, "secret_sha256": SHA, "expires_in_s": 3600, **by(), **more}
    return a.CreateJoinToken(**fields)


def join(secret: str = SECRET, node_id: str = "n1") -> a.JoinNode:
    return a.JoinNode(
        token_id=TOKEN_ID, secret_sha256=digest(secret), node_id=node_id, hostname="gpu-02",
        address="10.0.0.2", **by(),
    )  # fmt: skip


def test_a_token_splits_back_into_its_id_and_secret() -> None:
    assert TOKEN.startswith("jyjoin_") and parse(TOKEN) == (TOKEN_ID, SECRET)
    assert len(SECRET) >= 43  # 256 bits, url-safe
    for bad in ("", "jyjoin_", "jyjoin_abc", "other_abc_def", TOKEN.replace("jyjoin", "jy")):
        with pytest.raises(UnknownJoinTokenError, match="unknown join token"):
            parse(bad)


async def test_a_superadmin_makes_a_token_and_the_log_keeps_only_its_digest(org: Org) -> None:
    w = org.world
    (await w.when(create(**by(org.admin1.actor)))).rejected(
        Code.FORBIDDEN, "may not create join tokens"
    )
    then = await w.when(create(resource_group="gpu", note="rack 4", **by(org.root.actor)))
    expires_at = then.stored[0].envelope.occurred_at + timedelta(hours=1)
    then.accepted(
        JoinTokenCreated(
            secret_sha256=SHA, expires_at=expires_at, resource_group="gpu", note="rack 4"
        )
    )
    assert SECRET not in then.stored[0].envelope.model_dump_json()
    assert w.directory.join_tokens[TOKEN_ID].resource_group == "gpu"


async def test_a_join_with_the_right_secret_is_recorded(org: Org) -> None:
    w = org.world
    await w.given(create())
    then = await w.when(join())
    assert "node n1 (gpu-02) joined" in then.accepted(
        NodeJoined(node_id="n1", hostname="gpu-02", address="10.0.0.2")
    )
    assert then.written_to == [f"join_token/{TOKEN_ID}"]
    assert w.directory.join_tokens[TOKEN_ID].nodes == ("n1",)
    (await w.when(join(node_id="n2"))).accepted(
        NodeJoined(node_id="n2", hostname="gpu-02", address="10.0.0.2")
    )  # a token serves every machine until it expires


async def test_a_wrong_expired_or_revoked_token_is_refused_with_the_reason(org: Org) -> None:
    w = org.world
    (await w.when(join())).rejected(Code.FORBIDDEN, "unknown join token")
    await w.given(create())  # at T0, for an hour
    (await w.when(join(secret="x" * 43))).rejected(Code.FORBIDDEN, "unknown join token")
    late = T0 + timedelta(hours=1)
    (await w.when(join(), now=late)).rejected(
        Code.FORBIDDEN, f"join token {TOKEN_ID} expired at {late.isoformat(timespec='seconds')}"
    )
    (await w.when(a.RevokeJoinToken(token_id=TOKEN_ID, **by(org.root.actor)))).accepted(
        JoinTokenRevoked(reason="revoked by an operator")
    )
    (await w.when(join())).rejected(Code.FORBIDDEN, f"join token {TOKEN_ID} was revoked")
    said = await w.when(a.RevokeJoinToken(token_id=TOKEN_ID, **by()))
    assert "was revoked already" in said.accepted()


async def test_only_the_gateway_records_a_join(org: Org) -> None:
    w = org.world
    await w.given(create())
    (await w.when(join().model_copy(update=by(org.root.actor)))).rejected(
        Code.FORBIDDEN, "joins are recorded by the gateway only"
    )


def test_the_rules_refuse_in_order_wrong_then_revoked_then_expired() -> None:
    from commands.join_token import JoinToken

    token = JoinToken.create(TOKEN_ID, SHA, T0 + timedelta(minutes=1), "default", "", T0)
    token.check(SHA, T0)
    with pytest.raises(UnknownJoinTokenError):
        token.check(digest("wrong"), T0)
    with pytest.raises(JoinRefusedError, match="expired"):
        token.check(SHA, T0 + timedelta(minutes=1))
    token.revoke("gone", T0)
    with pytest.raises(JoinRefusedError, match="was revoked"):
        token.check(SHA, T0 + timedelta(minutes=5))
