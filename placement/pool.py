"""One pass's working state for one group: the nodes by rank, their index, the round-robin
cursor, and what the pass has learnt. Places one session (all kernels or none), explains a
failure, and finds the node to reserve for a starving head. Pure.

Free capacity only shrinks within a pass, so a request shape that failed fails again: its
reason is kept and the search is skipped.

A session whose folders lie on volumes may only go where they all are. Rather than test the
volumes on every node tried (a cost every session would pay), its image is replaced by a key
naming the image and the volumes, added to the images of the nodes that have both (once per
pass and key, ``want``): the fit test stays one set lookup, and sessions without folders pay
nothing.

A session whose image comes from a registry (``SessionRequest.pullable``) may go to a node
that lacks the image (it pulls it there): its key is then the empty image, which every node
fits (``NodeState.fits``). With the group's ``image_locality`` on, the nodes that hold the
image are tried first and the others only when none of those fits: a pull happens only where
it must.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from placement import reasons
from placement.devices import FULL, Take, numa_of
from placement.explain import why
from placement.index import Index
from placement.model import (
    DeviceState,
    KernelPlacement,
    NodeOffer,
    Placed,
    SessionRequest,
)
from placement.nodes import Need, NodeState
from schemas.resources import ResourceSlots
from schemas.session import ClusterMode
from schemas.tenancy import GroupScheduling

Shape = tuple[tuple[int, int, int], ...]


def multi_node(request: SessionRequest) -> bool:
    return request.cluster_mode is ClusterMode.MULTI_NODE and len(request.kernels) > 1


def shape_of(request: SessionRequest) -> Shape:
    return tuple(
        (k.slots.cpu_milli, k.slots.memory_bytes, k.slots.gpu_hundredths) for k in request.kernels
    )


class Pool:
    """The group's nodes during one pass (``nodes`` by rank, ``index`` over the available
    ones) and the pass's caches."""

    def __init__(
        self,
        offers: Sequence[NodeOffer],
        policy: GroupScheduling,
        group: str,
        cursor: str | None,
    ) -> None:
        self.group = group
        self.policy = policy
        self.guard = policy.fragmentation_guard
        self.fill = policy.device_fill
        ordered = sorted(offers, key=lambda o: o.node_id)
        self.nodes = [NodeState(offer, rank) for rank, offer in enumerate(ordered)]
        self.index = Index(self.nodes, policy.agent_selection)
        # The cursor is the last node chosen; if it is gone, the node before where it was.
        self.cursor = -1
        if cursor is not None:
            self.cursor = sum(1 for o in ordered if o.node_id <= cursor) - 1
        self._needs: dict[Shape, Need] = {}
        self._wants: dict[tuple[str, frozenset[str]], str] = {}
        self._failed: dict[tuple[str, bool, Shape], str] = {}
        self._idle_fit: dict[tuple[str, bool, Shape], bool] = {}
        self._idle_nodes: dict[int, NodeState] = {}
        self._touched: set[int] = set()
        """Ranks of the nodes this pass took from (or gave back to)."""
        self.held: NodeState | None = None
        self.head = ""

    def renew(
        self,
        offers: Sequence[NodeOffer],
        policy: GroupScheduling,
        group: str,
        cursor: str | None,
    ) -> bool:
        """Make this pool the next pass's, from that pass's offers: a node is made anew only
        where its offer changed (a committed ledger's offer is the same object while the
        ledger stays as it was: ``steps.place.offer_of``) or the last pass took from it; the
        rest, and the index over them, are kept. False (nothing changed) when the group's
        nodes or its policy are not the same: make a new pool."""
        if policy != self.policy or group != self.group or len(offers) != len(self.nodes):
            return False
        ordered = sorted(offers, key=lambda o: o.node_id)
        if any(n.offer.node_id != o.node_id for n, o in zip(self.nodes, ordered, strict=True)):
            return False
        if self.held is not None:  # reserve() took it out of the index for the pass
            self.index.add(self.held)
        for rank, offer in enumerate(ordered):
            node = self.nodes[rank]
            if node.offer is offer and rank not in self._touched:
                continue
            if node.available:
                self.index.remove(node)
            node = self.nodes[rank] = NodeState(offer, rank)
            if node.available:
                self.index.add(node)
        self.cursor = -1
        if cursor is not None:
            self.cursor = sum(1 for o in ordered if o.node_id <= cursor) - 1
        self._wants.clear()
        self._failed.clear()
        self._idle_fit.clear()
        self._idle_nodes.clear()
        self._touched.clear()
        self.held, self.head = None, ""
        return True

    def need(self, shape: Shape) -> Need:
        need = self._needs.get(shape)
        if need is None:
            need = self._needs[shape] = Need(shape, guard=self.guard, fill=self.fill)
        return need

    def capacity(self) -> ResourceSlots:
        """The group's: every available node's capacity."""
        total = [0, 0, 0]
        for node in self.nodes:
            if node.available:
                total[0] += node.offer.capacity.cpu_milli
                total[1] += node.offer.capacity.memory_bytes
                total[2] += node.offer.capacity.gpu_hundredths
        return ResourceSlots(cpu_milli=total[0], memory_bytes=total[1], gpu_hundredths=total[2])

    def want(self, request: SessionRequest) -> str:
        """What a node must have for ``request``, as ``NodeState.fits`` tests it: the image,
        or for a session with folders the key of its image and volumes (see the module)."""
        return self._want(request.image, request.volumes)

    def _want(self, image: str, volumes: frozenset[str]) -> str:
        if not volumes:
            return image
        wanted = (image, volumes)
        key = self._wants.get(wanted)
        if key is None:
            key = self._wants[wanted] = "\0".join((image, *sorted(volumes)))
            for node in self.nodes:
                if (not image or image in node.images) and volumes <= node.volumes:
                    node.images = node.images | {key}
        return key

    def keys(self, request: SessionRequest) -> tuple[str, ...]:
        """The keys ``fits`` tests, in order of preference: the image's (its holders); for a
        pullable image, then (or only, without image locality) any node's."""
        if not request.pullable:
            return (self.want(request),)
        anywhere = self._want("", request.volumes)
        if not self.policy.image_locality:
            return (anywhere,)
        return (self.want(request), anywhere)

    def cursor_id(self) -> str | None:
        return self.nodes[self.cursor].offer.node_id if self.cursor >= 0 else None

    def decide(self, request: SessionRequest) -> Placed | str:
        shape = shape_of(request)
        multi = multi_node(request)
        images = self.keys(request)
        key = (images[-1], multi, shape)
        known = self._failed.get(key)
        if known is not None:
            return known
        if multi:
            result = self._multi(request, images, shape)
        else:
            result = self._single(request, images, shape)
        if isinstance(result, str):
            self._failed[key] = result
        return result

    def _single(
        self, request: SessionRequest, images: tuple[str, ...], shape: Shape
    ) -> Placed | str:
        need = self.need(shape)
        chosen = self._choose(need, images)
        if chosen is None:
            reason = self._why(need, request)
            return reasons.together(len(shape), reason) if len(shape) > 1 else reason
        node, used = chosen
        takes = self._take(node, used)
        return Placed(
            request.session_id,
            {
                kernel.kernel_id: _placement(node, take, gpu)
                for kernel, take, gpu in zip(request.kernels, takes, used.gpus, strict=True)
            },
        )

    def _multi(
        self, request: SessionRequest, images: tuple[str, ...], shape: Shape
    ) -> Placed | str:
        cursor = self.cursor
        held: list[tuple[NodeState, Need, list[Take]]] = []
        placed: dict[str, KernelPlacement] = {}
        for i, kernel in enumerate(request.kernels):
            need = self.need(shape[i : i + 1])
            chosen = self._choose(need, images)
            if chosen is None:
                reason = reasons.kernel_of(i, len(shape), self._why(need, request))
                for node, used, takes in reversed(held):  # all or none: give back
                    self.index.remove(node)
                    node.give_back(used, takes)
                    self.index.add(node)
                self.cursor = cursor
                return reason
            node, used = chosen
            takes = self._take(node, used)
            held.append((node, used, takes))
            placed[kernel.kernel_id] = _placement(node, takes[0], used.gpus[0])
        return Placed(request.session_id, placed)

    def _choose(self, need: Need, images: tuple[str, ...]) -> tuple[NodeState, Need] | None:
        for image in images:
            chosen = need
            node = self.index.choose(chosen, image, self.cursor)
            if node is None and need.fallback is not None:
                chosen = need.fallback
                node = self.index.choose(chosen, image, self.cursor)
            if node is not None:
                self.cursor = node.rank
                return node, chosen
        return None

    def _take(self, node: NodeState, need: Need) -> list[Take]:
        self._touched.add(node.rank)
        self.index.remove(node)
        takes = node.hold(need)
        self.index.add(node)
        assert takes is not None, "the index chose a node that does not fit"
        return takes

    def _why(self, need: Need, request: SessionRequest) -> str:
        return why(
            self.nodes, need, "" if request.pullable else request.image, self.group,
            volumes=request.volumes,
            guard=self.guard, held=self.held, head=self.head,
        )  # fmt: skip

    # ---- the head of the queue ---------------------------------------------------------------

    def _idle(self, node: NodeState) -> NodeState:
        """The node as it would be with nothing on it (made when first asked for)."""
        idle = self._idle_nodes.get(node.rank)
        if idle is None:
            idle = self._idle_nodes[node.rank] = NodeState(node.offer, node.rank, idle=True)
        idle.images = node.images  # with the keys ``want`` added since
        return idle

    def _fits_idle_node(self, node: NodeState, need: Need, image: str) -> bool:
        capacity = node.offer.capacity
        if (
            not node.available
            or (image and image not in node.images)
            or len(node.devs) < need.whole
        ):
            return False
        if capacity.cpu_milli < need.cpu or capacity.memory_bytes < need.mem:
            return False
        idle = self._idle(node)
        return idle.fits(need, image) or (
            need.fallback is not None and idle.fits(need.fallback, image)
        )

    def fits_idle(self, request: SessionRequest) -> bool:
        """Whether it would fit an idle available node (each kernel, for multi-node)."""
        shape = shape_of(request)
        multi = multi_node(request)
        image = self.keys(request)[-1]
        key = (image, multi, shape)
        known = self._idle_fit.get(key)
        if known is None:
            if multi:
                known = self._fits_idle_group(request)
            else:
                need = self.need(shape)
                known = any(self._fits_idle_node(n, need, image) for n in self.nodes)
            self._idle_fit[key] = known
        return known

    def _fits_idle_group(self, request: SessionRequest) -> bool:
        """A multi-node session on the whole group with nothing on it, placed as a pass
        would: its kernels compete for the same idle nodes, so each fitting somewhere alone
        is not enough (two 4-GPU kernels and one 4-GPU node never fit)."""
        idle = [replace(n.offer, free=n.offer.capacity, devices=_idle(n.offer)) for n in self.nodes]
        return isinstance(Pool(idle, self.policy, self.group, None).decide(request), Placed)

    def reserve(self, request: SessionRequest, before: tuple[str, str] | None) -> NodeState:
        """Hold the node closest to fitting ``request`` (single-node) for the rest of the pass:
        the one it held before if it still could fit there, else the one missing the least
        GPU, then cpu, then memory."""
        need, image = self.need(shape_of(request)), self.keys(request)[-1]
        candidates = [n for n in self.nodes if self._fits_idle_node(n, need, image)]
        chosen = None
        if before is not None and before[0] == request.session_id:
            chosen = next((n for n in candidates if n.offer.node_id == before[1]), None)
        if chosen is None:
            chosen = min(candidates, key=lambda n: (*_gap(n, need), n.rank))
        self.index.remove(chosen)
        self.held = chosen
        self.head = request.session_id
        return chosen


def _idle(offer: NodeOffer) -> tuple[DeviceState, ...]:
    return tuple(replace(d, whole=False, shared=0) for d in offer.devices)


def _gap(node: NodeState, need: Need) -> tuple[int, int, int]:
    gpu = max(0, need.whole - node.w) * FULL + max(0, need.min_r - node.r)
    return gpu, max(0, need.cpu - node.cpu), max(0, need.mem - node.mem)


def _placement(node: NodeState, take: Take, gpu: int) -> KernelPlacement:
    if not take:
        return KernelPlacement(node.offer.node_id)
    whole = gpu % FULL == 0
    return KernelPlacement(
        node.offer.node_id,
        tuple(d.share(amount, whole) for d, amount in take),
        numa_of(take),
    )
