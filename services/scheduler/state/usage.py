"""Feeds the fair-share usage book (``placement.fairshare.UsageBook``) in the log's order:
sessions' owners (``ev.session.*``), allocations and releases (``ev.node.*``) and half-life
changes (``ev.resource_group.*``).

The state applies its own writes from their acks, and after a conflict reads the refused
aggregates back from the store (``UnitOfWork.refresh``), ahead of other writers' events stored
before them that the tail has not delivered yet, so the fold's order differs between replicas
(and from a restart's). The book's floats depend on the order of what they add, so each change
waits here, by stream sequence, until the tail's position has passed it, and goes in in
sequence order. What a change says must not depend on the fold's order either: an allocation
read back before its session's request would find no owner, so whose it is is resolved here,
in sequence order, from the owners this feed learned from the requests (always stored before
their allocations). Every replica and every restart computes the same bits. Pure; no subjects.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from placement.fairshare import Account, UsageBook
from schemas.resources import ResourceSlots

Change = Callable[[UsageBook], None]
Owner = tuple[str, Account]
"""A session's resource group and owner, as its usage counts."""
NO_OWNER: Account = ("", "", "")


class UsageFeed:
    __slots__ = ("_book", "_changes", "_owners", "_seqs")

    def __init__(self) -> None:
        self._book = UsageBook()
        self._changes: dict[int, Change] = {}
        self._seqs: list[int] = []
        self._owners: dict[str, Owner] = {}
        """Session id -> whose its allocations are, as far as the book has taken changes
        (sessions not ended)."""

    def offer(self, seq: int, change: Change) -> None:
        """A change the event at ``seq`` makes (an event is folded once: guards)."""
        if seq not in self._changes:
            self._changes[seq] = change
            heapq.heappush(self._seqs, seq)

    def requested(self, seq: int, session_id: str, owner: Owner) -> None:
        """The session requested at ``seq`` counts under ``owner``."""

        def change(book: UsageBook) -> None:
            self._owners[session_id] = owner

        self.offer(seq, change)

    def ended(self, seq: int, session_id: str) -> None:
        """The session ended at ``seq``: nothing is allocated to it after (its end and any
        placement are guarded on it, so none is stored after the end)."""

        def change(book: UsageBook) -> None:
            self._owners.pop(session_id, None)

        self.offer(seq, change)

    def allocated(
        self,
        seq: int,
        kernel_id: str,
        session_id: str,
        slots: ResourceSlots,
        at: float,
        node_group: str,
    ) -> None:
        """A kernel of ``session_id`` holds ``slots`` from ``at``; a session this log never
        requested (or ended) counts under no owner in its node's group."""

        def change(book: UsageBook) -> None:
            group, account = self._owners.get(session_id, (node_group, NO_OWNER))
            book.allocate(kernel_id, group, account, slots, at)

        self.offer(seq, change)

    @property
    def waiting(self) -> int:
        """Changes offered that wait for the tail's position."""
        return len(self._seqs)

    def until(self, position: int) -> UsageBook:
        """The book with every change up to ``position`` (the tail's: all the log before it
        has been folded), in sequence order; later ones wait."""
        while self._seqs and self._seqs[0] <= position:
            self._changes.pop(heapq.heappop(self._seqs))(self._book)
        return self._book
