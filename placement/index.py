"""The group's available nodes bucketed by free GPU capacity, so a decision looks at the few
nodes that can fit it instead of scanning the group. Pure.

A bucket holds the nodes with the same (free whole devices ``w``, largest share room ``r``).
Two sorted lists of the non-empty buckets serve the two GPU measures: by ``(w, r)`` for whole
devices (and for requests without GPUs: fewest free GPUs first), by ``(r, w)`` for shares.
Inside a bucket, nodes are sorted by free cpu then rank (position in node-id order), packed in
one int, so "least cpu that fits" is a bisection; for round-robin they are sorted by rank,
so "the next node after the cursor" is a bisection too.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right, insort
from collections.abc import Iterator, Sequence

from placement.nodes import Kind, Need, NodeState
from schemas.tenancy import AgentSelection

SHIFT = 24
MASK = (1 << SHIFT) - 1


def _wkey(w: int, r: int) -> int:
    return (w << 8) | r


def _rkey(w: int, r: int) -> int:
    return (r << 24) | w


class Index:
    __slots__ = ("_buckets", "_by_r", "_by_w", "_mode", "_nodes")

    def __init__(self, nodes: Sequence[NodeState], selection: AgentSelection) -> None:
        self._nodes = nodes  # by rank
        self._mode = selection
        self._buckets: dict[int, list[int]] = {}
        self._by_w: list[int] = []
        self._by_r: list[int] = []
        for node in nodes:
            if node.available:
                self.add(node)

    def _entry(self, node: NodeState) -> int:
        if self._mode is AgentSelection.ROUND_ROBIN:
            return node.rank
        return (node.cpu << SHIFT) | node.rank

    def add(self, node: NodeState) -> None:
        key = _wkey(node.w, node.r)
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = self._buckets[key] = []
            insort(self._by_w, key)
            insort(self._by_r, _rkey(node.w, node.r))
        insort(bucket, self._entry(node))

    def remove(self, node: NodeState) -> None:
        """Before the node's free capacity changes (its entry is computed from it)."""
        key = _wkey(node.w, node.r)
        bucket = self._buckets[key]
        del bucket[bisect_left(bucket, self._entry(node))]
        if not bucket:
            del self._buckets[key]
            del self._by_w[bisect_left(self._by_w, key)]
            del self._by_r[bisect_left(self._by_r, _rkey(node.w, node.r))]

    def _keys(self, need: Need, descending: bool) -> Iterator[int]:
        """The buckets that can hold ``need``'s devices, in order of preference."""
        if need.kind is Kind.CPU:
            yield from self._by_w
            return
        if need.kind is Kind.WHOLE:
            keys = self._by_w[bisect_left(self._by_w, _wkey(need.whole, 0)) :]
            for key in reversed(keys) if descending else keys:
                if key & 0xFF >= need.min_r:
                    yield key
            return
        keys = self._by_r[bisect_left(self._by_r, _rkey(0, need.min_r)) :]
        for rkey in reversed(keys) if descending else keys:
            w = rkey & MASK
            if w >= need.whole:
                yield _wkey(w, rkey >> 24)

    def choose(self, need: Need, image: str, cursor: int) -> NodeState | None:
        """The node the group's selection gives ``need``; ``cursor``: the rank of the last
        node chosen (round-robin), -1 for none."""
        if self._mode is AgentSelection.ROUND_ROBIN:
            return self._next(need, image, cursor)
        descending = self._mode is AgentSelection.DISPERSED and need.kind is not Kind.CPU
        most = self._mode is AgentSelection.DISPERSED
        nodes = self._nodes
        for key in self._keys(need, descending):
            bucket = self._buckets[key]
            lo = bisect_left(bucket, need.cpu << SHIFT)
            if not most:
                for i in range(lo, len(bucket)):
                    node = nodes[bucket[i] & MASK]
                    if node.fits(need, image):
                        return node
                continue
            # Most free cpu first; among equal cpu, the smallest rank (node id) first.
            hi = len(bucket)
            while hi > lo:
                start = bisect_left(bucket, (bucket[hi - 1] >> SHIFT) << SHIFT, lo, hi)
                for i in range(start, hi):
                    node = nodes[bucket[i] & MASK]
                    if node.fits(need, image):
                        return node
                hi = start
        return None

    def _next(self, need: Need, image: str, cursor: int) -> NodeState | None:
        """Round-robin: the fitting node with the smallest rank after ``cursor``, wrapping.
        Without GPUs, the first bucket (fewest free GPUs) with a fit wins."""
        size = len(self._nodes)
        best: NodeState | None = None
        best_gap = size
        for key in self._keys(need, False):
            bucket = self._buckets[key]
            count = len(bucket)
            start = bisect_right(bucket, cursor)
            for step in range(count):
                rank = bucket[(start + step) % count]
                gap = (rank - cursor - 1) % size
                if gap >= best_gap:
                    break
                node = self._nodes[rank]
                if node.fits(need, image):
                    best, best_gap = node, gap
                    break
            if best is not None and need.kind is Kind.CPU:
                return best
        return best
