"""Properties of placement over random clusters and request streams: no device over 100, no
device both whole and shared, cpu and memory never over what is free, every placed kernel's
devices sum to its request, releasing gives back everything, a session that waits leaves no
trace, and the index chooses exactly what a scan of every node would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from placement import (
    NodeOffer,
    Placed,
    Placer,
    SessionRequest,
    Waiting,
)
from placement.nodes import Kind, Need, NodeState
from schemas.session import ClusterMode
from schemas.tenancy import AgentSelection, GroupScheduling, HeadOfLine, QueuePolicy
from tests.unit.placement_strategies import NO_STARVING, clusters, policies, streams
from tests.unit.placement_support import check, settle


@settings(max_examples=300, deadline=None)
@given(clusters(), streams(), policies, st.data())
def test_passes_keep_every_rule_and_releasing_gives_back_everything(
    nodes: list[NodeOffer],
    requests: list[SessionRequest],
    policy: GroupScheduling,
    data: st.DataObject,
) -> None:
    placer = Placer()
    for p in range(3):
        now = 300.0 * p
        decisions = placer.place(requests, nodes, policy, group="g", now=now)
        after = check(nodes, requests, decisions)  # devices, cpu, memory, sums, NUMA
        assert settle(after, requests, decisions, sign=-1) == nodes
        # Some of what was placed ends; the rest keeps running into the next pass.
        placed = [d for d in decisions if isinstance(d, Placed)]
        ends = data.draw(st.sets(st.integers(0, len(placed) - 1))) if placed else set()
        ending = [placed[i] for i in ends]
        nodes = settle(after, requests, ending, sign=-1)
        requests = [r for r in requests if r.session_id not in {d.session_id for d in placed}]


@settings(max_examples=200, deadline=None)
@given(clusters(), streams(), policies, st.data())
def test_a_placer_that_keeps_its_nodes_decides_as_one_that_makes_them_anew(
    nodes: list[NodeOffer],
    requests: list[SessionRequest],
    policy: GroupScheduling,
    data: st.DataObject,
) -> None:
    """Between passes a node's offer stays the same object while its ledger does not move
    (as the scheduler's kept offers do): the kept pool renews only the nodes that changed or
    that the last pass took from, and decides exactly what a pool made anew decides; also for
    a pass decided again on unchanged nodes (a commit that failed)."""
    kept, anew = Placer(), Placer()
    for p in range(4):
        now = 300.0 * p
        ours = kept.place(requests, nodes, policy, group="g", now=now)
        anew._pool = None  # every node made from its offer, as before pools were kept
        assert anew.place(requests, nodes, policy, group="g", now=now) == ours
        if data.draw(st.booleans()):
            continue  # not committed: the same nodes again
        after = check(nodes, requests, ours)
        placed = [d for d in ours if isinstance(d, Placed)]
        ends = data.draw(st.sets(st.integers(0, len(placed) - 1))) if placed else set()
        changed = settle(after, requests, [placed[i] for i in ends], sign=-1)
        # An unchanged node keeps its very offer (a node where a session was placed and
        # ended again too: the pool took from it, so it is made anew all the same).
        nodes = [old if old == new else new for old, new in zip(nodes, changed, strict=True)]
        requests = [r for r in requests if r.session_id not in {d.session_id for d in placed}]


@settings(max_examples=300, deadline=None)
@given(clusters(), streams(), policies)
def test_a_session_that_waits_leaves_no_trace(
    nodes: list[NodeOffer], requests: list[SessionRequest], policy: GroupScheduling
) -> None:
    policy = policy.model_copy(update={"starvation_after_s": NO_STARVING})
    decisions = Placer().place(requests, nodes, policy, group="g")
    placed = [d for d in decisions if isinstance(d, Placed)]
    alone = [r for r in requests if r.session_id in {d.session_id for d in placed}]
    assert Placer().place(alone, nodes, policy, group="g") == placed


def _scan(
    requests: list[SessionRequest], offers: list[NodeOffer], policy: GroupScheduling
) -> list[str | None]:
    """The reference: every node looked at for every decision, ordered by the documented
    keys; the same device allocation as the engine."""
    nodes = [NodeState(o, rank) for rank, o in enumerate(sorted(offers, key=lambda o: o.node_id))]
    cursor, chosen_ids = -1, []
    selection = policy.agent_selection
    for request in sorted(requests, key=lambda r: (-r.priority, r.order, r.session_id)):
        shape = [
            (k.slots.cpu_milli, k.slots.memory_bytes, k.slots.gpu_hundredths)
            for k in request.kernels
        ]
        first = Need(shape, guard=policy.fragmentation_guard, fill=policy.device_fill)
        chosen = None
        for need in [first] if first.fallback is None else [first, first.fallback]:
            fits = [n for n in nodes if n.available and n.fits(need, request.image)]
            if not fits:
                continue
            if selection is AgentSelection.ROUND_ROBIN:
                if need.kind is Kind.CPU:
                    low = min((n.w, n.r) for n in fits)
                    fits = [n for n in fits if (n.w, n.r) == low]
                chosen = min(fits, key=lambda n: (n.rank - cursor - 1) % len(nodes))
            else:
                sign = 1 if selection is AgentSelection.CONCENTRATED else -1
                gsign = 1 if need.kind is Kind.CPU else sign

                def key(
                    n: NodeState, s: int = sign, g: int = gsign, k: Kind = need.kind
                ) -> tuple[int, ...]:
                    gpu = (n.r, n.w) if k is Kind.SHARES else (n.w, n.r)
                    return (g * gpu[0], g * gpu[1], s * n.cpu, n.rank)

                chosen = min(fits, key=key)
            assert chosen.hold(need) is not None
            cursor = chosen.rank
            break
        chosen_ids.append(chosen.offer.node_id if chosen else None)
    return chosen_ids


@settings(max_examples=400, deadline=None)
@given(clusters(), streams(modes=(ClusterMode.SINGLE_NODE,)), policies)
def test_the_index_chooses_what_a_scan_of_every_node_would(
    nodes: list[NodeOffer], requests: list[SessionRequest], policy: GroupScheduling
) -> None:
    policy = policy.model_copy(
        update={
            "queue_policy": QueuePolicy.FIFO,
            "head_of_line": HeadOfLine.BACKFILL,
            "starvation_after_s": NO_STARVING,
        }
    )
    decisions = Placer().place(requests, nodes, policy, group="g")
    got = [
        None if isinstance(d, Waiting) else d.placements[next(iter(d.placements))]
        for d in decisions
    ]
    assert got == _scan(requests, nodes, policy)
