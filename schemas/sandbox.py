"""What a session's containers may do on their node: one resource group's sandbox settings.
Pure values; the group's events carry them inside ``GroupScheduling.sandbox``, the node ledger
carries them to the agent with each allocation, and the agent makes its containers from them
(``services/node/docker_config.py``). What is never a setting (device nodes, file
capabilities) is written up in docs/node-agent.md, "What a session may do".

Every default is the safe value: a group stored before these settings existed, and a ledger
entry written before allocations carried them, load with it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

PIDS_LIMIT_DEFAULT = 4096
PIDS_LIMIT_LEAST = 16
"""Fewer and a shell with a pipe cannot start; docker-init, the kernel and its helpers need some."""
PIDS_LIMIT_MOST = 4_194_304
"""Linux's own ceiling (``pid_max`` on 64-bit machines)."""


class Sandbox(BaseModel):
    """One resource group's limits on what its sessions' containers may do."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    no_new_privileges: bool = Field(
        default=True,
        description="no process of a session gains privileges by exec: set-uid programs "
        "and file capabilities run without them (sudo and su fail for a non-root user)",
    )
    pids_limit: int | None = Field(
        default=PIDS_LIMIT_DEFAULT,
        ge=PIDS_LIMIT_LEAST,
        le=PIDS_LIMIT_MOST,
        description="the most processes and threads one kernel runs at once (no limit when unset)",
    )
    raw_sockets: bool = Field(
        default=False,
        description="kernels may open raw and packet sockets (CAP_NET_RAW: busybox's ping, "
        "packet capture, hand-made packets)",
    )


SAFE_SANDBOX = Sandbox()
