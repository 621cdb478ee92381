"""Issue 27's "leader loss under load": 500 ``createSession`` through two scheduler replicas on
a three-node cluster while the ``JY_EVENTS`` leader's nats-server is SIGKILLed. Every create
is accepted exactly once (one outcome, one ``SessionRequested`` on the log), every session is
scheduled and every job ends (nothing stuck in an election's wake), and the independent
replay finds no double booking."""

from __future__ import annotations

import pytest

from tests.integration.failover_burst import failover_burst

pytestmark = pytest.mark.timeout(400)


async def test_a_burst_rides_over_the_loss_of_the_logs_leader() -> None:
    result = await failover_burst(agent_count=50, sessions=500, timeout=150)
    print(result)  # the time to the next accepted command, for the log of the run
    missing = [cid for cid, outcome in result.outcomes.items() if outcome is None]
    refused = [o for o in result.outcomes.values() if o is not None and not o.accepted]
    assert not missing, f"{len(missing)} creates have no outcome, e.g. {missing[:3]}"
    assert not refused, f"{len(refused)} creates refused, e.g. {refused[:3]}"
    assert result.progress.done, f"stuck: {result.progress}"
    assert result.report.ok, result.report.violations[:10]
    assert result.report.sessions == 500  # each exactly once: a second request is a violation
    assert result.next_accepted_s < 30
