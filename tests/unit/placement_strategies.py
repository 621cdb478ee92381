"""Random clusters, request streams and group policies for placement's property tests
(hypothesis strategies), shared by the tests of the engine and of the judge."""

from __future__ import annotations

from hypothesis import strategies as st

from placement import KernelRequest, NodeOffer, SessionRequest
from schemas.resources import ResourceSlots
from schemas.session import ClusterMode
from schemas.tenancy import AgentSelection, DeviceFill, GroupScheduling, HeadOfLine, QueuePolicy
from tests.unit.placement_support import GIB, node

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
