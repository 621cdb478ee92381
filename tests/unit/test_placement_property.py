"""Properties of placement over random clusters and request streams: no device over 100, no
device both whole and shared, cpu and memory never over what is free, every placed kernel's
devices sum to its request, releasing gives back everything, a session that waits leaves no
trace, and the index chooses exactly what a scan of every node would."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from schemas.resources import ResourceSlots
from schemas.session import ClusterMode
from schemas.tenancy import AgentSelection, DeviceFill, GroupScheduling, HeadOfLine, QueuePolicy
from services.scheduler.placement import (
    KernelRequest,
    NodeOffer,
    Placed,
    Placer,
    SessionRequest,
    Waiting,
)
from services.scheduler.placement.nodes import Kind, Need, NodeState
from tests.unit.placement_support import GIB, check, node, settle

IMAGES = ("a", "b")
NO_STARVING = 7 * 24 * 3600


@st.composite
def clusters(draw: st.DrawFn) -> list[NodeOffer]:
    nodes = []
    for i in range(draw(st.integers(1, 6))):
        gpus = draw(st.integers(0, 6))
        states = draw(st.lists(st.sampled_from("fffws"), min_size=gpus, max_size=gpus))
        cpu = draw(st.integers(1, 32))
        mem = draw(st.integers(1, 128))
        nodes.append(
            node(
                f"n{i}",
                cpu,
                mem,
                gpus,
                used_cpu=draw(st.integers(0, cpu)) / 2,
                used_mem=draw(st.integers(0, mem // 2)),
                whole=[j for j, s in enumerate(states) if s == "w"],
                shared={j: draw(st.integers(1, 100)) for j, s in enumerate(states) if s == "s"},
                numa=draw(st.lists(st.sampled_from([None, 0, 1]), min_size=gpus, max_size=gpus)),
                mig=[j for j, s in enumerate(states) if s != "s" and draw(st.integers(0, 3)) == 0],
                images=tuple(draw(st.sets(st.sampled_from(IMAGES), min_size=1))),
                available=draw(st.integers(0, 5)) > 0,
                listed=draw(st.integers(0, 9)) > 0,
            )
        )
    return nodes


@st.composite
def streams(
    draw: st.DrawFn, modes: tuple[ClusterMode, ...] = tuple(ClusterMode)
) -> list[SessionRequest]:
    count = draw(st.integers(1, 12))
    orders = draw(st.permutations(range(count)))
    requests = []
    for i in range(count):
        kernels = tuple(
            KernelRequest(
                f"s{i}-k{j}",
                ResourceSlots(
                    cpu_milli=draw(st.integers(0, 8)) * 500,
                    memory_bytes=draw(st.integers(0, 8)) * GIB,
                    gpu_hundredths=draw(
                        st.sampled_from([0, 0, 10, 25, 50, 60, 100, 150, 200, 300])
                    ),
                ),
            )
            for j in range(draw(st.sampled_from([1, 1, 1, 2, 3])))
        )
        requests.append(
            SessionRequest(
                f"session-{i:04d}",
                draw(st.sampled_from(IMAGES)),
                kernels,
                priority=draw(st.integers(0, 2)),
                owner=draw(st.sampled_from(["x", "y", "z"])),
                order=orders[i],
                waiting_since=draw(st.integers(0, 600)),
                cluster_mode=draw(st.sampled_from(modes)),
            )
        )
    return requests


policies = st.builds(
    GroupScheduling,
    queue_policy=st.sampled_from(QueuePolicy),
    agent_selection=st.sampled_from(AgentSelection),
    head_of_line=st.sampled_from(HeadOfLine),
    starvation_after_s=st.sampled_from([0, 300, NO_STARVING]),
    fragmentation_guard=st.booleans(),
    device_fill=st.sampled_from(DeviceFill),
)


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
