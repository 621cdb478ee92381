"""Feeds the fair-share usage book (``placement.fairshare.UsageBook``) in the log's order:
allocations and releases (``ev.node.*``) and half-life changes (``ev.resource_group.*``).

The state applies its own writes from their acks, ahead of other writers' events stored
before them that the tail has not delivered yet, so the fold's order differs between replicas
(and from a restart's). The book's floats depend on the order of what they add, so each change
waits here, by stream sequence, until the tail's position has passed it, and goes in in
sequence order: every replica and every restart computes the same bits. Pure; no subjects.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from placement.fairshare import UsageBook

Change = Callable[[UsageBook], None]


class UsageFeed:
    __slots__ = ("_book", "_changes", "_seqs")

    def __init__(self) -> None:
        self._book = UsageBook()
        self._changes: dict[int, Change] = {}
        self._seqs: list[int] = []

    def offer(self, seq: int, change: Change) -> None:
        """A change the event at ``seq`` makes (an event is folded once: guards)."""
        if seq not in self._changes:
            self._changes[seq] = change
            heapq.heappush(self._seqs, seq)

    def until(self, position: int) -> UsageBook:
        """The book with every change up to ``position`` (the tail's: all the log before it
        has been folded), in sequence order; later ones wait."""
        while self._seqs and self._seqs[0] <= position:
            self._changes.pop(heapq.heappop(self._seqs))(self._book)
        return self._book
