"""Why a waiting request does not fit although its resource group has the room in total: the
operator console's fragmentation notes (the ``cluster`` query). Pure: the nodes' free room and
the waiting requests in, sentences out; no subjects.

It explains, it does not decide. Placement is the scheduler's alone
(``services/scheduler/placement``); its rules are mirrored here only as far as a sentence
needs them: a multiple of 100 hundredths takes whole free GPUs, any other amount takes shares
on ceil(h/100) GPUs under the group's fragmentation guard (anywhere with room without it), and
each kernel needs its cpu and memory on its node. A single-node session's kernels go on one
node; a multi-node session's kernels anywhere.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from enum import Enum
from functools import cached_property

FULL = 100
SHOWN_NODES = 6
"""Nodes named in one sentence; the rest are counted."""


class Kind(Enum):
    FRAGMENTED = "fragmented"  # the group has the room in total, no node has it in one piece
    SHORT = "short"  # the group has less free than the request needs
    FITS = "fits"  # there is room now: it waits for its turn or another reason
    OVERSIZED = "oversized"  # no node of the group has that many GPUs at all


@dataclass(frozen=True, slots=True)
class Device:
    """One GPU of a node: held whole, shared in hundredths, or free; and by whom."""

    index: int
    whole: bool = False
    shared: int = 0
    mig: bool = False
    holders: tuple[tuple[str, int], ...] = ()
    """(who, hundredths): "session train-3 of alice@example.org"."""

    @property
    def free(self) -> int:
        return 0 if self.whole else FULL - self.shared


@dataclass(frozen=True, slots=True)
class Room:
    """One node as the explanation sees it: what is free on it now."""

    name: str
    group: str
    available: bool
    cpu_milli: int
    memory_bytes: int
    devices: tuple[Device, ...] = ()


@dataclass(frozen=True, slots=True)
class Ask:
    """One waiting session: what each of its kernels needs."""

    session_id: str
    label: str
    """Who asks, in words: "session big-run of bob@example.org"."""
    group: str
    cpu_milli: int
    memory_bytes: int
    gpu_hundredths: int
    kernels: int = 1
    single_node: bool = True
    place: str = ""
    """Its place in the queue, in words ("1st of 3 waiting"), or empty."""


@dataclass(frozen=True, slots=True)
class Note:
    session_id: str
    group: str
    kind: Kind
    text: str
    free_gpu_hundredths: int
    need_gpu_hundredths: int
    situation: str = ""
    """What every request of its shape in its group meets: ``text`` without the request's own
    words, so a page can say it once for all of them."""


@dataclass
class _Work:
    """A node's free room while kernels are tried on it (a copy: trying changes nothing)."""

    name: str
    cpu: int
    memory: int
    used: list[int] = field(default_factory=list)  # per device: hundredths taken (FULL: whole)
    whole: list[bool] = field(default_factory=list)
    mig: list[bool] = field(default_factory=list)

    @classmethod
    def of(cls, room: Room) -> _Work:
        devices = room.devices
        return cls(
            room.name, room.cpu_milli, room.memory_bytes,
            [FULL if d.whole else d.shared for d in devices],
            [d.whole for d in devices], [d.mig for d in devices],
        )  # fmt: skip

    def copy(self) -> _Work:
        return _Work(self.name, self.cpu, self.memory, [*self.used], [*self.whole], [*self.mig])

    def may_hold(self, ask: Ask, kernels: int) -> bool:
        """False when ``kernels`` of the ask cannot fit here whatever the GPUs' order: less cpu,
        memory, free GPUs (whole asks) or room in shares (the others) than they need together.
        Cheaper than trying them on a copy, which most nodes of a busy group fail."""
        if self.cpu < ask.cpu_milli * kernels or self.memory < ask.memory_bytes * kernels:
            return False
        h = ask.gpu_hundredths * kernels
        if h == 0:
            return True
        if h % FULL == 0:
            return sum(1 for u in self.used if u == 0) * FULL >= h
        shares = zip(self.used, self.whole, self.mig, strict=True)
        return sum(FULL - u for u, whole, mig in shares if not (whole or mig)) >= h

    def take(self, ask: Ask, guard: bool) -> bool:
        """Take one kernel's room if it is here (and change nothing if not)."""
        if self.cpu < ask.cpu_milli or self.memory < ask.memory_bytes:
            return False
        taken = self._gpus(ask.gpu_hundredths, guard)
        if taken is None:
            return False
        for i, amount in taken:
            self.used[i] += amount
            self.whole[i] = ask.gpu_hundredths % FULL == 0
        self.cpu -= ask.cpu_milli
        self.memory -= ask.memory_bytes
        return True

    def _gpus(self, h: int, guard: bool) -> list[tuple[int, int]] | None:
        if h == 0:
            return []
        count = len(self.used)
        if h % FULL == 0:
            free = [i for i in range(count) if self.used[i] == 0]
            return [(i, FULL) for i in free[: h // FULL]] if len(free) >= h // FULL else None
        rooms = sorted(
            ((FULL - self.used[i], i) for i in range(count) if not (self.whole[i] or self.mig[i])),
            reverse=True,
        )
        rooms = [r for r in rooms if r[0] > 0]
        n = -(-h // FULL)
        if n == 1:
            fitting = [r for r in rooms if r[0] >= h]
            return [(min(fitting)[1], h)] if fitting else None
        if len(rooms) >= n and sum(r for r, _ in rooms[:n]) >= h:
            return _spread(rooms[:n], h)
        if not guard and sum(r for r, _ in rooms) >= h:
            return _spread(rooms, h)
        return None


def _spread(rooms: list[tuple[int, int]], h: int) -> list[tuple[int, int]]:
    taken = []
    for room, index in rooms:
        amount = min(room, h)
        if amount:
            taken.append((index, amount))
            h -= amount
    return taken


def explain(rooms: list[Room], asks: list[Ask], guards: dict[str, bool]) -> list[Note]:
    """One note per waiting request, in the order given. ``guards``: each group's
    fragmentation guard (on where a group is not named)."""
    by_group: dict[str, list[Room]] = defaultdict(list)
    for room in rooms:
        by_group[room.group].append(room)
    groups = {
        name: _Group(by_group[name], guards.get(name, True)) for name in {a.group for a in asks}
    }
    return [_note(groups[ask.group], ask) for ask in asks]


class _Group:
    """One group's room, worked out once for all its waiting requests (the nodes' words
    only when a sentence needs them)."""

    def __init__(self, rooms: list[Room], guard: bool) -> None:
        self.guard = guard
        self.offered = [r for r in rooms if r.available]
        self.work = [_Work.of(r) for r in self.offered]  # tried on copies: never changed
        self.free = sum(d.free for r in self.offered for d in r.devices)
        self.cpu = sum(r.cpu_milli for r in self.offered)
        self.memory = sum(r.memory_bytes for r in self.offered)
        self.aside = _aside(rooms)
        self.most_gpus = max((len(r.devices) for r in rooms), default=0)
        """The most GPUs any node of the group has, offered or not."""
        self.fits: dict[tuple[int, int, int, int, bool], str | None] = {}
        """Where each shape of request fits (``_fits``): many wait with the same shape."""

    @cached_property
    def gpu_nodes(self) -> str:
        """The nodes with GPUs, most free first."""
        ranked = sorted(self.offered, key=lambda r: (-sum(d.free for d in r.devices), r.name))
        with_gpus = [r for r in ranked if r.devices]
        return _listed([_node_gpus(r) for r in with_gpus[:SHOWN_NODES]], len(with_gpus))

    @cached_property
    def cpu_nodes(self) -> str:
        """The nodes, most cores free first."""
        ranked = sorted(self.offered, key=lambda r: (-r.cpu_milli, r.name))
        shown = ranked[:SHOWN_NODES]
        return _listed(
            [f"{r.name} has {_cores(r.cpu_milli)} and {_bytes(r.memory_bytes)}" for r in shown],
            len(ranked),
        )


def _note(group: _Group, ask: Ask) -> Note:
    free = group.free
    need = ask.gpu_hundredths * ask.kernels
    queued = f" ({ask.place})" if ask.place else ""

    def note(kind: Kind, situation: str, text: str) -> Note:
        return Note(ask.session_id, ask.group, kind, text, free, need, situation)

    where = _fits(group, ask)
    if where is not None:
        return note(
            Kind.FITS,
            f"There is room now on {where}: requests of this shape wait for their turn or "
            "another reason, not for room.",
            f"There is room for {ask.label} now on {where}: it waits for its turn or for "
            "another reason, not for room.",
        )
    aside = group.aside
    wanted = _whole_per_node(ask)
    if wanted > group.most_gpus:
        largest = f"the largest has {_count(group.most_gpus, 'GPU')}"
        situation = (
            f"No node of group {ask.group} has {wanted} GPUs ({largest}): such a request "
            "cannot fit until a node that large joins the group."
        )
        return note(
            Kind.OVERSIZED,
            situation,
            f"{_upper(ask.label)}{queued} asks {wanted} whole GPUs on one node, but no node "
            f"of group {ask.group} has {wanted} GPUs ({largest}): it cannot fit until a node "
            "that large joins the group.",
        )
    if need > free:
        room = (
            f"{_gpu_amount(free)} {'are' if free > FULL else 'is'} free on the available nodes "
            f"of group {ask.group}{aside}."
        )
        return note(
            Kind.SHORT,
            f"{_gpu_amount(need)} asked in all; {room}",
            f"{_upper(ask.label)} asks {_gpu_amount(need)} in all; {room}",
        )
    cpu, memory = group.cpu, group.memory
    if ask.cpu_milli * ask.kernels > cpu or ask.memory_bytes * ask.kernels > memory:
        asked = (
            f"{_cores(ask.cpu_milli * ask.kernels)} and {_bytes(ask.memory_bytes * ask.kernels)}"
        )
        room = (
            f"the available nodes of group {ask.group} have {_cores(cpu)} and "
            f"{_bytes(memory)} free{aside}."
        )
        return note(
            Kind.SHORT, f"{asked} asked; {room}", f"{_upper(ask.label)} asks {asked}; {room}"
        )
    if ask.gpu_hundredths == 0:
        situation, asked = _cpu_words(group, ask), "request"
    else:
        situation, asked = _gpu_words(group, ask)
    return note(
        Kind.FRAGMENTED,
        situation,
        f"{situation} The waiting {asked} of {ask.label}{queued} cannot fit.",
    )


def _whole_per_node(ask: Ask) -> int:
    """Whole GPUs the request needs on one node (0 for shares and CPU-only requests)."""
    if ask.gpu_hundredths == 0 or ask.gpu_hundredths % FULL:
        return 0
    per_kernel = ask.gpu_hundredths // FULL
    return per_kernel * ask.kernels if ask.single_node else per_kernel


def _fits(group: _Group, ask: Ask) -> str | None:
    """Where the request would go now (node names), or None: once per shape of request."""
    shape = (ask.cpu_milli, ask.memory_bytes, ask.gpu_hundredths, ask.kernels, ask.single_node)
    if shape not in group.fits:
        group.fits[shape] = _place(group, ask)
    return group.fits[shape]


def _place(group: _Group, ask: Ask) -> str | None:
    guard = group.guard
    if ask.single_node or ask.kernels == 1:
        for node in group.work:
            if not node.may_hold(ask, ask.kernels):
                continue
            trial = node.copy()
            if all(trial.take(ask, guard) for _ in range(ask.kernels)):
                return node.name
        return None
    work = [node.copy() for node in group.work if node.may_hold(ask, 1)]
    names: list[str] = []
    for _ in range(ask.kernels):
        found = next((node for node in work if node.take(ask, guard)), None)
        if found is None:
            return None
        names.append(found.name)
    return ", ".join(dict.fromkeys(names))


def _gpu_words(group: _Group, ask: Ask) -> tuple[str, str]:
    """(the group's room for a request of this shape, the request's shape in words)."""
    h, k = ask.gpu_hundredths, ask.kernels
    per_node = h * k if ask.single_node else h
    if h % FULL == 0:
        shape = f"{per_node // FULL} whole GPUs free"
    elif not group.guard:
        shape = f"{_gpu_amount(per_node)} free"
    else:
        devices = -(-h // FULL) * (k if ask.single_node else 1)
        shape = f"{_gpus(per_node)} free on {_count(devices, 'GPU')}"
    if not ask.single_node and k > 1:
        shape += f" for each of its {k} kernels once the others are placed"
    asked = f"{k}-kernel ({_gpu_amount(h)} each)" if k > 1 else f"{_gpus(h)}-GPU"
    free = group.free
    situation = (
        f"{_gpu_amount(free)} {'are' if free > FULL else 'is'} free in group {ask.group}, "
        f"but no node has {shape}: {group.gpu_nodes}{group.aside}."
    )
    return situation, f"{asked} request"


def _cpu_words(group: _Group, ask: Ask) -> str:
    return (
        f"{_cores(group.cpu)} and {_bytes(group.memory)} are free in group {ask.group}, but no "
        f"node has {_cores(ask.cpu_milli)} and {_bytes(ask.memory_bytes)} free at once: "
        f"{group.cpu_nodes}{group.aside}."
    )


def _node_gpus(room: Room) -> str:
    """ "node-b has 1 whole GPU free and 0.5 of a shared GPU (device 0: 0.5 held by ...)"."""
    whole_free = sum(1 for d in room.devices if d.free == FULL)
    partial = [d for d in room.devices if 0 < d.free < FULL and not d.mig]
    said = f"{room.name} has {_count(whole_free, 'whole GPU')} free"
    if partial:
        amounts = " + ".join(_gpus(d.free) for d in partial)
        said += f" and {amounts} of {'a shared GPU' if len(partial) == 1 else 'shared GPUs'}"
    held = _holders(room.devices)
    return f"{said} ({held})" if held else said


def _holders(devices: tuple[Device, ...]) -> str:
    whole: dict[str, int] = {}
    shared: list[str] = []
    for d in devices:
        if d.whole:
            for who, _ in d.holders:
                whole[who] = whole.get(who, 0) + 1
        elif d.holders:
            parts = [f"{_gpus(amount)} held by {who}" for who, amount in d.holders]
            shared.append(f"GPU {d.index}: {', '.join(parts)}")
    said = [f"{n} held by {who}" for who, n in whole.items()]
    return "; ".join(said + shared)


def _aside(rooms: list[Room]) -> str:
    """The group's nodes that are not offered (cordoned, draining, lost), with their free GPUs."""
    held_back = [r for r in rooms if not r.available]
    if not held_back:
        return ""
    free = sum(d.free for r in held_back for d in r.devices)
    names = ", ".join(r.name for r in held_back[:SHOWN_NODES])
    verb = "is" if len(held_back) == 1 else "are"
    return f" ({names} {verb} cordoned or lost: {_gpu_amount(free)} there not offered)"


def _listed(parts: list[str], count: int) -> str:
    """The words of the first nodes (at most ``SHOWN_NODES``) of ``count``, and how many more."""
    if not parts:
        return "the group has no GPU node available"
    rest = count - len(parts)
    return "; ".join(parts) + (f"; and {_count(rest, 'more node')}" if rest > 0 else "")


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def _upper(text: str) -> str:
    return text[:1].upper() + text[1:]


def _gpu_amount(hundredths: int) -> str:
    """ "0.5 GPU", "1 GPU", "2.8 GPUs"."""
    return f"{_gpus(hundredths)} {'GPUs' if hundredths > FULL else 'GPU'}"


def _gpus(hundredths: int) -> str:
    """250 -> "2.5", 200 -> "2", 40 -> "0.4"."""
    text = f"{Decimal(hundredths) / FULL:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def _cores(milli: int) -> str:
    text = f"{Decimal(milli) / 1000:f}"
    amount = text.rstrip("0").rstrip(".") if "." in text else text
    return f"{amount} {'core' if milli == 1000 else 'cores'}"


def _bytes(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= size:
            return f"{n / size:.1f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{n} B"
