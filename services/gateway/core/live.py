"""What the gateway's live subscriptions share: a reader of the log from its end (an ordered
JetStream consumer, never a core subscription), and the check, before each message, that the
subscriber's credentials still hold. Reads what its callers name; writes nothing."""

from __future__ import annotations

from graphql import GraphQLError

from events.bus import Bus
from events.store import EventStore
from events.tail import Tail
from services.gateway.context import Context


async def tail_from_end(
    bus: Bus, subjects: list[str], *, names: frozenset[str] | None = None
) -> Tail:
    """A tail of ``subjects`` (only the event ``names`` given, if any) from the log's end now:
    what is written from now on."""
    start = await EventStore(bus).stream_last_seq() + 1
    return Tail(bus, from_seq=start, subjects=subjects, names=names)


def check_still_valid(ctx: Context) -> None:
    """Raise once the subscriber's keypair or account was deactivated: it gets no more."""
    principal = ctx.principal
    if principal is None or ctx.directory.principal(principal.actor) is None:
        raise GraphQLError("your credentials are no longer valid")
