"""The queue: priority, then FIFO / LIFO / DRF; the head of the line (block, backfill, the
starving head's reservation), and positions."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from placement import (
    Decision,
    NodeOffer,
    Placed,
    Placer,
    SessionRequest,
    Waiting,
    place,
)
from schemas.resources import ResourceSlots
from schemas.session import ClusterMode
from schemas.tenancy import GroupScheduling, HeadOfLine, QueuePolicy
from tests.unit.placement_support import ask, by_session, check, node, settle

BLOCK = GroupScheduling(head_of_line=HeadOfLine.BLOCK)
STARVING_AT_ONCE = GroupScheduling(starvation_after_s=0)


@dataclass(frozen=True)
class Case:
    policy: QueuePolicy
    requests: list[SessionRequest]
    order: list[str]
    """The sessions in the order they are decided (the order decisions come back in)."""


CASES = {
    "fifo: oldest first": Case(
        QueuePolicy.FIFO, [ask("b", order=2), ask("a", order=1), ask("c", order=3)], ["a", "b", "c"]
    ),
    "lifo: newest first": Case(
        QueuePolicy.LIFO, [ask("b", order=2), ask("a", order=1), ask("c", order=3)], ["c", "b", "a"]
    ),
    "fifo: priority before age": Case(
        QueuePolicy.FIFO,
        [ask("old", order=1), ask("urgent", order=3, priority=50), ask("mid", order=2)],
        ["urgent", "old", "mid"],
    ),
    "lifo: priority before age": Case(
        QueuePolicy.LIFO,
        [ask("new", order=3), ask("urgent", order=1, priority=50), ask("mid", order=2)],
        ["urgent", "new", "mid"],
    ),
    "drf: owners alternate, oldest first on a tie": Case(
        QueuePolicy.DRF,
        [
            ask("a1", owner="A", order=1),
            ask("a2", owner="A", order=2),
            ask("a3", owner="A", order=3),
            ask("b1", owner="B", order=4),
            ask("b2", owner="B", order=5),
        ],
        ["a1", "b1", "a2", "b2", "a3"],
    ),
    "drf: priority before share": Case(
        QueuePolicy.DRF,
        [ask("a1", owner="A", order=1), ask("b1", owner="B", order=2, priority=20)],
        ["b1", "a1"],
    ),
}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_queue_order(case: Case) -> None:
    nodes = [node("n1", cpu=64, mem=64)]
    decisions = place(case.requests, nodes, GroupScheduling(queue_policy=case.policy))
    assert [d.session_id for d in decisions] == case.order
    assert all(isinstance(d, Placed) for d in decisions)


def _drf_paper(policy: QueuePolicy) -> dict[str, int]:
    """The DRF paper's example: 9 CPUs and 18 GB; user A's tasks need <1 CPU, 4 GB>, user
    B's <3 CPU, 1 GB>; both have more tasks than fit."""
    nodes = [node("n1", cpu=9, mem=18)]
    requests = [ask(f"a{i}", cpu=1, mem=4, owner="A", order=i) for i in range(6)]
    requests += [ask(f"b{i}", cpu=3, mem=1, owner="B", order=10 + i) for i in range(6)]
    decisions = place(requests, nodes, GroupScheduling(queue_policy=policy))
    check(nodes, requests, decisions)
    placed = [d.session_id[0] for d in decisions if isinstance(d, Placed)]
    return {"A": placed.count("a"), "B": placed.count("b")}


def test_drf_gives_the_paper_allocation() -> None:
    assert _drf_paper(QueuePolicy.DRF) == {"A": 3, "B": 2}


def test_fifo_on_the_same_cluster_favours_the_first_asker() -> None:
    assert _drf_paper(QueuePolicy.FIFO) == {"A": 4, "B": 1}


def test_drf_counts_what_owners_already_hold() -> None:
    nodes = [node("n1", cpu=8, mem=32, gpus=1)]
    usage = {"heavy": ResourceSlots(cpu_milli=4000, memory_bytes=0, gpu_hundredths=0)}
    requests = [ask("h", owner="heavy", gpu=1, order=1), ask("l", owner="light", gpu=1, order=2)]
    decisions = place(requests, nodes, GroupScheduling(queue_policy=QueuePolicy.DRF), usage=usage)
    assert [d.session_id for d in decisions] == ["l", "h"]
    assert isinstance(decisions[0], Placed) and isinstance(decisions[1], Waiting)


def test_positions_count_those_left_waiting_in_queue_order() -> None:
    nodes = [node("n1", gpus=1)]
    requests = [ask(s, gpu=1, order=i) for i, s in enumerate(["a", "b", "c", "d"])]
    decisions = place(requests, nodes)
    assert [(d.session_id, d.position) for d in decisions if isinstance(d, Waiting)] == [
        ("b", 1),
        ("c", 2),
        ("d", 3),
    ]


# ---- the head of the line ------------------------------------------------------------------

HEAD = "bigsession-0001"


def _busy() -> list[NodeOffer]:
    return [node("n1", gpus=4, whole=[0, 1]), node("n2", gpus=4, whole=[0, 1, 2])]


def _head_and_smalls(since: float = 0.0) -> list[SessionRequest]:
    return [ask(HEAD, gpu=4, order=0, since=since)] + [
        ask(f"small-{i}", gpu=1, order=i) for i in range(1, 5)
    ]


def test_block_stops_everything_behind_a_head_that_fits_nowhere() -> None:
    decisions = place(_head_and_smalls(), _busy(), BLOCK, group="g")
    assert by_session(decisions) == {
        HEAD: "wait: no node in group g has 4 free GPUs (most free: 2)",
        **{
            f"small-{i}": "wait: waiting behind session bigsessi (head of the queue, blocking)"
            for i in range(1, 5)
        },
    }


def test_block_lets_sessions_ahead_of_the_head_through() -> None:
    requests = [ask("first", gpu=1, order=-1), *_head_and_smalls()]
    decisions = place(requests, _busy(), BLOCK, group="g")
    assert isinstance(decisions[0], Placed) and decisions[0].session_id == "first"


def test_a_head_that_can_never_fit_does_not_block() -> None:
    requests = [ask("huge", gpu=8, order=0), ask("small", gpu=1, order=1)]
    decisions = place(requests, _busy(), BLOCK, group="g")
    assert by_session(decisions)["small"] == "n2"


def test_a_multi_node_head_whose_kernels_never_fit_together_does_not_block() -> None:
    # Each 4-GPU kernel fits the one 4-GPU node alone, never both: waiting cannot help.
    nodes = [node("big", gpus=4), node("small", gpus=2)]
    huge = ask("huge", gpu=4, kernels=2, mode=ClusterMode.MULTI_NODE, order=0)
    decisions = place([huge, ask("after", gpu=1, order=1)], nodes, BLOCK, group="g")
    assert isinstance(decisions[0], Waiting) and decisions[0].session_id == "huge"
    assert by_session(decisions)["after"] in {"big", "small"}


def test_backfill_places_behind_a_head_that_is_not_starving() -> None:
    decisions = place(_head_and_smalls(since=0), _busy(), GroupScheduling(), group="g", now=299)
    assert [isinstance(d, Placed) for d in decisions] == [False, True, True, True, False]


def test_a_starving_head_reserves_the_node_closest_to_fitting_it() -> None:
    decisions = place(_head_and_smalls(since=0), _busy(), GroupScheduling(), group="g", now=300)
    assert by_session(decisions) == {
        HEAD: "wait: no node in group g has 4 free GPUs (most free: 2); node n1 is reserved for it",
        "small-1": "n2",
        "small-2": "wait: node n1 is reserved for session bigsessi (head of the queue, starving)",
        "small-3": "wait: node n1 is reserved for session bigsessi (head of the queue, starving)",
        "small-4": "wait: node n1 is reserved for session bigsessi (head of the queue, starving)",
    }


def test_the_reservation_stays_on_its_node_across_passes() -> None:
    placer = Placer()
    placer.place(_head_and_smalls(), _busy(), STARVING_AT_ONCE, group="g")
    # n2 is now closer (one GPU missing against two), yet n1 keeps draining for the head.
    closer = [node("n1", gpus=4, whole=[0, 1]), node("n2", gpus=4, whole=[0])]
    decisions = placer.place(_head_and_smalls(), closer, STARVING_AT_ONCE, group="g")
    assert {by_session(decisions)[f"small-{i}"] for i in (1, 2, 3)} == {"n2"}


def test_a_starving_multi_node_head_holds_the_group() -> None:
    # Two 3-GPU kernels: one on each node once they drain (three never could: two 4-GPU nodes).
    head = ask(HEAD, gpu=3, kernels=2, mode=ClusterMode.MULTI_NODE, order=0)
    decisions = place([head, ask("small", gpu=1, order=1)], _busy(), STARVING_AT_ONCE, group="g")
    assert by_session(decisions)["small"] == (
        "wait: waiting behind session bigsessi "
        "(head of the queue, starving: the group holds still for it)"
    )


def _stream(policy: GroupScheduling, passes: int = 40) -> int | None:
    """Two 4-GPU nodes, busy with 1-GPU sessions that end one per pass; two small sessions
    arrive every pass. A 4-GPU session arrives at pass 1. Returns the pass it is placed in."""
    nodes = [node("n1", cpu=64, mem=256, gpus=4), node("n2", cpu=64, mem=256, gpus=4)]
    placer = Placer()
    waiting = [ask(f"small-{i:03d}", gpu=1, order=i) for i in range(8)]
    running: dict[str, tuple[int, SessionRequest, Decision]] = {}
    order = 8
    for t in range(passes):
        now = t * 60.0
        ended = [(r, d) for end, r, d in running.values() if end == t]
        nodes = settle(nodes, [r for r, _ in ended], [d for _, d in ended], sign=-1)
        for r, _ in ended:
            del running[r.session_id]
        if t == 1:
            waiting.append(ask(HEAD, gpu=4, order=order, since=now))
        waiting += [ask(f"small-{order + i:03d}", gpu=1, order=order + 1 + i) for i in range(2)]
        order += 3
        decisions = placer.place(waiting, nodes, policy, group="g", now=now)
        nodes = check(nodes, waiting, decisions)
        asked = {r.session_id: r for r in waiting}
        for d in decisions:
            if isinstance(d, Placed):
                if d.session_id == HEAD:
                    return t
                # The first eight end at passes 1..8; later ones run eight passes.
                lasts = int(d.session_id[-3:]) + 1 if t == 0 else 8
                running[d.session_id] = (t + lasts, asked[d.session_id], d)
        waiting = [r for r in waiting if r.session_id not in running]
    return None


def test_without_reservations_a_large_session_starves_under_a_stream_of_small_ones() -> None:
    assert _stream(GroupScheduling(starvation_after_s=7 * 24 * 3600)) is None


def test_a_starving_head_is_placed_once_its_reserved_node_drains() -> None:
    placed_at = _stream(GroupScheduling(starvation_after_s=180))
    assert placed_at is not None
    # Starving from pass 4 (180 s after it arrived at pass 1); its node drains in 8 passes.
    assert 4 < placed_at <= 4 + 8


def test_block_places_the_large_session_as_soon_as_a_node_drains() -> None:
    placed_at = _stream(BLOCK)
    assert placed_at is not None and placed_at <= 9
