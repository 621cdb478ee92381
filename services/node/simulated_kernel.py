"""One kernel of the simulated backend (``services.node.backend_simulated``): what it was
launched with, its output and the CPU it uses, and what its command tells it to do (exit,
sleep, print; anything else runs until stopped). Reads and writes no subjects."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from typing import Any

from services.node.backend import ContainerStatus, KernelSpec, OutputLine, StartFailedError


@dataclass(frozen=True, slots=True)
class Launch:
    """What a kernel was started with: its spec, and the Docker configuration it would have had."""

    spec: KernelSpec
    config: dict[str, Any]

    @property
    def env(self) -> dict[str, str]:
        return dict(str(e).split("=", 1) for e in self.config["Env"])


@dataclass(slots=True)
class SimulatedKernel:
    """One kernel of the simulated backend: its container, output and CPU use."""

    spec: KernelSpec
    container_id: str
    launch: Launch
    status: ContainerStatus = "running"
    exit_code: int | None = None
    log: list[OutputLine] = field(default_factory=list)
    timer: asyncio.TimerHandle | None = None
    printed: int = 0
    grew: asyncio.Event = field(default_factory=asyncio.Event)
    """Set (and replaced) whenever it prints or ends: what its followers wait on."""
    cpu_load: float = 0.0
    """CPUs it keeps busy from ``cpu_since`` on (``set_cpu_load``)."""
    cpu_since: float = field(default_factory=time.monotonic)
    cpu_used_s: float = 0.0
    """CPU seconds used before ``cpu_since``."""

    def cpu_seconds(self) -> float:
        return self.cpu_used_s + self.cpu_load * (time.monotonic() - self.cpu_since)

    def print(self, text: str) -> None:
        # Engine times never decrease within a kernel; here they never repeat either.
        last = self.log[-1].at_ns if self.log else 0
        self.log.append(OutputLine(text, max(time.time_ns(), last + 1)))
        self.wake()

    def wake(self) -> None:
        self.grew.set()
        self.grew = asyncio.Event()


def behaviour(command: tuple[str, ...]) -> tuple[float | None, int]:
    """(seconds until it exits, or None to run until stopped; its exit code)."""
    if len(command) == 2 and command[0] in ("exit", "sleep"):
        try:
            value = float(command[1]) if command[0] == "sleep" else int(command[1])
        except ValueError:
            raise StartFailedError(
                f"simulated command {' '.join(command)!r} needs a number after {command[0]!r}"
            ) from None
        return (0.0, int(value)) if command[0] == "exit" else (value, 0)
    return None, 0


def print_plan(command: tuple[str, ...]) -> tuple[int, float] | None:
    """(lines, seconds) for ``("print", "<n>", "<seconds>")``; None for any other command."""
    if len(command) != 3 or command[0] != "print":
        return None
    try:
        lines, seconds = int(command[1]), float(command[2])
    except ValueError:
        lines, seconds = -1, -1.0
    if lines < 0 or not seconds >= 0:
        raise StartFailedError(
            f"simulated command {' '.join(command)!r} needs a line count and seconds after 'print'"
        )
    return lines, seconds
