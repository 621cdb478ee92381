"""Builders for placement tests (small clusters in a line each) and a checker of the rules
every placement must keep, used by the table, property and size tests."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace

from placement import (
    Decision,
    DeviceState,
    KernelRequest,
    NodeOffer,
    Placed,
    SessionRequest,
    Waiting,
)
from schemas.resources import ResourceSlots
from schemas.session import ClusterMode

GIB = 1 << 30
IMAGE = "img"


def slots(cpu: float = 0, mem: float = 0, gpu: float = 0) -> ResourceSlots:
    return ResourceSlots(
        cpu_milli=round(cpu * 1000), memory_bytes=round(mem * GIB), gpu_hundredths=round(gpu * 100)
    )


def node(
    node_id: str,
    cpu: float = 8,
    mem: float = 32,
    gpus: int = 0,
    *,
    used_cpu: float = 0,
    used_mem: float = 0,
    whole: Iterable[int] = (),
    shared: Mapping[int, int] | None = None,
    numa: Sequence[int | None] | None = None,
    mig: Iterable[int] = (),
    images: tuple[str, ...] = (IMAGE,),
    available: bool = True,
    listed: bool = True,
    volumes: tuple[str, ...] = (),
) -> NodeOffer:
    """``gpus`` devices (index 0..n-1); ``whole``: indices held whole; ``shared``: index ->
    hundredths held as shares; ``numa``: each device's NUMA node; ``listed`` False: the node
    reports GPU capacity but no devices; ``volumes``: the storage volumes mounted there."""
    whole, mig, shared = set(whole), set(mig), dict(shared or {})
    devices = tuple(
        DeviceState(
            index=i,
            uuid=f"{node_id}-gpu{i}",
            numa_node=numa[i] if numa is not None else None,
            whole=i in whole,
            shared=shared.get(i, 0),
            mig=i in mig,
        )
        for i in range(gpus)
    )
    used_gpu = sum(100 if d.whole else d.shared for d in devices)
    capacity = slots(cpu, mem, gpus)
    free = ResourceSlots(
        cpu_milli=capacity.cpu_milli - round(used_cpu * 1000),
        memory_bytes=capacity.memory_bytes - round(used_mem * GIB),
        gpu_hundredths=capacity.gpu_hundredths - used_gpu,
    )
    return NodeOffer(
        node_id, node_id, capacity, free, frozenset(images), available,
        devices if listed else (), frozenset(volumes),
    )  # fmt: skip


def ask(
    session_id: str,
    cpu: float = 1,
    mem: float = 1,
    gpu: float = 0,
    *,
    image: str = IMAGE,
    kernels: int = 1,
    priority: int = 10,
    owner: str = "",
    order: int = 0,
    since: float = 0.0,
    mode: ClusterMode = ClusterMode.SINGLE_NODE,
    volumes: tuple[str, ...] = (),
    account: tuple[str, str, str] = ("", "", ""),
) -> SessionRequest:
    """``volumes``: those its folders lie on; ``account``: its (domain, project, user)."""
    return SessionRequest(
        session_id,
        image,
        tuple(KernelRequest(f"{session_id}-k{i}", slots(cpu, mem, gpu)) for i in range(kernels)),
        priority=priority,
        owner=owner,
        order=order,
        waiting_since=since,
        cluster_mode=mode,
        volumes=frozenset(volumes),
        account=account,
    )


def outcome(decision: Decision) -> str:
    """The node of the first kernel, or "wait: <reason>"."""
    if isinstance(decision, Waiting):
        return f"wait: {decision.reason}"
    return next(iter(decision.placements.values()))


def by_session(decisions: Iterable[Decision]) -> dict[str, str]:
    return {d.session_id: outcome(d) for d in decisions}


def devices_of(decision: Decision) -> list[list[tuple[int, int, bool]]]:
    """Per kernel: (device index, hundredths, whole)."""
    assert isinstance(decision, Placed), decision
    return [
        [(d.index, d.hundredths, d.whole) for d in k.devices] for k in decision.kernels.values()
    ]


# ---- the ledger's view: apply and release allocations ------------------------------------


def settle(
    nodes: Sequence[NodeOffer],
    requests: Sequence[SessionRequest],
    decisions: Iterable[Decision],
    sign: int = 1,
) -> list[NodeOffer]:
    """The nodes after the placed sessions' allocations are taken (``sign`` 1) or given
    back (-1), as a node ledger would; asserts every rule a ledger checks on the way."""
    wanted = {k.kernel_id: k.slots for r in requests for k in r.kernels}
    offers = {n.node_id: n for n in nodes}
    cpu = {n.node_id: n.free.cpu_milli for n in nodes}
    mem = {n.node_id: n.free.memory_bytes for n in nodes}
    gpu = {n.node_id: n.free.gpu_hundredths for n in nodes}
    whole_held = {n.node_id: {d.index: d.whole for d in n.devices} for n in nodes}
    shared = {n.node_id: {d.index: d.shared for d in n.devices} for n in nodes}
    mig = {n.node_id: {d.index: d.mig for d in n.devices} for n in nodes}
    uuids = {n.node_id: {d.index: d.uuid for d in n.devices} for n in nodes}
    for decision in decisions:
        if not isinstance(decision, Placed):
            continue
        for kernel_id, placed in decision.kernels.items():
            need = wanted[kernel_id]
            node_id = placed.node_id
            assert offers[node_id].available
            cpu[node_id] -= sign * need.cpu_milli
            mem[node_id] -= sign * need.memory_bytes
            gpu[node_id] -= sign * need.gpu_hundredths
            assert sum(d.hundredths for d in placed.devices) == need.gpu_hundredths
            whole = need.gpu_hundredths % 100 == 0
            assert len({d.index for d in placed.devices}) == len(placed.devices)
            for share in placed.devices:
                i = share.index
                assert share.uuid == uuids[node_id][share.index]
                assert share.whole is whole
                if whole:
                    assert share.hundredths == 100
                    assert whole_held[node_id][i] is (sign < 0) and shared[node_id][i] == 0
                    whole_held[node_id][i] = sign > 0
                else:
                    assert not whole_held[node_id][i], "shares on a whole-held device"
                    assert not mig[node_id][i], "shares on a MIG device"
                    shared[node_id][i] += sign * share.hundredths
                    assert 0 <= shared[node_id][i] <= 100, "a device over 100"
            numas = {
                d.numa_node
                for d in offers[node_id].devices
                if d.index in {s.index for s in placed.devices}
            }
            expected = numas.pop() if len(numas) == 1 else None
            assert placed.numa_node == (expected if placed.devices else None)
    out = []
    for n in nodes:
        assert cpu[n.node_id] >= 0 and mem[n.node_id] >= 0, "cpu or memory over capacity"
        devices = tuple(
            replace(d, whole=whole_held[n.node_id][d.index], shared=shared[n.node_id][d.index])
            for d in n.devices
        )
        used = sum(100 if d.whole else d.shared for d in devices)
        assert not devices or gpu[n.node_id] == n.capacity.gpu_hundredths - used
        free = ResourceSlots(
            cpu_milli=cpu[n.node_id], memory_bytes=mem[n.node_id], gpu_hundredths=gpu[n.node_id]
        )
        out.append(replace(n, free=free, devices=devices))
    return out


def check(
    nodes: Sequence[NodeOffer], requests: Sequence[SessionRequest], decisions: Sequence[Decision]
) -> list[NodeOffer]:
    """Every rule a pass must keep; returns the nodes after the pass."""
    assert sorted(d.session_id for d in decisions) == sorted(r.session_id for r in requests)
    asked = {r.session_id: r for r in requests}
    positions = [d.position for d in decisions if isinstance(d, Waiting)]
    assert positions == list(range(1, len(positions) + 1))
    for decision in decisions:
        if isinstance(decision, Placed):
            request = asked[decision.session_id]
            assert list(decision.kernels) == [k.kernel_id for k in request.kernels]
            chosen = {decision.kernels[k.kernel_id].node_id for k in request.kernels}
            if request.cluster_mode is ClusterMode.SINGLE_NODE:
                assert len(chosen) == 1
            offers = {n.node_id: n for n in nodes}
            # A registry's image may go to a node without it (it is pulled there).
            assert request.pullable or all(request.image in offers[n].images for n in chosen)
            assert all(request.volumes <= offers[n].volumes for n in chosen)
    return settle(nodes, requests, decisions)
