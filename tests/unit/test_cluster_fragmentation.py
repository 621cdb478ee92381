"""The operator console's fragmentation notes (``services.gateway.cluster.fragmentation``):
tables of nodes and waiting requests, and the sentence each request gets: the group has the
GPUs (or cores) in total but no node has them in one piece, it is short of them, or there is
room for it now."""

from __future__ import annotations

import pytest

from schemas.resources import ResourceSlots
from schemas.tenancy import GroupScheduling
from services.gateway.cluster.fragmentation import Ask, Device, Kind, Room, explain

GIB = 1 << 30
X = "session x of alice@example.org"
W = "session w of carol@example.org"


def room(name: str, *devices: Device, cpu: int = 32_000, memory: int = 256 * GIB) -> Room:
    """A node of 64 cores and 512 GiB in all, ``cpu`` and ``memory`` of them free."""
    return Room(name, "default", True, cpu, memory, devices, capacity=_capacity(devices))


def _capacity(devices: tuple[Device, ...]) -> ResourceSlots:
    return ResourceSlots(
        cpu_milli=64_000, memory_bytes=512 * GIB, gpu_hundredths=100 * len(devices)
    )


def free(index: int) -> Device:
    return Device(index)


def whole(index: int, who: str = X) -> Device:
    return Device(index, whole=True, holders=((who, 100),))


def shared(index: int, *holders: tuple[str, int]) -> Device:
    return Device(index, shared=sum(h for _, h in holders), holders=holders)


def ask(gpu: int, *, kernels: int = 1, single: bool = True, cpu: int = 1000) -> Ask:
    return Ask(
        "s-big", "session big of bob@example.org", "default", cpu, GIB, gpu,
        kernels=kernels, single_node=single, place="1st of 1 waiting",
    )  # fmt: skip


BIG = ResourceSlots(cpu_milli=64_000, memory_bytes=512 * GIB, gpu_hundredths=800)

# The example: 4.5 GPUs free over three nodes, none with 4.
CLUSTER = [
    room("node-a", whole(0), whole(1), free(2), free(3)),
    room("node-b", free(0), shared(1, (W, 50))),
    room("node-c", free(0)),
]


def test_the_free_gpus_are_spread_so_a_whole_request_cannot_fit() -> None:
    (note,) = explain(CLUSTER, [ask(400)], {})
    assert note.kind is Kind.FRAGMENTED
    assert (note.free_gpu_hundredths, note.need_gpu_hundredths) == (450, 400)
    assert note.text == (
        "4.5 GPUs are free in group default, but no node has 4 whole GPUs free: "
        "node-a has 2 whole GPUs free (2 held by session x of alice@example.org); "
        "node-b has 1 whole GPU free and 0.5 of a shared GPU "
        "(GPU 1: 0.5 held by session w of carol@example.org); "
        "node-c has 1 whole GPU free. "
        "The waiting 4-GPU request of session big of bob@example.org (1st of 1 waiting) "
        "cannot fit."
    )


@pytest.mark.parametrize(
    ("gpu", "kernels", "single", "kind", "where"),
    [
        (100, 5, False, Kind.SHORT, "asks 5 GPUs in all; 4.5 GPUs are free"),
        (500, 1, True, Kind.OVERSIZED, "no node in group default has 5 GPUs even when idle"),
        (200, 1, True, Kind.FITS, "room for session big of bob@example.org now on node-a"),
        (150, 1, True, Kind.FITS, "now on node-b"),  # shares over its free GPU and its half
        (100, 2, True, Kind.FITS, "now on node-a"),
        (100, 3, True, Kind.FRAGMENTED, "no node has 3 whole GPUs free"),
        (100, 3, False, Kind.FITS, "now on node-b, node-c, node-a"),  # dispersed
        (100, 4, False, Kind.FITS, "now on node-b, node-c, node-a"),
        (100, 5, False, Kind.SHORT, "asks 5 GPUs in all"),
        (50, 1, True, Kind.FITS, "now on node-b"),  # where the scheduler would put it
        (0, 1, True, Kind.FITS, "now on node-b"),
    ],
)
def test_each_request_gets_the_sentence_of_its_case(
    gpu: int, kernels: int, single: bool, kind: Kind, where: str
) -> None:
    (note,) = explain(CLUSTER, [ask(gpu, kernels=kernels, single=single)], {})
    assert note.kind is kind
    assert where in note.text


def test_shares_under_the_guard_need_their_devices_and_without_it_any_room() -> None:
    # FILL put two 0.6 shares on two GPUs: 2.8 free, but 2.5 as shares needs 3 GPUs.
    node = room("gpu-1", shared(0, (X, 60)), shared(1, (W, 60)), free(2), free(3))
    (guarded,) = explain([node], [ask(250)], {"default": GroupScheduling(fragmentation_guard=True)})
    assert guarded.kind is Kind.FRAGMENTED
    assert guarded.text.startswith(
        "2.8 GPUs are free in group default, but no node has 2.5 free on 3 GPUs: "
        "gpu-1 has 2 whole GPUs free and 0.4 + 0.4 of shared GPUs "
        "(GPU 0: 0.6 held by session x of alice@example.org; "
        "GPU 1: 0.6 held by session w of carol@example.org)."
    )
    (split,) = explain([node], [ask(250)], {"default": GroupScheduling(fragmentation_guard=False)})
    assert split.kind is Kind.FITS


def test_a_cordoned_node_s_gpus_are_said_to_be_held_back() -> None:
    cordoned = Room("node-d", "default", False, 32_000, 256 * GIB, (free(0), free(1)), capacity=BIG)
    (note,) = explain([*CLUSTER, cordoned], [ask(100, kernels=5, single=False)], {})
    assert note.kind is Kind.SHORT
    assert note.text.endswith(
        "4.5 GPUs are free on the available nodes of group default "
        "(node-d is cordoned or lost: 2 GPUs there not offered)."
    )


def test_a_request_larger_than_any_node_is_said_to_never_fit_there() -> None:
    # 4.5 GPUs free, 5 asked on one node, but the largest node has 4: not a matter of
    # fragmentation or of waiting for others to finish.
    cordoned = Room("node-d", "default", False, 32_000, 256 * GIB, (free(0), free(1)), capacity=BIG)
    (note,) = explain([*CLUSTER, cordoned], [ask(500)], {})
    assert note.kind is Kind.OVERSIZED
    assert note.text == (
        "Session big of bob@example.org (1st of 1 waiting) cannot fit until the group changes: "
        "no node in group default has 5 GPUs even when idle (largest: 4 GPUs on node-a)."
    )
    assert note.reason == (
        "no node in group default has 5 GPUs even when idle (largest: 4 GPUs on node-a)"
    )
    # Spread over nodes (multi-node), the same GPUs are a matter of free room, not of size.
    (spread,) = explain(CLUSTER, [ask(100, kernels=4, single=False)], {})
    assert spread.kind is not Kind.OVERSIZED


def test_requests_of_one_shape_share_their_situation_in_words() -> None:
    other = Ask("s-two", "session two of dan@example.org", "default", 1000, GIB, 400,
                place="2nd of 2 waiting")  # fmt: skip
    first, second = explain(CLUSTER, [ask(400), other], {})
    assert first.situation == second.situation != ""
    assert first.text == (
        f"{first.situation} The waiting 4-GPU request of session big of bob@example.org "
        "(1st of 1 waiting) cannot fit."
    )
    assert "bob" not in first.situation and "dan" not in second.situation
    (short,) = explain(CLUSTER, [ask(100, kernels=5, single=False)], {})
    assert short.situation == (
        "5 GPUs asked in all; 4.5 GPUs are free on the available nodes of group default."
    )


def test_more_cpus_than_any_node_has_is_never_not_short() -> None:
    # The user's case: 8 CPUs asked of a 2-core machine with 1.5 cores free. Less is free
    # than asked, but waiting for others to finish cannot help: the scheduler's words.
    box = Room(
        "box", "default", True, 1500, 8 * GIB, (),
        capacity=ResourceSlots(cpu_milli=2000, memory_bytes=8 * GIB, gpu_hundredths=0),
    )  # fmt: skip
    (note,) = explain([box], [ask(0, cpu=8000)], {})
    assert note.kind is Kind.OVERSIZED
    assert note.reason == (
        "no node in group default has 8 CPUs even when idle (largest: 2 CPUs on box)"
    )
    assert "1.5 cores" not in note.text


def test_an_image_on_no_node_is_never() -> None:
    only = Room("n", "default", True, 32_000, 256 * GIB, (free(0),), capacity=BIG,
                images=frozenset({"py:3"}))  # fmt: skip
    wanted = Ask("s", "session s", "default", 1000, GIB, 100, image="torch:2")
    (note,) = explain([only], [wanted], {})
    assert note.kind is Kind.OVERSIZED
    assert note.reason == "image torch:2 is on no available node in group default"


def test_other_groups_nodes_do_not_count() -> None:
    elsewhere = Room(
        "node-z", "batch", True, 32_000, 256 * GIB, tuple(free(i) for i in range(8)), capacity=BIG
    )
    (note,) = explain([*CLUSTER, elsewhere], [ask(400)], {})
    assert note.kind is Kind.FRAGMENTED
    assert "node-z" not in note.text


def test_cores_spread_over_nodes_are_fragmentation_too() -> None:
    nodes = [room("cpu-a", cpu=2000), room("cpu-b", cpu=2000)]
    (note,) = explain(nodes, [ask(0, cpu=3000)], {})
    assert note.kind is Kind.FRAGMENTED
    assert note.text.startswith(
        "4 cores and 512 GiB are free in group default, but no node has 3 cores and 1 GiB "
        "free at once: cpu-a has 2 cores and 256 GiB; cpu-b has 2 cores and 256 GiB."
    )


def test_a_mig_gpu_is_taken_whole_but_takes_no_share() -> None:
    mig = Device(0, mig=True)
    (whole_one,) = explain([room("mig-1", mig)], [ask(100)], {})
    (share,) = explain([room("mig-1", mig)], [ask(50)], {})
    assert whole_one.kind is Kind.FITS
    assert share.kind is Kind.OVERSIZED  # waiting cannot help: no GPU of the group takes shares
    assert share.reason.endswith("has a GPU that takes shares (MIG devices take none)")


def test_each_request_is_tried_on_the_room_of_now_not_on_what_others_took() -> None:
    notes = explain(CLUSTER, [ask(200), ask(200), ask(400)], {})
    assert [n.kind for n in notes] == [Kind.FITS, Kind.FITS, Kind.FRAGMENTED]


def test_a_long_list_of_nodes_is_cut_short() -> None:
    nodes = [room(f"n{i:02}", free(0), whole(1)) for i in range(9)]
    (note,) = explain(nodes, [ask(200)], {})
    assert note.kind is Kind.FRAGMENTED
    assert note.text.count(" has 1 whole GPU free") == 6
    assert "; and 3 more nodes." in note.text


def test_requests_of_one_shape_each_get_their_own_words() -> None:
    mine = Ask("s-1", "session one of bob@example.org", "default", 1000, GIB, 400, place="1st")
    theirs = Ask("s-2", "session two of dan@example.org", "default", 1000, GIB, 400)
    fits = Ask("s-3", "session three of dan@example.org", "default", 1000, GIB, 100)
    notes = explain(CLUSTER, [mine, fits, theirs], {})
    assert [n.kind for n in notes] == [Kind.FRAGMENTED, Kind.FITS, Kind.FRAGMENTED]
    assert notes[0].text.endswith("request of session one of bob@example.org (1st) cannot fit.")
    assert notes[2].text.endswith("request of session two of dan@example.org cannot fit.")
    assert "room for session three of dan@example.org now on node-b" in notes[1].text


# node-a: cores, no free GPU; node-b: a GPU with 0.7 free, fewer cores.
APART = [
    room("node-a", whole(0), whole(1), cpu=64_000),
    room("node-b", shared(0, (W, 30)), cpu=20_000),
]


@pytest.mark.parametrize(
    ("gpu", "cpu", "kind", "where"),
    [
        (100, 1000, Kind.SHORT, "asks 1 GPU in all; 0.7 GPU is free"),
        (60, 1000, Kind.FITS, "now on node-b"),
        (0, 30_000, Kind.FITS, "now on node-a"),
        (60, 30_000, Kind.FRAGMENTED, "no node has 0.6 free on 1 GPU"),
    ],
)
def test_a_node_is_tried_only_with_the_room_in_total(
    gpu: int, cpu: int, kind: Kind, where: str
) -> None:
    (note,) = explain(APART, [ask(gpu, cpu=cpu)], {})
    assert note.kind is kind
    assert where in note.text, note.text
