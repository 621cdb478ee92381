"""Device-level allocation on one node: which devices a kernel's GPU request takes. Pure: it
changes only the in-pass copy of a node's devices.

- A multiple of 100 hundredths takes that many **whole** devices, on one NUMA node when one
  has enough (the one with the fewest free, so larger NUMA groups stay whole for larger
  requests); otherwise over the fewest NUMA nodes.
- Any other amount takes **shares**: first over the fewest devices possible (one device for
  at most 100, ceil(h/100) devices above), FILL on the fullest devices that fit, EVENLY on the
  emptiest. With the fragmentation guard off, a request that cannot be laid that way may be
  split over any devices with room (FILL fullest first, EVENLY emptiest first, spread evenly).
- A device is never both whole-held and shared, holds at most 100, and a MIG device takes no
  shares.
"""

from __future__ import annotations

from collections.abc import Sequence

from placement.model import DeviceState
from schemas.devices import DeviceShare
from schemas.tenancy import DeviceFill

FULL = 100

Take = list[tuple["Dev", int]]
"""What one kernel takes: (device, hundredths), in device order."""


class Dev:
    """One device while a pass hands it out (plain ints: this is the hot loop)."""

    __slots__ = ("_shares", "index", "mig", "numa", "used", "uuid", "whole")

    def __init__(self, state: DeviceState) -> None:
        self.index = state.index
        self.uuid = state.uuid
        self.numa = state.numa_node
        self.mig = state.mig
        self.whole = state.whole
        self.used = FULL if state.whole else min(max(state.shared, 0), FULL)
        self._shares: dict[tuple[int, bool], DeviceShare] = {}

    @property
    def room(self) -> int:
        """Hundredths it can still take as shares."""
        return 0 if self.whole or self.mig else FULL - self.used

    def share(self, hundredths: int, whole: bool) -> DeviceShare:
        """The allocation's record of this device (one frozen value per amount, reused)."""
        key = (hundredths, whole)
        made = self._shares.get(key)
        if made is None:
            made = DeviceShare(index=self.index, uuid=self.uuid, hundredths=hundredths, whole=whole)
            self._shares[key] = made
        return made


def pick_whole(devs: Sequence[Dev], n: int) -> Take | None:
    free = [d for d in devs if d.used == 0 and not d.whole]
    if len(free) < n:
        return None
    groups: dict[int | None, list[Dev]] = {}
    for d in free:
        groups.setdefault(d.numa, []).append(d)
    fitting = [(len(ds), numa) for numa, ds in groups.items() if numa is not None and len(ds) >= n]
    if fitting:
        chosen = groups[min(fitting)[1]][:n]
    else:
        chosen = []
        for ds in sorted(groups.values(), key=lambda ds: (-len(ds), ds[0].index)):
            chosen.extend(ds[: n - len(chosen)])
            if len(chosen) == n:
                break
    return [(d, FULL) for d in sorted(chosen, key=lambda d: d.index)]


def pick_shares(devs: Sequence[Dev], h: int, guard: bool, fill: DeviceFill) -> Take | None:
    cands = [d for d in devs if d.room > 0]
    n = -(-h // FULL)
    if n == 1:
        fits = [d for d in cands if d.room >= h]
        if fits:
            key = _fullest if fill is DeviceFill.FILL else _emptiest
            return [(min(fits, key=key), h)]
    else:
        take = _fewest_numa(cands, h, n, fill)
        if take is not None:
            return take
    return None if guard else _split(cands, h, fill)


def _fullest(d: Dev) -> tuple[int, int]:
    return d.room, d.index


def _emptiest(d: Dev) -> tuple[int, int]:
    return -d.room, d.index


def _fewest_numa(cands: list[Dev], h: int, n: int, fill: DeviceFill) -> Take | None:
    """n devices, on one NUMA node when one can take it all."""
    groups: dict[int, list[Dev]] = {}
    for d in cands:
        if d.numa is not None:
            groups.setdefault(d.numa, []).append(d)
    sign = 1 if fill is DeviceFill.FILL else -1
    order = sorted(groups.items(), key=lambda kv: (sign * sum(d.room for d in kv[1]), kv[0]))
    for _, ds in order:
        take = _fewest(ds, h, n, fill)
        if take is not None:
            return take
    return _fewest(cands, h, n, fill)


def _fewest(cands: list[Dev], h: int, n: int, fill: DeviceFill) -> Take | None:
    if len(cands) < n:
        return None
    emptiest = sorted(cands, key=_emptiest)
    if sum(d.room for d in emptiest[:n]) < h:
        return None
    if fill is DeviceFill.EVENLY:
        return _even(emptiest[:n], h)
    # FILL: the fullest devices that still let the rest be covered, so emptier ones stay free.
    pool = sorted(cands, key=_fullest)
    chosen: list[Dev] = []
    need = h
    for left in range(n, 0, -1):
        for d in pool:
            rest = sorted((o.room for o in pool if o is not d), reverse=True)[: left - 1]
            if d.room + sum(rest) >= need:
                chosen.append(d)
                pool.remove(d)
                need -= min(d.room, need)
                break
    if need > 0:  # cannot happen when the n emptiest cover h; never hand out less than asked
        return None
    return _in_order(chosen, h)


def _split(cands: list[Dev], h: int, fill: DeviceFill) -> Take | None:
    """Guard off: over any devices with room."""
    if sum(d.room for d in cands) < h:
        return None
    if fill is DeviceFill.FILL:
        return _in_order(sorted(cands, key=_fullest), h)
    chosen: list[Dev] = []
    room = 0
    for d in sorted(cands, key=_emptiest):
        chosen.append(d)
        room += d.room
        if room >= h:
            break
    return _even(chosen, h)


def _in_order(chosen: list[Dev], h: int) -> Take:
    """Fill the devices in the order given, each as far as it goes."""
    take: Take = []
    for d in chosen:
        if h == 0:
            break
        amount = min(d.room, h)
        take.append((d, amount))
        h -= amount
    return sorted(take, key=_by_index)


def _even(chosen: list[Dev], h: int) -> Take:
    """As equal as the devices' room allows (water-filling, smallest room first)."""
    take: Take = []
    ordered = sorted(chosen, key=_fullest)
    for i, d in enumerate(ordered):
        amount = min(d.room, -(-h // (len(ordered) - i)))
        if amount:
            take.append((d, amount))
            h -= amount
    return sorted(take, key=_by_index)


def _by_index(t: tuple[Dev, int]) -> int:
    return t[0].index


def hold(take: Take, whole: bool) -> None:
    for d, amount in take:
        if whole:
            d.whole = True
            d.used = FULL
        else:
            d.used += amount


def give_back(take: Take, whole: bool) -> None:
    for d, amount in take:
        if whole:
            d.whole = False
            d.used = 0
        else:
            d.used -= amount


def numa_of(take: Take) -> int | None:
    """The NUMA node all the devices share, if they do."""
    numas = {d.numa for d, _ in take}
    return numas.pop() if len(numas) == 1 else None
