"""Agent facts (registration epochs, images, kernel starts and exits), as given-events /
when-command / then-events; and the worked versioning example, AgentRegistered v1 -> v2."""

from __future__ import annotations

import pytest

from commands.agent import Agent, KernelConflictError, RunningKernel, StaleEpochError
from events.catalogue import CATALOGUE
from events.domain.agent import (
    AgentImagesChanged,
    AgentRegistered,
    KernelExited,
    KernelFailedToStart,
    KernelStarted,
)
from schemas.devices import DeviceInfo, NumaNode
from schemas.resources import ResourceSlots
from tests.unit.scenario import T0, at, envelope_of, given, then

AID = "agent-1"
CAPACITY = ResourceSlots.of(cpu=16, memory=64 * 1024**3, gpu=1)
GPU = DeviceInfo(kind="cuda", index=0, uuid="GPU-1234", name="NVIDIA H100", memory_bytes=80 << 30)
REGISTERED = AgentRegistered(
    epoch=1,
    hostname="gpu-01",
    backend="docker",
    capacity=CAPACITY,
    devices=(GPU,),
    images=("busybox:latest", "python:3.12"),
)
STARTED = KernelStarted(kernel_id="k1", session_id="s1", container_id="c1")
NOW = at(60)


def register_again(agent: Agent, epoch: int) -> bool:
    return agent.reregister(
        epoch=epoch, hostname="gpu-01", backend="docker", capacity=CAPACITY, devices=(GPU,), now=NOW
    )


def test_register_reports_the_machine_with_images_as_a_sorted_set() -> None:
    agent = Agent.register(
        AID,
        epoch=1,
        hostname="gpu-01",
        backend="docker",
        capacity=CAPACITY,
        devices=[GPU],
        images=["python:3.12", "busybox:latest", "python:3.12"],
        now=T0,
    )

    assert then(agent) == [REGISTERED]
    assert (agent.epoch, agent.devices) == (1, (GPU,))


def test_epochs_start_at_one() -> None:
    with pytest.raises(StaleEpochError, match="start at 1"):
        Agent.register(AID, epoch=0, hostname="h", backend="docker", capacity=CAPACITY, now=T0)


def test_a_restarted_agent_registers_again_with_a_newer_epoch_and_keeps_its_kernels() -> None:
    agent = given(Agent, AID, REGISTERED, STARTED)

    register_again(agent, 2)

    assert then(agent) == [REGISTERED.model_copy(update={"epoch": 2, "images": ()})]
    assert agent.epoch == 2
    assert agent.running == {"k1": RunningKernel(session_id="s1", container_id="c1")}


def test_a_re_registration_loads_back_from_the_log() -> None:
    again = REGISTERED.model_copy(update={"epoch": 2})

    agent = given(Agent, AID, REGISTERED, STARTED, again)

    assert (agent.epoch, agent.version) == (2, 3)


@pytest.mark.parametrize("epoch", [1, 0])
def test_a_stale_epoch_is_refused(epoch: int) -> None:
    agent = given(Agent, AID, REGISTERED)

    with pytest.raises(StaleEpochError, match=f"epoch {epoch} is not newer"):
        register_again(agent, epoch)
    assert then(agent) == []


def test_images_change_only_when_the_set_changes() -> None:
    agent = given(Agent, AID, REGISTERED)

    assert not agent.change_images(["python:3.12", "busybox:latest"], NOW)
    assert agent.change_images(["busybox:latest"], NOW)

    assert then(agent) == [AgentImagesChanged(images=("busybox:latest",))]


def test_a_started_kernel_is_running() -> None:
    agent = given(Agent, AID, REGISTERED)

    agent.kernel_started("k1", "s1", "c1", NOW)

    assert then(agent) == [STARTED]
    assert set(agent.running) == {"k1"}


def test_reporting_a_started_kernel_again_changes_nothing() -> None:
    agent = given(Agent, AID, REGISTERED, STARTED)

    assert not agent.kernel_started("k1", "s1", "c1", NOW)
    assert then(agent) == []


def test_a_kernel_cannot_run_in_two_containers() -> None:
    agent = given(Agent, AID, REGISTERED, STARTED)

    with pytest.raises(KernelConflictError, match="c1"):
        agent.kernel_started("k1", "s1", "c2", NOW)
    assert then(agent) == []


def test_an_exit_is_reported_with_the_kernel_session_and_code() -> None:
    agent = given(Agent, AID, REGISTERED, STARTED)

    agent.kernel_exited("k1", 137, "killed", NOW)

    assert then(agent) == [
        KernelExited(kernel_id="k1", session_id="s1", exit_code=137, reason="killed")
    ]
    assert agent.running == {}


def test_an_exit_of_an_unknown_or_exited_kernel_changes_nothing() -> None:
    exited = KernelExited(kernel_id="k1", session_id="s1", exit_code=0, reason="exited")
    agent = given(Agent, AID, REGISTERED, STARTED, exited)

    assert not agent.kernel_exited("k1", 0, "exited", NOW)
    assert not agent.kernel_exited("never-started", 0, "exited", NOW)
    assert then(agent) == []


def test_a_kernel_that_failed_to_start_is_reported() -> None:
    agent = given(Agent, AID, REGISTERED)

    agent.kernel_failed_to_start("k1", "s1", "image not found", NOW)

    assert then(agent) == [
        KernelFailedToStart(kernel_id="k1", session_id="s1", reason="image not found")
    ]
    assert agent.running == {}


def test_a_running_kernel_cannot_fail_to_start() -> None:
    agent = given(Agent, AID, REGISTERED, STARTED)

    with pytest.raises(KernelConflictError, match="already running"):
        agent.kernel_failed_to_start("k1", "s1", "oops", NOW)


# ---- versioning: AgentRegistered v1 had no backend --------------------------------------


def v1_registration() -> dict[str, object]:
    payload = REGISTERED.model_dump(mode="json")
    del payload["backend"]
    return payload


def test_agent_registered_is_at_version_2() -> None:
    assert AgentRegistered.schema_version == 2


def test_the_upcaster_lifts_a_v1_registration_to_v2_with_the_docker_backend() -> None:
    old = envelope_of(AID, 1, REGISTERED, T0).model_copy(
        update={"schema_version": 1, "payload": v1_registration()}
    )

    upcast = CATALOGUE.upcast(old)

    assert upcast.schema_version == 2
    assert upcast.payload["backend"] == "docker"
    assert CATALOGUE.decode(old) == REGISTERED


def test_an_agent_loads_from_a_v1_registration() -> None:
    old = envelope_of(AID, 1, REGISTERED, T0).model_copy(
        update={"schema_version": 1, "payload": v1_registration()}
    )

    agent = Agent.rehydrate([old])

    assert agent is not None
    assert agent.backend == "docker"


# ---- NUMA layout (added with a default: older registrations have none) --------------------


def test_a_registration_carries_the_numa_layout_and_devices_their_numa_node() -> None:
    numa = (NumaNode(node=0, cpus=(0, 1)), NumaNode(node=1, cpus=(2, 3)))
    gpu = GPU.model_copy(update={"numa_node": 1})

    agent = Agent.register(
        AID,
        epoch=1,
        hostname="gpu-01",
        backend="docker",
        capacity=CAPACITY,
        devices=[gpu],
        numa=numa,
        now=T0,
    )

    assert then(agent) == [REGISTERED.model_copy(update={"devices": (gpu,), "numa": numa,
                                                         "images": ()})]  # fmt: skip
    assert (agent.numa, agent.devices[0].numa_node) == (numa, 1)


def test_a_registration_written_before_numa_loads_with_none() -> None:
    payload = REGISTERED.model_dump(mode="json")
    del payload["numa"]
    old = envelope_of(AID, 1, REGISTERED, T0).model_copy(update={"payload": payload})

    agent = Agent.rehydrate([old])

    assert agent is not None and agent.numa == ()


# ---- storage volumes (added with a default: older registrations have none) ---------------


def test_a_registration_carries_its_volumes_as_a_sorted_set_and_a_restart_replaces_them() -> None:
    agent = Agent.register(
        AID, epoch=1, hostname="gpu-01", backend="docker", capacity=CAPACITY, devices=[GPU],
        volumes=["shared", "local", "shared"], now=T0,
    )  # fmt: skip

    assert then(agent) == [REGISTERED.model_copy(update={"volumes": ("local", "shared"),
                                                         "images": ()})]  # fmt: skip
    agent = given(Agent, AID, REGISTERED.model_copy(update={"volumes": ("local", "shared")}))
    assert agent.volumes == ("local", "shared")

    agent.reregister(
        epoch=2, hostname="gpu-01", backend="docker", capacity=CAPACITY, devices=(GPU,),
        volumes=("local",), now=NOW,
    )  # fmt: skip

    (again,) = then(agent)
    assert isinstance(again, AgentRegistered) and again.volumes == ("local",)
    assert list(agent.volumes) == ["local"]


def test_a_registration_written_before_volumes_loads_with_none() -> None:
    payload = REGISTERED.model_dump(mode="json")
    del payload["volumes"]
    old = envelope_of(AID, 1, REGISTERED, T0).model_copy(update={"payload": payload})

    agent = Agent.rehydrate([old])

    assert agent is not None and agent.volumes == ()
