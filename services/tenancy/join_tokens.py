"""The tenancy service's decisions on join tokens (``cmd.join_token.*``), on the folded
``Directory``: superadmins create and revoke them; the gateway records a machine's join,
refused with the token rules' reason (``commands.join_token``)."""

from __future__ import annotations

from datetime import datetime, timedelta

from commands import admin as a
from commands.directory import Directory
from commands.join_token import JoinRefusedError, JoinToken
from commands.outcome import Code, Rejected
from schemas.subjects import AggregateType
from services.tenancy.common import Change, Decision, Who, acted, cluster_admin, exists, missing
from services.tenancy.common import working_copy as working_copy


def create_join_token(cmd: a.CreateJoinToken, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := cluster_admin(who, "create join tokens"):
        return refused
    if cmd.token_id in d.join_tokens:
        return exists(d, AggregateType.JOIN_TOKEN, cmd.token_id, cmd, f"join token {cmd.token_id}")
    expires_at = now + timedelta(seconds=cmd.expires_in_s)
    token = JoinToken.create(
        cmd.token_id, cmd.secret_sha256, expires_at, cmd.resource_group, cmd.note, now
    )
    return Change(
        (token,), f"join token {cmd.token_id} created (expires {expires_at:%Y-%m-%d %H:%M:%S} UTC)"
    )


def revoke_join_token(cmd: a.RevokeJoinToken, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := cluster_admin(who, "revoke join tokens"):
        return refused
    token = d.join_tokens.get(cmd.token_id)
    if token is None:
        return missing(f"join token {cmd.token_id}")
    return acted(
        token, f"join token {cmd.token_id}", lambda x: x.revoke(cmd.reason, now), "revoked",
        "was revoked already",
    )  # fmt: skip


def join_node(cmd: a.JoinNode, d: Directory, who: Who, now: datetime) -> Decision:
    # Only the gateway (a service, so ``who`` is None) records joins: a person presents the
    # token at POST /join like any machine.
    if who is not None:
        return Rejected(Code.FORBIDDEN, "joins are recorded by the gateway only")
    token = d.join_tokens.get(cmd.token_id)
    if token is None:
        return Rejected(Code.FORBIDDEN, "unknown join token")
    copy = working_copy(token)
    try:
        copy.join(cmd.secret_sha256, cmd.node_id, cmd.hostname, cmd.address, now)
    except JoinRefusedError as exc:
        return Rejected(Code.FORBIDDEN, str(exc))
    return Change((copy,), f"node {cmd.node_id} ({cmd.hostname}) joined with join token {token.id}")
