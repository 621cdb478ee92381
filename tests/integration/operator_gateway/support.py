"""The operators' queries tests' world and helpers: the history written straight to the log
(one node of four GPUs, two sessions holding shares, one waiting) and the ``cluster`` query."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from events.catalogue import Event
from events.domain.agent import AgentRegistered, KernelStarted
from events.domain.node import NodeRegistered, ResourcesAllocated
from events.domain.session import SessionRequested, SessionStarted
from jetyard.sdk import JetyardAuth
from schemas.devices import DeviceInfo, DeviceShare
from schemas.resources import ResourceSlots
from schemas.session import KernelSpec, SessionSpec
from schemas.subjects import AggregateType
from tests.integration.gateway_support import Gateway
from tests.unit.usage_history import GIB, Cast, History

CLUSTER = """{ cluster {
  seq
  nodes { id hostname resourceGroup state }
  devices { nodeId index uuid usedHundredths }
  holds { nodeId index sessionId sessionName user hundredths whole }
  kernels { nodeId sessionId kernelId user started resources { gpu } }
  queues { resourceGroup length }
  waiting { resourceGroup sessionId name user position perKernel { gpu } reason }
  notes { sessionId resourceGroup kind text freeGpu needGpu }
} }"""


@dataclass
class World:
    gw: Gateway
    cast: Cast
    auth: dict[str, JetyardAuth]
    emails: dict[str, str]
    node: str
    group: str


def _gpus(node: str) -> tuple[DeviceInfo, ...]:
    return tuple(
        DeviceInfo(kind="cuda", index=i, uuid=f"GPU-{node}-{i}", name="test GPU", memory_bytes=GIB)
        for i in range(4)
    )


def _history(cast: Cast, node: str, group: str) -> History:
    h = History(cast)
    capacity = ResourceSlots.of(cpu="8", memory=64 * GIB, gpu="4")
    h.add(AggregateType.NODE, "gpu-a", 0, NodeRegistered(
        hostname=node, resource_group=group, capacity=capacity, devices=_gpus(node),
    ))  # fmt: skip
    h.add(AggregateType.AGENT, "gpu-a", 0, AgentRegistered(
        epoch=1, hostname=node, backend="simulated", capacity=capacity, devices=_gpus(node),
        resource_group=group, images=("busybox",),
    ))  # fmt: skip

    def request(sid: str, who: str, gpu: str, name: str, env: dict[str, str]) -> None:
        spec = SessionSpec(
            image="busybox", resource_group=group, name=name, env=env,
            kernels=(KernelSpec(resources=ResourceSlots.of(cpu="1", memory=GIB, gpu=gpu)),),
        )  # fmt: skip
        event = SessionRequested(
            spec=spec, kernel_ids=(cast.id(f"k-{sid}"),), owner=cast.people[who]
        )
        h.add(AggregateType.SESSION, sid, 1, event)

    def hold(sid: str, index: int) -> None:
        held = ResourceSlots.of(cpu="1", memory=GIB, gpu="0.6")
        share = DeviceShare(index=index, uuid=f"GPU-{node}-{index}", hundredths=60)
        allocated: Event = ResourcesAllocated(
            kernel_id=cast.id(f"k-{sid}"), session_id=cast.id(sid), slots=held, devices=(share,)
        )
        h.add(AggregateType.NODE, "gpu-a", 2, allocated)
        started = KernelStarted(
            kernel_id=cast.id(f"k-{sid}"), session_id=cast.id(sid), container_id="c"
        )
        h.add(AggregateType.AGENT, "gpu-a", 3, started)
        h.add(AggregateType.SESSION, sid, 3, SessionStarted(reason="kernel started"))

    request("s1", "alice", "0.6", "sixty", {"TOKEN": "s3cret"})
    hold("s1", 0)
    request("s2", "carol", "0.6", "theirs", {})
    hold("s2", 1)
    request("s3", "alice", "2.6", "big-share", {})
    return h


async def cluster_as(world: World, who: str) -> dict[str, Any]:
    found: dict[str, Any] = (await world.gw.gql(CLUSTER, auth=world.auth[who]))["data"]["cluster"]
    return found


def mine(world: World, answer: dict[str, Any], key: str) -> list[dict[str, Any]]:
    node_id = world.cast.id("gpu-a")
    return [row for row in answer[key] if row.get("nodeId", node_id) == node_id]
