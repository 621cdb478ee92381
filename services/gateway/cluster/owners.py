"""Owners in words for one ``cluster`` answer: an email where the caller may see it (the person
and their administrators), else the user id; and whether the caller may see a domain's
sessions by name. Reads the directory and the people vault (``jy-people``); no subjects."""

from __future__ import annotations

from commands.authorisation import Principal
from services.gateway.context import Context
from services.gateway.core.visibility import sees_email


class People:
    """Owners in words for one answer: an email where the caller may see it, else the id."""

    def __init__(self, ctx: Context, me: Principal) -> None:
        self._ctx, self._me = ctx, me
        self._known: dict[str, str] = {}

    async def name(self, user_id: str | None) -> str | None:
        if not user_id:
            return None
        if user_id not in self._known:
            user = self._ctx.directory.users.get(user_id)
            email = None
            if user is not None and sees_email(self._me, user):
                email = await self._ctx.services.people.unseal(str(user.id), user.email_sealed)
            self._known[user_id] = email or user_id
        return self._known[user_id]


def sees(me: Principal, domain: str | None) -> bool:
    return me.reads_every_domain or (domain is not None and domain == me.domain)
