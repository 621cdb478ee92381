"""Why a waiting request does not run although its resource group may have the room in
total: the operator console's fragmentation notes (the ``cluster`` answer). Pure: the nodes'
free room and the waiting requests in, sentences out; no subjects.

It decides nothing. Whether a request fits now, waits, or never fits is the scheduler's own
rule asked through ``placement.judge`` (the same pool, device picks, guard and reasons a pass
uses); this module only adds the words a page needs around that answer: the group's free
room in total, which nodes have what, and who holds it. The nodes' storage volumes are not in
the views, so a session's folders are not weighed here (the session's own reason, written by
the scheduler, says when they hold it back).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from enum import Enum
from functools import cached_property

from placement import DeviceState, KernelRequest, NodeOffer, SessionRequest
from placement.judge import Judge, Verdict
from schemas.resources import ResourceSlots
from schemas.session import ClusterMode
from schemas.tenancy import GroupScheduling
from services.gateway.cluster import words
from services.gateway.cluster.words import FULL, SHOWN_NODES, cores, gpu_amount, size


class Kind(Enum):
    FRAGMENTED = "fragmented"  # waits: the group has the room in total, no node in one piece
    SHORT = "short"  # waits: the group has less free than the request needs
    FITS = "fits"  # there is room now: it waits for its turn or another reason
    OVERSIZED = "oversized"  # never fits the group as it is, even with nothing running


@dataclass(frozen=True, slots=True)
class Device:
    """One GPU of a node: held whole, shared in hundredths, or free; and by whom."""

    index: int
    whole: bool = False
    shared: int = 0
    mig: bool = False
    holders: tuple[tuple[str, int], ...] = ()
    """(who, hundredths): "session train-3 of alice@example.org"."""
    numa_node: int | None = None

    @property
    def free(self) -> int:
        return 0 if self.whole else FULL - self.shared


@dataclass(frozen=True, slots=True)
class Room:
    """One node as the explanation sees it: what is free on it now, what it has in all."""

    name: str
    group: str
    available: bool
    cpu_milli: int
    memory_bytes: int
    devices: tuple[Device, ...] = ()
    capacity: ResourceSlots | None = None
    """What it has in all (None: what is free now and every GPU listed, as if idle)."""
    images: frozenset[str] | None = None
    """The images it holds (None: any image)."""
    node_id: str = ""

    def offer(self, images: frozenset[str]) -> NodeOffer:
        """The node as the scheduler's placement sees it (``images``: those asked of the
        group, for a node that holds any)."""
        free = ResourceSlots(
            cpu_milli=self.cpu_milli,
            memory_bytes=self.memory_bytes,
            gpu_hundredths=sum(d.free for d in self.devices if not d.mig),
        )
        capacity = self.capacity or ResourceSlots(
            cpu_milli=self.cpu_milli,
            memory_bytes=self.memory_bytes,
            gpu_hundredths=FULL * len(self.devices),
        )
        devices = tuple(
            DeviceState(
                index=d.index, uuid=f"{self.name}/{d.index}", numa_node=d.numa_node,
                whole=d.whole, shared=0 if d.whole else d.shared, mig=d.mig,
            )
            for d in self.devices
        )  # fmt: skip
        return NodeOffer(
            node_id=self.node_id or self.name,
            hostname=self.name,
            capacity=capacity,
            free=free,
            images=images if self.images is None else self.images,
            available=self.available,
            devices=devices,
        )


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
    image: str = ""

    def request(self) -> SessionRequest:
        slots = ResourceSlots(
            cpu_milli=self.cpu_milli,
            memory_bytes=self.memory_bytes,
            gpu_hundredths=self.gpu_hundredths,
        )
        return SessionRequest(
            session_id=self.session_id,
            image=self.image,
            kernels=tuple(
                KernelRequest(f"{self.session_id}/{i}", slots) for i in range(self.kernels)
            ),
            cluster_mode=ClusterMode.SINGLE_NODE if self.single_node else ClusterMode.MULTI_NODE,
        )


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
    reason: str = ""
    """The scheduler's own sentence for why it does not fit now (empty when it fits)."""


def explain(
    rooms: list[Room], asks: list[Ask], policies: Mapping[str, GroupScheduling]
) -> list[Note]:
    """One note per waiting request, in the order given. ``policies``: each group's
    scheduling settings (the defaults where a group is not named)."""
    by_group: dict[str, list[Room]] = defaultdict(list)
    for room in rooms:
        by_group[room.group].append(room)
    groups = {
        name: _Group(
            by_group[name],
            policies.get(name) or GroupScheduling(),
            frozenset(a.image for a in asks if a.group == name),
            name,
        )
        for name in {a.group for a in asks}
    }
    return [_note(groups[ask.group], ask) for ask in asks]


class _Group:
    """One group's room, worked out once for all its waiting requests (the nodes' words
    only when a sentence needs them)."""

    def __init__(
        self, rooms: list[Room], policy: GroupScheduling, images: frozenset[str], name: str
    ) -> None:
        self.guard = policy.fragmentation_guard
        self.offered = [r for r in rooms if r.available]
        self.judge = Judge([r.offer(images) for r in rooms], policy, group=name)
        self.free = sum(d.free for r in self.offered for d in r.devices)
        self.cpu = sum(r.cpu_milli for r in self.offered)
        self.memory = sum(r.memory_bytes for r in self.offered)
        self.aside = _aside(rooms)

    @cached_property
    def gpu_nodes(self) -> str:
        """The nodes with GPUs, most free first."""
        ranked = sorted(self.offered, key=lambda r: (-sum(d.free for d in r.devices), r.name))
        with_gpus = [r for r in ranked if r.devices]
        return words.listed([_node_gpus(r) for r in with_gpus[:SHOWN_NODES]], len(with_gpus))

    @cached_property
    def cpu_nodes(self) -> str:
        """The nodes, most cores free first."""
        ranked = sorted(self.offered, key=lambda r: (-r.cpu_milli, r.name))
        shown = ranked[:SHOWN_NODES]
        return words.listed(
            [f"{r.name} has {cores(r.cpu_milli)} and {size(r.memory_bytes)}" for r in shown],
            len(ranked),
        )


def _note(group: _Group, ask: Ask) -> Note:
    free = group.free
    need = ask.gpu_hundredths * ask.kernels
    queued = f" ({ask.place})" if ask.place else ""
    said = group.judge.judge(ask.request())

    def note(kind: Kind, situation: str, text: str) -> Note:
        return Note(ask.session_id, ask.group, kind, text, free, need, situation, said.reason)

    if said.verdict is Verdict.FITS:
        where = ", ".join(said.nodes)
        return note(
            Kind.FITS,
            f"There is room now on {where}: requests of this shape wait for their turn or "
            "another reason, not for room.",
            f"There is room for {ask.label} now on {where}: it waits for its turn or for "
            "another reason, not for room.",
        )
    aside = group.aside
    if said.verdict is Verdict.NEVER:
        return note(
            Kind.OVERSIZED,
            f"{words.upper(said.reason)}: such a request cannot fit until the group changes.",
            f"{words.upper(ask.label)}{queued} cannot fit until the group changes: {said.reason}.",
        )
    if need > free:
        room = (
            f"{gpu_amount(free)} {'are' if free > FULL else 'is'} free on the available nodes "
            f"of group {ask.group}{aside}."
        )
        return note(
            Kind.SHORT,
            f"{gpu_amount(need)} asked in all; {room}",
            f"{words.upper(ask.label)} asks {gpu_amount(need)} in all; {room}",
        )
    cpu, memory = group.cpu, group.memory
    if ask.cpu_milli * ask.kernels > cpu or ask.memory_bytes * ask.kernels > memory:
        asked = f"{cores(ask.cpu_milli * ask.kernels)} and {size(ask.memory_bytes * ask.kernels)}"
        room = (
            f"the available nodes of group {ask.group} have {cores(cpu)} and "
            f"{size(memory)} free{aside}."
        )
        return note(
            Kind.SHORT, f"{asked} asked; {room}", f"{words.upper(ask.label)} asks {asked}; {room}"
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


def _gpu_words(group: _Group, ask: Ask) -> tuple[str, str]:
    """(the group's room for a request of this shape, the request's shape in words)."""
    h, k = ask.gpu_hundredths, ask.kernels
    per_node = h * k if ask.single_node else h
    if h % FULL == 0:
        shape = f"{per_node // FULL} whole GPUs free"
    elif not group.guard:
        shape = f"{gpu_amount(per_node)} free"
    else:
        devices = -(-h // FULL) * (k if ask.single_node else 1)
        shape = f"{words.gpus(per_node)} free on {words.count(devices, 'GPU')}"
    if not ask.single_node and k > 1:
        shape += f" for each of its {k} kernels once the others are placed"
    asked = f"{k}-kernel ({gpu_amount(h)} each)" if k > 1 else f"{words.gpus(h)}-GPU"
    free = group.free
    situation = (
        f"{gpu_amount(free)} {'are' if free > FULL else 'is'} free in group {ask.group}, "
        f"but no node has {shape}: {group.gpu_nodes}{group.aside}."
    )
    return situation, f"{asked} request"


def _cpu_words(group: _Group, ask: Ask) -> str:
    return (
        f"{cores(group.cpu)} and {size(group.memory)} are free in group {ask.group}, but no "
        f"node has {cores(ask.cpu_milli)} and {size(ask.memory_bytes)} free at once: "
        f"{group.cpu_nodes}{group.aside}."
    )


def _node_gpus(room: Room) -> str:
    """ "node-b has 1 whole GPU free and 0.5 of a shared GPU (device 0: 0.5 held by ...)"."""
    whole_free = sum(1 for d in room.devices if d.free == FULL)
    partial = [d for d in room.devices if 0 < d.free < FULL and not d.mig]
    said = f"{room.name} has {words.count(whole_free, 'whole GPU')} free"
    if partial:
        amounts = " + ".join(words.gpus(d.free) for d in partial)
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
            parts = [f"{words.gpus(amount)} held by {who}" for who, amount in d.holders]
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
    return f" ({names} {verb} cordoned or lost: {gpu_amount(free)} there not offered)"
