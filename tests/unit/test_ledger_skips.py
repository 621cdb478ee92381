"""An agent's ledger reads past its own facts undecoded: on its agent subject only
registrations count; every node event and every correction is folded."""

from __future__ import annotations

from events.domain.agent import AgentRegistered, KernelStarted
from events.domain.node import ResourcesAllocated
from schemas.subjects import AggregateType, event_subject
from services.node.ledger import Ledger

AGENT = event_subject(AggregateType.AGENT, "n-1")
NODE = event_subject(AggregateType.NODE, "n-1")
CORRECTION = event_subject(AggregateType.CORRECTION, "c-1")


def test_only_registrations_count_on_the_agent_subject() -> None:
    ledger = Ledger()
    assert ledger.skips(AGENT, KernelStarted.event_name)
    assert ledger.skips(AGENT, "")  # no name header: not a registration
    assert not ledger.skips(AGENT, AgentRegistered.event_name)
    assert not ledger.skips(NODE, ResourcesAllocated.event_name)
    assert not ledger.skips(NODE, KernelStarted.event_name)
    assert not ledger.skips(CORRECTION, "EventSkipped")
