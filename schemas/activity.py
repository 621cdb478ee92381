"""What a session's activity report says it was doing (``SessionActivityReported``): the sources
the idle rules read, and the interval reporters write at. Pure; no subjects."""

from __future__ import annotations

from enum import StrEnum

DEFAULT_REPORT_INTERVAL_S = 60.0
"""How often a reporter (an agent, an app proxy) writes what it noted: a session is reported at
most once per source and kernel in that time, and only when something happened in it."""


class ActivitySource(StrEnum):
    OUTPUT = "output"
    """The kernel printed a line (stdout or stderr): the agent's output follower saw it."""
    APP = "app"
    """An HTTP request or WebSocket message to one of the session's apps passed the app proxy."""
    TERMINAL = "terminal"
    """Traffic on the session's terminal, through the app proxy."""
    CPU = "cpu"
    """The kernel used at least ``BUSY_FLOOR_PCT`` of its CPUs over a sample (the agent)."""
    GPU = "gpu"
    """One of the kernel's GPUs was at least ``BUSY_FLOOR_PCT`` busy when sampled (the agent)."""


TRAFFIC = frozenset({ActivitySource.OUTPUT, ActivitySource.APP, ActivitySource.TERMINAL})
"""What the idle timeout's traffic rule counts as use."""
UTILISATION = frozenset({ActivitySource.CPU, ActivitySource.GPU})
"""What the idle timeout's utilisation rule (a policy's threshold) counts as use."""
BUSY_FLOOR_PCT = 1.0
"""Utilisation under this is not reported at all: an idle kernel writes nothing, and a policy's
threshold is at least this."""
