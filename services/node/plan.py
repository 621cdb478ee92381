"""Level-triggered reconcile, the pure part: compare what the node ledger wants, what containers
exist, and what the agent has reported, and say what to do. Reads and writes nothing.

Exit code -1 means no exit code exists: no process ran (stopped before it started), or the
container vanished without the agent seeing it end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Set
from dataclasses import dataclass, field
from enum import StrEnum

from commands.agent import RunningKernel
from commands.node.rules import Allocation
from services.node.backend import Container

NO_EXIT_CODE = -1
STOPPED_BEFORE_START = "stopped before it started"
VANISHED = "container vanished; its exit code is unknown"


class Report(StrEnum):
    """Which facts an ended kernel still needs on the agent's log."""

    EXIT = "exit"  # its start was reported; report the exit
    START_AND_EXIT = "start-and-exit"  # it ran, but the agent died before reporting the start
    NEVER_RAN = "never-ran"  # stopped before any process ran
    NOTHING = "nothing"  # already reported, or no allocation waits for it


@dataclass(frozen=True, slots=True)
class Ended:
    """A kernel that ended: keep its logs (if it has a container), report, then remove it."""

    kernel_id: str
    session_id: str
    exit_code: int
    reason: str
    report: Report
    container: Container | None = None
    keep_logs: bool = False


@dataclass(slots=True)
class Plan:
    start: list[tuple[str, Allocation]] = field(default_factory=list)
    """Wanted and not there (or created but never started): create and start."""
    attach: list[Container] = field(default_factory=list)
    """Running and wanted, but its start was never reported (the agent died in between)."""
    stop: list[Container] = field(default_factory=list)
    """Running, but its allocation is stopping or gone (released while the agent was away)."""
    ended: list[Ended] = field(default_factory=list)
    remove: list[Container] = field(default_factory=list)
    """Created, never started and no longer wanted: nothing ran, nothing to report."""
    forget: set[str] = field(default_factory=set)
    """Finished kernels gone from the ledger and the machine: no longer worth remembering."""

    @property
    def empty(self) -> bool:
        return not (self.start or self.attach or self.stop or self.ended or self.remove)


def plan(
    allocations: Mapping[str, Allocation],
    containers: Iterable[Container],
    running: Mapping[str, RunningKernel],
    finished: Set[str],
) -> Plan:
    """``running``: kernels whose start the agent reported and whose end it has not;
    ``finished``: kernels whose end (or failure to start) it has reported. A finished kernel
    never starts again, even while its allocation waits to be released."""
    found = {c.kernel_id: c for c in containers}
    out = Plan()
    for kernel_id in sorted(allocations.keys() | found.keys() | running.keys()):
        wanted = allocations.get(kernel_id)
        container = found.get(kernel_id)
        reported = running.get(kernel_id)
        done = kernel_id in finished
        if container is None:
            _missing(out, kernel_id, wanted, reported, done)
        elif container.status == "running":
            if wanted is None or wanted.stopping or done:
                out.stop.append(container)
            elif reported is None:
                out.attach.append(container)
        elif container.status == "created":
            if wanted is not None and not wanted.stopping and not done and reported is None:
                out.start.append((kernel_id, wanted))
            else:
                out.remove.append(container)
        else:
            out.ended.append(_exited(container, wanted, reported, done))
    out.forget = {k for k in finished if k not in allocations and k not in found}
    return out


def _missing(
    out: Plan,
    kernel_id: str,
    wanted: Allocation | None,
    reported: RunningKernel | None,
    done: bool,
) -> None:
    if reported is not None:
        out.ended.append(Ended(kernel_id, reported.session_id, NO_EXIT_CODE, VANISHED, Report.EXIT))
    elif done or wanted is None:
        return
    elif wanted.stopping:
        out.ended.append(
            Ended(
                kernel_id,
                wanted.session_id,
                NO_EXIT_CODE,
                STOPPED_BEFORE_START,
                Report.NEVER_RAN,
            )
        )
    else:
        out.start.append((kernel_id, wanted))


def _exited(
    container: Container,
    wanted: Allocation | None,
    reported: RunningKernel | None,
    done: bool,
) -> Ended:
    if reported is not None:
        report = Report.EXIT
    elif not done and wanted is not None:
        report = Report.START_AND_EXIT
    else:
        report = Report.NOTHING
    return Ended(
        kernel_id=container.kernel_id,
        session_id=reported.session_id if reported is not None else container.session_id,
        exit_code=container.exit_code if container.exit_code is not None else NO_EXIT_CODE,
        reason=exit_reason(container, wanted),
        report=report,
        container=container,
        # Kept before the exit is reported; a finished kernel's logs are already kept.
        keep_logs=not done,
    )


def exit_reason(container: Container, wanted: Allocation | None) -> str:
    if container.oom_killed:
        return "out of memory"
    if wanted is None:
        return "stopped: its allocation was released"
    if wanted.stopping:
        return "stopped on request"
    return "exited"
