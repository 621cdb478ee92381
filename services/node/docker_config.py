"""The Docker container configuration for one kernel, as a pure function of its ``KernelSpec``:
limits, labels, exactly its GPUs, its host name (and, for a cluster session's kernel, its
session's network, where that name resolves; for a session on several nodes, its address there
and every peer's name in its ``/etc/hosts``), its CPU pinning, its folders (bind mounts,
read-only where the mount says so), its sandbox (capabilities, no-new-privileges, a process
limit: its resource group's ``Sandbox``), and (for GPU shares on a machine running CUDA MPS) the
MPS client settings. Reads and writes no subjects.

Why each GPU setting is what it is is written up in docs/gpus.md; why each capability is kept
or dropped, in docs/node-agent.md ("What a session may do").
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from schemas.resources import GPU_QUANTUM
from schemas.sandbox import Sandbox
from services.node.backend import KernelSpec, labels_for
from services.node.networks import endpoint_config, extra_hosts, kernel_network
from services.node.topology import format_cpulist

NANO_CPUS_PER_MILLI = 1_000_000
MIB = 1 << 20
# What the agent decides in a kernel's environment: a value from the session's env for one of
# these is dropped, so a kernel cannot widen its own devices or MPS limits by asking.
AGENT_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES")
AGENT_ENV_PREFIX = "CUDA_MPS_"

KEPT_CAPABILITIES = (
    "CHOWN",
    "DAC_OVERRIDE",
    "FOWNER",
    "FSETID",
    "KILL",
    "NET_BIND_SERVICE",
    "SETGID",
    "SETPCAP",
    "SETUID",
    "SYS_CHROOT",
)
"""Every capability a kernel holds: what ordinary images do as root (install packages, own and
chmod their files, switch users, signal their processes, listen below 1024, chroot). Docker's
default set less MKNOD (device nodes), SETFCAP (file capabilities: both would outlive the
container in a mounted folder), AUDIT_WRITE (the host's audit log) and NET_RAW (given back by
the group's ``raw_sockets``). Named, not Docker's default less some: an engine whose default
grows gives a kernel nothing more."""
RAW_SOCKETS = "NET_RAW"


def sandbox_config(sandbox: Sandbox) -> dict[str, Any]:
    """The ``HostConfig`` keys that hold a kernel to its group's sandbox."""
    kept = [*KEPT_CAPABILITIES, RAW_SOCKETS] if sandbox.raw_sockets else [*KEPT_CAPABILITIES]
    host: dict[str, Any] = {"CapDrop": ["ALL"], "CapAdd": sorted(kept)}
    if sandbox.no_new_privileges:
        host["SecurityOpt"] = ["no-new-privileges"]
    if sandbox.pids_limit is not None:
        host["PidsLimit"] = sandbox.pids_limit
    return host


def kernel_env(spec: KernelSpec, mps_pipe_dir: Path | None) -> dict[str, str]:
    """The kernel's environment: the allocation's (cluster variables included), then the
    agent's GPU variables."""
    env = {
        k: v
        for k, v in spec.env.items()
        if k not in AGENT_ENV and not k.startswith(AGENT_ENV_PREFIX)
    }
    if not spec.devices:
        if not spec.slots.gpu_hundredths:
            # CUDA images set NVIDIA_VISIBLE_DEVICES=all; where the nvidia runtime is the
            # engine's default, that alone would hand every GPU to a kernel that holds none.
            env["NVIDIA_VISIBLE_DEVICES"] = "void"
        return env
    # UUIDs, not indices: the container sees its devices renumbered from 0.
    env["CUDA_VISIBLE_DEVICES"] = ",".join(d.uuid for d in spec.devices)
    if mps_pipe_dir is not None and any(not d.whole for d in spec.devices):
        env.update(_mps_env(spec, mps_pipe_dir))
    return env


def _mps_env(spec: KernelSpec, pipe_dir: Path) -> dict[str, str]:
    env = {
        "CUDA_MPS_PIPE_DIRECTORY": str(pipe_dir),
        # One percentage for the whole client: the largest of its shares (a whole device is 100).
        "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE": str(max(d.hundredths for d in spec.devices)),
    }
    # By the ordinal the device has inside the container (its place in CUDA_VISIBLE_DEVICES):
    # NVIDIA's device plugin found limits keyed by UUID are not applied.
    limits = [
        f"{ordinal}={spec.device_memory_bytes[d.uuid] * d.hundredths // GPU_QUANTUM // MIB}M"
        for ordinal, d in enumerate(spec.devices)
        if spec.device_memory_bytes.get(d.uuid)
    ]
    if limits:
        env["CUDA_MPS_PINNED_DEVICE_MEM_LIMIT"] = ",".join(limits)
    return env


def container_config(
    spec: KernelSpec,
    node_id: str,
    *,
    cluster_id: str,
    stop_timeout_s: float,
    mps_pipe_dir: Path | None = None,
) -> dict[str, Any]:
    """The body of Docker's ``POST /containers/create`` for this kernel, labelled as node
    ``node_id``'s of installation ``cluster_id`` ("": none)."""
    host: dict[str, Any] = {"Init": True}  # docker-init as PID 1 forwards SIGTERM
    host.update(sandbox_config(spec.sandbox))
    if spec.slots.cpu_milli:
        host["NanoCpus"] = spec.slots.cpu_milli * NANO_CPUS_PER_MILLI
    if spec.slots.memory_bytes:
        # MemorySwap = Memory: no swap beyond the limit, so the limit is the real one.
        host["Memory"] = host["MemorySwap"] = spec.slots.memory_bytes
    if spec.cpuset:
        host["CpusetCpus"] = format_cpulist(spec.cpuset)
    if spec.devices:
        # Exactly the ledger's devices, by NVML uuid; the runtime exposes those and no other.
        host["DeviceRequests"] = [
            {
                "Driver": "nvidia",
                "DeviceIDs": [d.uuid for d in spec.devices],
                "Capabilities": [["gpu"]],
            }
        ]
        if mps_pipe_dir is not None and any(not d.whole for d in spec.devices):
            # An MPS client talks to the host's server through the pipe directory and shared
            # memory (hence the host IPC namespace).
            host["Binds"] = [f"{mps_pipe_dir}:{mps_pipe_dir}"]
            host["IpcMode"] = "host"
    elif spec.slots.gpu_hundredths:
        # A ledger entry written before allocations named devices: count only.
        count = math.ceil(spec.slots.gpu_hundredths / GPU_QUANTUM)
        host["DeviceRequests"] = [{"Driver": "nvidia", "Count": count, "Capabilities": [["gpu"]]}]
    if spec.mounts:
        # Mounts, not Binds: a missing source fails the create instead of being made empty.
        host["Mounts"] = [
            {
                "Type": "bind",
                "Source": str(m.source),
                "Target": m.target,
                "ReadOnly": m.read_only,
            }
            for m in spec.mounts
        ]
    config: dict[str, Any] = {
        "Image": spec.image,
        "Labels": labels_for(cluster_id, node_id, spec.kernel_id, spec.session_id),
        "Env": [f"{k}={v}" for k, v in sorted(kernel_env(spec, mps_pipe_dir).items())],
        "StopTimeout": math.ceil(stop_timeout_s),
        "HostConfig": host,
    }
    if spec.hostname:
        config["Hostname"] = spec.hostname
    network = kernel_network(spec, node_id, cluster_id)
    if network is not None:
        # Only its session's network: not the default bridge, where other sessions' kernels are.
        host["NetworkMode"] = network
        address = ""
        cluster = spec.cluster
        if cluster is not None:
            address = cluster.peer(spec.hostname).address
            host["ExtraHosts"] = extra_hosts(cluster)
        config["NetworkingConfig"] = endpoint_config(network, spec.hostname, address)
    if spec.command:
        config["Cmd"] = list(spec.command)
    return config
