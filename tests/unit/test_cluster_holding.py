"""The gateway's copy of the open kernel intervals (``services.gateway.cluster.holding``): read
whole once, then only what changed after the highest position read; each node's version moves
only when its kernels change; a whole read again, in the background, puts right what a delta
cannot see. Against an in-memory usage view that answers as the SQL one does (the real one:
``tests/integration/test_usage.py``)."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import UTC, datetime

from projections.usage.accounting import UsageLine
from projections.usage.tables import HeldDevice, KernelInterval
from schemas.resources import ResourceSlots
from services.gateway.cluster.holding import OpenKernels

T0 = datetime(2026, 11, 1, tzinfo=UTC)


class Table:
    """``usage_kernels`` in memory: the rows by kernel id, each stamped with its last event."""

    def __init__(self) -> None:
        self.rows: dict[str, KernelInterval] = {}
        self.whole_reads = 0

    def put(self, row: KernelInterval) -> None:
        self.rows[row.kernel_id] = row

    async def usage(self, **_: object) -> list[UsageLine]:
        return []

    async def holding(self) -> list[KernelInterval]:
        self.whole_reads += 1
        open_rows = [r for r in self.rows.values() if r.ended_at is None]
        return sorted(open_rows, key=lambda r: (r.node_id, r.kernel_id))

    async def changed(self, since: int) -> list[KernelInterval]:
        return sorted(
            (r for r in self.rows.values() if r.last_seq > since), key=lambda r: r.last_seq
        )

    async def held_since(self, resource_group: str, since: object) -> list[KernelInterval]:
        return []

    async def waiting_owners(self, resource_group: str) -> set[tuple[str, str, str]]:
        return set()


def kernel(kernel_id: str, node: str, seq: int, *, gpu: int = 100) -> KernelInterval:
    return KernelInterval(
        kernel_id=kernel_id, session_id=f"s-{kernel_id}", node_id=node, session_name=None,
        user_id="u1", project_id="p1", domain="d1", resource_group="default",
        slots=ResourceSlots(cpu_milli=1000, memory_bytes=1 << 30, gpu_hundredths=gpu),
        devices=(HeldDevice(0, "GPU-0", gpu),), allocated_at=T0, started_at=None,
        ended_at=None, end_reason=None, last_seq=seq,
    )  # fmt: skip


def ids(kernels: tuple[KernelInterval, ...]) -> list[str]:
    return [k.kernel_id for k in kernels]


async def test_only_the_changes_are_read_and_only_their_nodes_move() -> None:
    table = Table()
    table.put(kernel("k1", "n1", 10))
    table.put(kernel("k2", "n2", 11))
    table.put(replace(kernel("k0", "n1", 5), ended_at=T0, last_seq=12))  # ended before
    copy = OpenKernels(table)
    first = await copy.now()
    assert (ids(first.on("n1")), ids(first.on("n2"))) == (["k1"], ["k2"])
    assert first.sessions() == 2

    table.put(kernel("k3", "n1", 20))  # allocated on n1
    table.put(replace(table.rows["k2"], ended_at=T0, last_seq=21))  # released on n2
    second = await copy.now()
    assert table.whole_reads == 1  # the rest came as changes
    assert (ids(second.on("n1")), ids(second.on("n2"))) == (["k1", "k3"], [])
    assert second.version("n1") != first.version("n1")
    assert second.version("n2") != first.version("n2")
    assert ids(first.on("n1")) == ["k1"]  # an answer once given never changes

    table.put(kernel("k4", "n3", 30))
    third = await copy.now()
    assert third.version("n1") == second.version("n1")  # n1 did not change
    assert ids(third.on("n3")) == ["k4"]
    assert await copy.now() is third  # nothing new: the same answer


async def test_a_whole_read_in_the_background_puts_right_what_no_change_said() -> None:
    table = Table()
    table.put(kernel("k1", "n1", 10))
    copy = OpenKernels(table, reread_s=0.0)
    before = await copy.now()
    # A rebuilt view whose new code reads the same event otherwise: same position, new row.
    table.put(replace(table.rows["k1"], devices=(HeldDevice(1, "GPU-1", 100),)))
    assert (await copy.now()).on("n1") == before.on("n1")  # answered from the copy meanwhile
    for _ in range(50):
        await asyncio.sleep(0.01)
        after = await copy.now()
        if after.on("n1")[0].devices[0].index == 1:
            break
    assert after.on("n1")[0].devices[0].index == 1
    assert after.version("n1") != before.version("n1")
    assert table.whole_reads >= 2
