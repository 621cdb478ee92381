"""Agent settings (``JETYARD_AGENT_*``), built once at start-up and passed down. NATS settings
are separate (``schemas.settings.NatsSettings``, ``JETYARD_NATS_*``). The node id the agent acts
under is resolved from these once, at start-up (``services.node.identity``)."""

from __future__ import annotations

import socket
from decimal import Decimal
from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from schemas.activity import DEFAULT_REPORT_INTERVAL_S
from schemas.images import PullCause
from schemas.settings import MetricsListener

BackendChoice = Literal["docker", "simulated", "auto"]


def _default_data_dir() -> Path:
    return Path.home() / ".local" / "share" / "jetyard" / "agent"


class AgentSettings(BaseSettings, MetricsListener):
    model_config = SettingsConfigDict(env_prefix="JETYARD_AGENT_", extra="forbid")

    hostname: str = Field(
        default_factory=socket.gethostname,
        description="the machine's name, as registered and shown (the node id is not made "
        "from it: two agents on one machine are two nodes)",
    )
    node_id: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z0-9_-]{1,64}$",
        description="this agent's node id, chosen by hand; unset: made on the first start and "
        "kept in <data_dir>/node.id (keep the directory, or the agent becomes a new node)",
    )
    cluster_id: str = Field(
        default="",
        pattern=r"^[A-Za-z0-9_-]{0,64}$",
        description="the installation this agent belongs to (`jetyard up` passes its own, kept "
        "in <data-dir>/cluster.id); its containers carry it and the agent lists only those "
        "with its cluster id and node id, so two installations on one machine and one Docker "
        "engine never share a container",
    )
    backend: BackendChoice = Field(
        default="auto",
        description="auto: docker when its socket answers, else simulated (said loudly)",
    )
    heartbeat_interval_s: float | None = Field(
        default=None,
        gt=0,
        description=(
            "how often the heartbeat is refreshed; default and upper bound: "
            "JETYARD_NATS_HEARTBEAT_INTERVAL_S, which sets the bucket's TTL (3x)"
        ),
    )
    resource_group: str = Field(
        default="default",
        description="the resource group this node joins (carried by AgentRegistered)",
    )
    data_dir: Path = Field(
        default_factory=_default_data_dir,
        description="this agent's own directory: its node id (node.id), scratch space for "
        "kernels (mounts); one per agent",
    )
    docker_url: str | None = Field(
        default=None, description="Docker engine address; default DOCKER_HOST or the socket"
    )
    stop_timeout_s: float = Field(
        default=10.0, gt=0, description="grace between SIGTERM and SIGKILL when stopping"
    )
    resync_interval_s: float = Field(
        default=30.0,
        gt=0,
        description="a full reconcile at least this often, even without any change seen",
    )
    max_log_bytes: int = Field(
        default=8 << 20, gt=0, description="the tail of a kernel's output kept after it ends"
    )
    service_ports_wait_s: float = Field(
        default=60.0,
        gt=0,
        le=3600,
        description="how long a started kernel's http/tcp apps are waited for before they are "
        "reported never-opened",
    )
    activity_interval_s: float = Field(
        default=DEFAULT_REPORT_INTERVAL_S,
        gt=0,
        le=3600,
        description="how often the kernels' output and CPU and GPU use are reported as "
        "activity for idle timeouts (SessionActivityReported on ev.activity.<node id>): at "
        "most once per kernel and source in that time, and only for kernels that printed or "
        "used something; keep it well under the shortest idle timeout",
    )
    cpu: Decimal | None = Field(default=None, gt=0, description="override the CPUs offered")
    memory_bytes: int | None = Field(default=None, gt=0, description="override the memory offered")
    simulated_images: tuple[str, ...] = Field(
        default=("jetyard-busybox:latest",),
        description="the images a simulated machine has",
    )
    simulated_gpus: int = Field(default=0, ge=0, description="GPUs a simulated machine has")
    volumes: dict[str, Path] = Field(
        default_factory=dict,
        description="where each storage volume's root is on this machine, as JSON "
        '(\'{"local": "/srv/jetyard/volumes/local"}\'): a kernel mounts a folder from '
        "<root>/<folder's directory>; the names are registered, and placement sends a session "
        "with folders only to nodes that have their volumes (a folder on a volume not named "
        "here still fails the kernel's start)",
    )
    mps_pipe_dir: Path | None = Field(
        default=None,
        description=(
            "the pipe directory of this machine's CUDA MPS control daemon; when set, kernels "
            "holding GPU shares run as MPS clients with thread and memory limits "
            "(docs/gpus.md); unset: shares are a scheduling promise only"
        ),
    )
    address: str = Field(
        default="",
        pattern=r"^$|^(\d{1,3}\.){3}\d{1,3}$",
        description="this machine's IPv4 address on the network between nodes (one of its "
        "own interfaces', not a NAT's), where the other nodes of a multi-node cluster session "
        "send its VXLAN packets (UDP 4789); unset: the source address of this machine's route "
        "to the first NATS server",
    )
    terminal_host: str = Field(
        default="127.0.0.1",
        description="where the kernels' terminal endpoint listens (Docker backend only); "
        "the app proxy must reach it there (0.0.0.0: announced under `hostname`)",
    )
    terminal_port: int = Field(default=0, ge=0, le=65535, description="0: a free port")
    terminal_key: SecretStr | None = Field(
        default=None,
        min_length=32,
        description="HMAC key of terminal tokens, shared with the app proxy "
        "(JETYARD_APPPROXY_TERMINAL_KEY); unset: no terminal endpoint",
    )
    pull_concurrency: int = Field(
        default=2, ge=1, le=16, description="image pulls at once on this machine (others queue)"
    )
    pull_timeout_s: float = Field(
        default=3600.0,
        gt=0,
        description="how long one pull may take before it fails (its sessions end, reason timeout)",
    )
    pull_progress_interval_s: float = Field(
        default=1.0, gt=0, description="at most one ImagePullProgressed per pull this often"
    )
    credentials_timeout_s: float = Field(
        default=10.0, gt=0, description="how long the gateway has to hand a registry's credentials"
    )
    image_disk_budget_bytes: int | None = Field(
        default=None,
        gt=0,
        description="when images take more than this, the least recently used that no kernel "
        "here uses are removed after a pull (unset: never)",
    )
    simulated_pull_seconds: float = Field(
        default=0.5, ge=0, description="how long a simulated pull takes"
    )
    simulated_pull_bytes: int = Field(
        default=100 * 2**20, ge=0, description="how big a simulated pull's image is"
    )
    simulated_pull_failures: dict[str, PullCause] = Field(
        default_factory=dict,
        description="image references whose simulated pulls fail, and why (JSON; for tests)",
    )
