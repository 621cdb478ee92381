"""Bytes that finished uploads added to folders and that no folded measurement holds yet:
they count in the owner's policy total (``room``) from the moment an upload finishes until
a measurement taken after it is folded, so an upload that finished a moment ago and one
that starts now cannot together pass the total. Pure: the times are handed in."""

from __future__ import annotations

from collections.abc import Iterable

MAX_AGE_S = 600.0
"""An entry older than this is dropped even if no measurement settled it (the measurement
failed, or its folder went): a bound on memory, well past the meter's interval."""


class Landed:
    def __init__(self) -> None:
        self._by_folder: dict[str, list[tuple[float, int]]] = {}

    def add(self, folder_id: str, added: int, at: float) -> None:
        self._by_folder.setdefault(folder_id, []).append((at, added))
        self._prune(at)

    def settle(self, folder_id: str, measured_from: float) -> None:
        """A measurement started at ``measured_from`` is folded: it holds what landed
        before."""
        kept = [(at, n) for at, n in self._by_folder.pop(folder_id, []) if at >= measured_from]
        if kept:
            self._by_folder[folder_id] = kept

    def total(self, folder_ids: Iterable[str]) -> int:
        return sum(n for f in folder_ids for _, n in self._by_folder.get(f, ()))

    def _prune(self, now: float) -> None:
        for folder_id in list(self._by_folder):
            kept = [(at, n) for at, n in self._by_folder[folder_id] if now - at < MAX_AGE_S]
            if kept:
                self._by_folder[folder_id] = kept
            else:
                del self._by_folder[folder_id]
