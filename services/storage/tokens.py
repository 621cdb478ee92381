"""What the data plane adds to a token's signature and expiry (``schemas.folder_tokens``):
its scope checked against the request, and one-use tokens remembered.

One-use tokens (``once``) are remembered by their ``jti`` in this process until they expire
(``UsedTokens``): a restarted process, or a second replica, would accept one again within
its lifetime. Keep one-use tokens short-lived.
"""

from __future__ import annotations

from schemas.folder_paths import FolderPath
from schemas.folder_tokens import Claims, Operation, TokenError, issue, verify

__all__ = ["Claims", "Operation", "TokenError", "UsedTokens", "check_scope", "issue", "verify"]


def check_scope(
    claims: Claims, *, op: Operation, volume: str, folder: str, paths: tuple[FolderPath, ...]
) -> None:
    """Refuse a token used for another operation, volume, folder or path."""
    if claims.op != op:
        raise TokenError(
            "wrong_operation", 403, f"the token grants {claims.op.value}, not {op.value}"
        )
    if claims.volume != volume or claims.folder != folder:
        raise TokenError("wrong_folder", 403, "the token grants access to another folder")
    for path in paths:
        if not claims.allows(path):
            scope = "beneath " if claims.prefix else ""
            raise TokenError(
                "path_not_allowed",
                403,
                f"the token grants {scope}{claims.path or 'the folder root'!r}, not {str(path)!r}",
            )


class UsedTokens:
    """The ``jti`` of every one-use token seen by this process, until it expires."""

    def __init__(self) -> None:
        self._used: dict[str, int] = {}
        self._next_prune = 0.0

    def use(self, claims: Claims, *, now: float) -> None:
        if not claims.once:
            return
        if now >= self._next_prune:
            self._used = {jti: exp for jti, exp in self._used.items() if exp > now}
            self._next_prune = now + 60.0
        if claims.jti in self._used:
            raise TokenError("token_used", 401, "this one-use token has been used already")
        self._used[claims.jti] = claims.exp

    def __len__(self) -> int:
        return len(self._used)
