"""The container configuration the Docker backend creates a kernel with (pure): exactly the
ledger's GPUs, MPS client settings for shares when the machine runs MPS, CPU pinning, host name,
and an environment the session cannot use to widen its devices."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from schemas.devices import DeviceShare
from schemas.resources import ResourceSlots
from services.node.backend import KernelSpec
from services.node.docker_config import container_config, kernel_env

GIB = 1 << 30
MPS = Path("/run/jetyard-mps")
MEMORY = {f"GPU-{i}": 80 * GIB for i in range(4)}


def whole(index: int) -> DeviceShare:
    return DeviceShare(index=index, uuid=f"GPU-{index}", hundredths=100, whole=True)


def share(index: int, hundredths: int) -> DeviceShare:
    return DeviceShare(index=index, uuid=f"GPU-{index}", hundredths=hundredths)


def spec(*devices: DeviceShare, **fields: Any) -> KernelSpec:
    gpus = sum(d.hundredths for d in devices)
    return KernelSpec(
        kernel_id="k1",
        session_id="s1",
        image="img:1",
        command=("python", "train.py"),
        slots=ResourceSlots(cpu_milli=2000, memory_bytes=4 * GIB, gpu_hundredths=gpus),
        devices=devices,
        device_memory_bytes=MEMORY,
        **fields,
    )


def env_of(config: dict[str, Any]) -> dict[str, str]:
    return dict(entry.split("=", 1) for entry in config["Env"])


def build(kernel: KernelSpec, mps: Path | None = None, cluster_id: str = "c1") -> dict[str, Any]:
    return container_config(
        kernel, "node-1", cluster_id=cluster_id, stop_timeout_s=10, mps_pipe_dir=mps
    )


@pytest.mark.parametrize("mps", [None, MPS], ids=["no-mps", "mps"])
def test_whole_devices_are_requested_by_uuid_and_made_visible_by_uuid(mps: Path | None) -> None:
    config = build(spec(whole(2), whole(3)), mps)

    host = config["HostConfig"]
    assert host["DeviceRequests"] == [
        {"Driver": "nvidia", "DeviceIDs": ["GPU-2", "GPU-3"], "Capabilities": [["gpu"]]}
    ]
    env = env_of(config)
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-2,GPU-3"
    # Whole devices are not MPS clients, even on a machine that runs MPS.
    assert not any(k.startswith("CUDA_MPS_") for k in env)
    assert "Binds" not in host and "IpcMode" not in host


def test_a_share_without_mps_gets_its_device_and_no_enforcement() -> None:
    config = build(spec(share(1, 30)))

    assert config["HostConfig"]["DeviceRequests"][0]["DeviceIDs"] == ["GPU-1"]
    env = env_of(config)
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-1"
    assert not any(k.startswith("CUDA_MPS_") for k in env)
    assert "Binds" not in config["HostConfig"]


def test_a_share_with_mps_is_an_mps_client_limited_to_its_share() -> None:
    config = build(spec(share(1, 30)), MPS)

    host = config["HostConfig"]
    assert host["DeviceRequests"][0]["DeviceIDs"] == ["GPU-1"]
    assert host["Binds"] == ["/run/jetyard-mps:/run/jetyard-mps"]
    assert host["IpcMode"] == "host"
    env = env_of(config)
    assert env["CUDA_MPS_PIPE_DIRECTORY"] == "/run/jetyard-mps"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "30"
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=24576M"  # 30% of 80 GiB, in MiB


def test_a_share_over_two_devices_takes_the_larger_percentage_and_a_limit_per_device() -> None:
    env = env_of(build(spec(share(3, 60), share(0, 40)), MPS))

    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-3,GPU-0"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "60"
    # By ordinal inside the container: GPU-3 is device 0 there, GPU-0 is device 1.
    assert env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] == "0=49152M,1=32768M"


def test_a_device_of_unknown_memory_gets_no_memory_limit() -> None:
    unknown = replace(spec(share(1, 50)), device_memory_bytes={})

    env = kernel_env(unknown, MPS)

    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "50"
    assert "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" not in env


def test_cpus_are_pinned_and_the_host_name_set_when_known() -> None:
    pinned = build(spec(whole(0), cpuset=(0, 1, 2, 3, 8, 9, 10, 11), hostname="main1"))
    loose = build(spec(whole(0)))

    assert pinned["HostConfig"]["CpusetCpus"] == "0-3,8-11"
    assert pinned["Hostname"] == "main1"
    assert "CpusetCpus" not in loose["HostConfig"] and "Hostname" not in loose


def test_the_session_env_passes_through_but_cannot_choose_devices_or_mps_limits() -> None:
    env = env_of(
        build(
            spec(
                share(1, 25),
                env={
                    "JETYARD_CLUSTER_ROLE": "sub",
                    "JETYARD_CLUSTER_HOSTS": "main1,sub1",
                    "CUDA_VISIBLE_DEVICES": "0,1,2,3",
                    "NVIDIA_VISIBLE_DEVICES": "all",
                    "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": "100",
                },
            ),
            MPS,
        )
    )

    assert (env["JETYARD_CLUSTER_ROLE"], env["JETYARD_CLUSTER_HOSTS"]) == ("sub", "main1,sub1")
    assert env["CUDA_VISIBLE_DEVICES"] == "GPU-1"
    assert env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] == "25"
    assert "NVIDIA_VISIBLE_DEVICES" not in env  # Docker sets it from DeviceIDs


def test_a_kernel_without_gpus_sees_none_even_where_nvidia_is_the_default_runtime() -> None:
    config = build(spec(env={"NVIDIA_VISIBLE_DEVICES": "all"}))

    assert "DeviceRequests" not in config["HostConfig"]
    env = env_of(config)
    assert env["NVIDIA_VISIBLE_DEVICES"] == "void"
    assert "CUDA_VISIBLE_DEVICES" not in env


def test_limits_labels_and_command_are_as_before() -> None:
    config = build(spec())

    host = config["HostConfig"]
    assert (host["NanoCpus"], host["Memory"], host["MemorySwap"]) == (2 * 10**9, 4 * GIB, 4 * GIB)
    assert host["Init"] is True
    assert config["Labels"] == {
        "jetyard.managed": "true",
        "jetyard.cluster_id": "c1",
        "jetyard.node_id": "node-1",
        "jetyard.kernel_id": "k1",
        "jetyard.session_id": "s1",
    }
    assert (config["Cmd"], config["Image"], config["StopTimeout"]) == (
        ["python", "train.py"],
        "img:1",
        10,
    )


def test_an_allocation_written_before_devices_were_named_asks_for_a_count() -> None:
    old = KernelSpec(
        kernel_id="k1",
        session_id="s1",
        image="img:1",
        command=None,
        slots=ResourceSlots(gpu_hundredths=150),
    )

    assert build(old)["HostConfig"]["DeviceRequests"] == [
        {"Driver": "nvidia", "Count": 2, "Capabilities": [["gpu"]]}
    ]


def test_an_agent_without_a_cluster_id_labels_with_its_node_alone() -> None:
    # Its containers are found by the node label only, as before there were cluster ids.
    labels = build(spec(), cluster_id="")["Labels"]

    assert "jetyard.cluster_id" not in labels
    assert labels["jetyard.node_id"] == "node-1"
