"""Placement step of a decision pass; writes ``ev.node.<id>`` and ``ev.session.<id>``.

One resource group's waiting sessions (admitted earlier, or by this very pass) go through
the group's placer (``placement``, pure), and each decision becomes working-copy changes —
device-level allocations on the node ledgers (each carrying the session's mounts and its
group's sandbox, and for a cluster session on several nodes its overlay network:
``rules.cluster_network``) and the session's ``SessionScheduled``, or a pending reason.

Writes (through the pass's workspace) ``ev.node.<id>`` (``ResourcesAllocated``),
``ev.session.<id>`` (``SessionScheduled``, ``SessionPendingReasonChanged``, and
``SessionAdmitted`` for what this pass admitted and did not place) and ``ev.quota.<id>``
(the reservations of what this pass admitted: ``place_writes``).
"""

from __future__ import annotations

import logging
from collections.abc import Collection
from datetime import datetime

from commands.errors import DomainError
from commands.node.aggregate import Node
from commands.session.aggregate import Session
from commands.unit_of_work import working_copy
from placement import (
    DeviceState,
    KernelPlacement,
    KernelRequest,
    NodeOffer,
    Placed,
    Placer,
    SessionRequest,
    Waiting,
)
from placement.fairshare import FairShareInput
from placement.reasons import while_waiting, with_fair_share
from schemas.cluster_network import MASTER_PORT, ClusterNetwork, local_rank
from schemas.images import ImageSource
from schemas.resources import ResourceSlots
from schemas.sandbox import Sandbox
from schemas.session import SessionSpec
from schemas.tenancy import GroupScheduling, QueuePolicy
from services.scheduler.rules.cluster_network import cluster_network, free_slot, slot_of
from services.scheduler.state import SchedulerState, TrackedSession
from services.scheduler.state.model import AgentInfo, KeptOffer
from services.scheduler.steps.common import cause_of
from services.scheduler.steps.place_writes import PlacementRun, write_admissions
from services.scheduler.workspace import Workspace

log = logging.getLogger(__name__)


def place_group(
    state: SchedulerState,
    group: str,
    waiting: list[str],
    space: Workspace,
    now: datetime,
    fresh: Collection[str] = (),
) -> list[str]:
    """Place what fits of ``waiting`` (PENDING sessions of ``group``: admitted, or among
    ``fresh``, decided by this pass's admission and not yet admitted) and note why the rest
    waits. Returns the sessions left waiting, in queue order.

    The writes go in this order: the placements, with the reservations of the fresh ones
    among them (``place_writes``), then the admissions of the fresh sessions left waiting,
    then the pending reasons. A replay of the fair-share rule takes the pass's queue from what
    it has read when it meets a reason: every session the pass placed is seen by then."""
    policy = state.directory.group_scheduling(group)
    offers = [
        offer_of(state, node)
        for node in (space.peek_node(node_id) for node_id in [*state.nodes, *space.new_nodes])
        if node is not None and node.resource_group == group
    ]
    sources = {sid: source_for(state, state.sessions[sid].session, group) for sid in waiting}
    requests = [
        request_of(state.sessions[sid], now, pullable=sources[sid] is not None) for sid in waiting
    ]
    usage = _usage(state, offers) if policy.queue_policy is QueuePolicy.DRF else None
    fair = None
    if policy.queue_policy is QueuePolicy.FAIR_SHARE:
        fair = _fair(state, group, policy, now)
    placer = state.placers.setdefault(group, Placer())
    decisions = placer.place(
        requests, offers, policy, group=group, usage=usage, now=now.timestamp(), fair=fair
    )
    placed = [d for d in decisions if isinstance(d, Placed)]
    unplaced = [d for d in decisions if isinstance(d, Waiting)]
    run = PlacementRun(state, space, now)
    failed: set[str] = set()
    for decision in placed:
        session = space.session(decision.session_id)
        assert session is not None
        admitting = session.id in fresh
        run.make_room(session, kernels=len(session.kernel_ids), fresh=admitting)
        source = sources[session.id]
        nodes = _allocate(state, session, decision, space, now, policy.sandbox, source)
        if nodes is None:
            failed.add(session.id)
            if admitting:
                session.admit("admitted", now)
                run.add(session, [], fresh=True)
            continue
        hosts = ", ".join(sorted({node.hostname or node.id for node in nodes}))
        session.schedule(decision.placements, f"placed on {hosts}", now)
        run.add(session, nodes, fresh=admitting)
    run.flush()
    write_admissions(state, space, [w.session_id for w in unplaced if w.session_id in fresh], now)
    for wait in unplaced:
        if wait.session_id in state.preempting:
            continue  # it says what it waits for: its victims to stop
        session = space.session(wait.session_id)
        assert session is not None
        reason = while_waiting(wait.reason)
        standing = wait.fair_share.rounded() if wait.fair_share else None
        if standing is not None:
            reason = with_fair_share(reason, standing)
        if session.note_pending_reason(reason, now, fair_share=standing):
            space.unit(cause_of(state.sessions[session.id]), session)
    return [d.session_id for d in decisions if not isinstance(d, Placed) or d.session_id in failed]


def source_for(state: SchedulerState, session: Session, group: str) -> ImageSource | None:
    """Where its image is pulled from, if a registry has it (``Directory.image_source``)."""
    owner = session.owner
    project = owner.project_id if owner is not None else None
    return state.directory.image_source(session.spec.image, project, group)


def _allocate(
    state: SchedulerState,
    session: Session,
    decision: Placed,
    space: Workspace,
    now: datetime,
    sandbox: Sandbox,
    source: ImageSource | None,
) -> list[Node] | None:
    """Every kernel's allocation on its node's working copy, or none: a refused allocation (a
    placement bug) leaves no half decision behind. ``Node.allocate`` checks before it records,
    so one allocation is all or nothing by itself; several are tried on scratch copies first."""
    spec = session.spec
    trial: dict[str, Node] = {}
    for node_id in dict.fromkeys(decision.placements.values()):
        node = space.peek_node(node_id)
        if node is None:
            log.error("placement of %s names unknown node %s; left waiting", session.id, node_id)
            return None
        trial[node_id] = node
    cluster: ClusterNetwork | None = None
    if len(trial) > 1:
        cluster = _overlay(state, space, session, decision)
        if cluster is None:
            log.error("no overlay slot is free for %s; left waiting", session.id)
            return None
    try:
        if len(spec.kernels) > 1:
            scratch = {n: working_copy(node) for n, node in trial.items()}
            _apply(session, spec, decision, scratch, now, sandbox, source, cluster)
        ledgers = {node_id: space.node(node_id) for node_id in trial}
        chosen = {node_id: node for node_id, node in ledgers.items() if node is not None}
        _apply(session, spec, decision, chosen, now, sandbox, source, cluster)
    except DomainError as exc:
        log.error("placement of %s refused by the ledger (%s); left waiting", session.id, exc)
        return None
    return list(chosen.values())


def _apply(
    session: Session,
    spec: SessionSpec,
    decision: Placed,
    ledgers: dict[str, Node],
    now: datetime,
    sandbox: Sandbox,
    source: ImageSource | None,
    cluster: ClusterNetwork | None,
) -> None:
    hosts = cluster_hosts(len(spec.kernels))
    nodes = [decision.kernels[kernel_id].node_id for kernel_id in session.kernel_ids]
    for index, (kernel_id, kernel) in enumerate(zip(session.kernel_ids, spec.kernels, strict=True)):
        placed: KernelPlacement = decision.kernels[kernel_id]
        env = dict(spec.env)
        if len(spec.kernels) > 1:
            env.update(cluster_env(hosts, index, local_rank(nodes, index)))
        ledgers[placed.node_id].allocate(
            kernel_id, session.id, kernel.resources, now,
            image=spec.image, command=spec.command, env=env,
            devices=placed.devices, numa_node=placed.numa_node,
            hostname=hosts[index] if len(spec.kernels) > 1 else "",
            mounts=session.mounts, sandbox=sandbox, source=source,
            cluster=cluster, service_port=spec.service_port,
        )  # fmt: skip


def _overlay(
    state: SchedulerState, space: Workspace, session: Session, decision: Placed
) -> ClusterNetwork | None:
    """The overlay of a session placed on several nodes, in the lowest slot that no kernel on
    any ledger (this pass's working copies included) holds; None when all are held."""
    used: set[int] = set()
    for node_id in [*state.nodes, *space.new_nodes]:
        node = space.peek_node(node_id)
        if node is not None:
            used.update(slot_of(a.cluster) for a in node.allocations.values() if a.cluster)
    slot = free_slot(used)
    if slot is None:
        return None
    hosts = cluster_hosts(len(session.kernel_ids))
    kernels = []
    for hostname, kernel_id in zip(hosts, session.kernel_ids, strict=True):
        node_id = decision.kernels[kernel_id].node_id
        agent = state.agents.get(node_id)
        kernels.append((hostname, node_id, agent.address if agent is not None else ""))
    return cluster_network(slot, kernels)


def cluster_hosts(size: int) -> list[str]:
    """Hostnames of a cluster session's kernels: ``main1``, then ``sub1``, ``sub2``..."""
    return ["main1", *(f"sub{i}" for i in range(1, size))]


def cluster_env(hosts: list[str], index: int, local_rank: int = 0) -> dict[str, str]:
    """A cluster kernel's variables: Jetyard's, and those torch.distributed's ``env://`` and
    launchers read. Ranks follow the host names: main1 is 0, sub1 is 1…; ``LOCAL_RANK`` is the
    kernel's place among its session's kernels on its own node."""
    return {
        "JETYARD_CLUSTER_ROLE": "main" if index == 0 else "sub",
        "JETYARD_CLUSTER_INDEX": str(index),
        "JETYARD_CLUSTER_RANK": str(index),
        "JETYARD_CLUSTER_HOST": hosts[index],
        "JETYARD_CLUSTER_HOSTS": ",".join(hosts),
        "JETYARD_CLUSTER_SIZE": str(len(hosts)),
        "MASTER_ADDR": hosts[0],
        "MASTER_PORT": str(MASTER_PORT),
        "WORLD_SIZE": str(len(hosts)),
        "RANK": str(index),
        "LOCAL_RANK": str(local_rank),
    }


def offer_of(state: SchedulerState, node: Node) -> NodeOffer:
    """What placement is offered of a node. A committed ledger's offer is kept until the
    ledger moves to another version or its agent record is replaced (``state.offers``); a
    working copy (this pass changed it) gets a fresh one, never kept."""
    agent = state.agents.get(node.id)
    committed = state.nodes.get(node.id) is node
    kept = state.offers.get(node.id) if committed else None
    same = kept is not None and kept.node is node and kept.agent is agent
    if kept is not None and same and kept.version == node.version:
        return kept.offer
    offer = _offer(node, agent)
    if committed:
        state.offers[node.id] = KeptOffer(node, node.version, agent, offer)
    return offer


def _offer(node: Node, agent: AgentInfo | None) -> NodeOffer:
    use = node.device_use()
    devices = tuple(
        DeviceState(
            index=d.index,
            uuid=d.uuid,
            numa_node=d.numa_node,
            whole=use.get(d.index, (False, 0))[0],
            shared=use.get(d.index, (False, 0))[1],
            mig=d.mig_enabled,
        )
        for d in node.devices
    )
    return NodeOffer(
        node_id=node.id,
        hostname=node.hostname,
        capacity=node.capacity,
        free=node.free,
        images=agent.images if agent is not None else frozenset(),
        available=node.schedulable,
        devices=devices,
        volumes=agent.volumes if agent is not None else frozenset(),
    )


def request_of(tracked: TrackedSession, now: datetime, *, pullable: bool = False) -> SessionRequest:
    session = tracked.session
    spec = session.spec
    kernels = tuple(
        KernelRequest(kernel_id, kernel.resources)
        for kernel_id, kernel in zip(session.kernel_ids, spec.kernels, strict=True)
    )
    return SessionRequest(
        session_id=session.id,
        image=spec.image,
        kernels=kernels,
        priority=spec.priority,
        owner=session.owner.access_key if session.owner is not None else "",
        account=tracked.account,  # as the usage book counts it
        order=tracked.order,
        # Admitted in this very pass (not folded yet): it has waited for nothing so far.
        waiting_since=tracked.placeable_since or now.timestamp(),
        cluster_mode=spec.cluster_mode,
        # Most sessions mount nothing: no set is built for them.
        volumes=frozenset(m.volume for m in session.mounts) if session.mounts else frozenset(),
        pullable=pullable,
    )


def _usage(state: SchedulerState, offers: list[NodeOffer]) -> dict[str, ResourceSlots]:
    """What each owner (access key) holds on the group's nodes: DRF's dominant shares."""
    usage: dict[str, list[int]] = {}
    for offer in offers:
        node = state.nodes.get(offer.node_id)
        if node is None:
            continue
        for allocation in node.allocations.values():
            tracked = state.sessions.get(allocation.session_id)
            owner = tracked.session.owner if tracked is not None else None
            if owner is None:
                continue
            held = usage.setdefault(owner.access_key, [0, 0, 0])
            held[0] += allocation.slots.cpu_milli
            held[1] += allocation.slots.memory_bytes
            held[2] += allocation.slots.gpu_hundredths
    return {
        key: ResourceSlots(cpu_milli=c, memory_bytes=m, gpu_hundredths=g)
        for key, (c, m, g) in usage.items()
    }


def _fair(
    state: SchedulerState, group: str, policy: GroupScheduling, now: datetime
) -> FairShareInput:
    """Each owner's decayed usage of the group now, and the shares the directory gives
    (O(owners) per pass: the book keeps one accumulator per owner)."""
    usage = state.usage.until(state.position).usage(group, now.timestamp())
    return FairShareInput(usage, policy.fair_share, state.directory.fair_share)
