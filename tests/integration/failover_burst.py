"""A burst of ``CreateSession`` over the loss of the log's leader, on a three-node NATS
JetStream cluster (``tests.nats_cluster_support``, R3 streams) with two scheduler replicas and
simulated agents: a third of the way through, the ``JY_EVENTS`` leader's nats-server is
SIGKILLed. What ``test_cluster_failover`` runs and ``bench.cluster_failover`` prints. Writes
what the schedulers, the agents and the burst's commands write.

The client sends again, with the same command id, what got no answer: the duplicate window
(``Nats-Msg-Id``) and the outcome check keep a resent create from being decided twice.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import nats.errors
import nats.js.errors

from commands.bus import CommandBus
from commands.messages import CreateSession
from commands.outcome import Outcome
from events.audit.invariants import InvariantReport, replay_log
from events.bus import connect, ensure_streams
from events.store import EventStore
from events.writes import OutcomeUnknownError, UnavailableError
from schemas.ids import session_id_for
from schemas.subjects import EVENTS_STREAM
from schemas.tenancy import KeypairPolicyLimits
from tests.integration.replica_burst import KEYPAIRS, Progress, create, follow
from tests.integration.replica_support import agents, replicas, until
from tests.nats_cluster_support import nats_cluster
from tests.tenancy_support import make_tenancy


@dataclass
class Failover:
    leader: str
    """The member that led ``JY_EVENTS`` and was killed."""
    next_accepted_s: float
    """From the kill to the first create accepted after it."""
    rest_accepted_s: float
    """From the kill to the last create of the burst accepted."""
    refused: int
    """Sends that raised (no leader, no answer) and were sent again."""
    settled_s: float
    """From the kill to every session scheduled and every job ended (or the timeout)."""
    progress: Progress
    outcomes: dict[str, Outcome | None]
    """Each create's outcome, read after the burst settled (None: none stored)."""
    report: InvariantReport

    def __str__(self) -> str:
        accepted = sum(1 for o in self.outcomes.values() if o is not None and o.accepted)
        return "\n".join(
            [
                f"{self.leader} (the JY_EVENTS leader) killed a third of the way through",
                f"first create accepted {self.next_accepted_s:.1f} s after the kill, the rest "
                f"of the burst {self.rest_accepted_s:.1f} s after ({self.refused} sends refused "
                "and sent again)",
                f"{self.progress} {self.settled_s:.1f} s after the kill; "
                f"{accepted}/{len(self.outcomes)} creates accepted",
                f"replay: {self.report}",
            ]
        )


async def failover_burst(agent_count: int, sessions: int, timeout: float) -> Failover:
    with (
        tempfile.TemporaryDirectory(prefix="jy-failover-") as tmp,
        nats_cluster(Path(tmp)) as cluster,
    ):
        await cluster.ready()
        settings = cluster.settings()
        client = await connect(settings, name="failover-client")
        try:
            await ensure_streams(client)
            store = EventStore(client)
            limits = KeypairPolicyLimits(max_containers_per_session=2)
            owners = [(await make_tenancy(store, limits=limits)).owner for _ in range(KEYPAIRS)]
            cmds = [create(i, owners[i % KEYPAIRS]) for i in range(sessions)]
            progress = Progress(
                sessions={session_id_for(c.command_id) for c in cmds},
                jobs={session_id_for(c.command_id) for c in cmds if c.spec.command is not None},
            )
            async with (
                replicas(settings, leases=False) as schedulers,
                agents(settings, agent_count, prefix="failover"),
            ):
                await until(
                    f"{agent_count} nodes registered", 120,
                    lambda: all(len(s.state.nodes) == agent_count for s in schedulers),
                )  # fmt: skip
                leader = await cluster.leader_of(EVENTS_STREAM)
                following = asyncio.create_task(follow(client, progress, timeout))
                commands = CommandBus(client)
                refused = 0
                accepted_at: list[float] = []

                async def send(cmd: CreateSession) -> None:
                    nonlocal refused
                    while True:
                        try:
                            await commands.send(cmd)
                            accepted_at.append(time.monotonic())
                            return
                        except (
                            nats.errors.Error, nats.js.errors.Error, TimeoutError,
                            UnavailableError, OutcomeUnknownError,
                        ):  # fmt: skip
                            # No leader (not stored), or no answer in time (perhaps stored):
                            # the same id again either way, as the error says.
                            refused += 1
                            await asyncio.sleep(0.3)

                third = sessions // 3
                await asyncio.gather(*(send(c) for c in cmds[:third]))
                cluster.kill(leader)
                killed = time.monotonic()
                del accepted_at[:]
                await asyncio.gather(*(send(c) for c in cmds[third:]))
                next_accepted, rest_accepted = min(accepted_at) - killed, time.monotonic() - killed
                await following
                settled = time.monotonic() - killed
                outcomes = {
                    c.command_id: await commands.wait_outcome(c.command_id, 10) for c in cmds
                }
                if progress.done:
                    for scheduler in schedulers:
                        await scheduler.settle()
            cluster.restart(leader)
            report = await replay_log(client, settled=progress.done)
        finally:
            await client.close()
    return Failover(
        leader, next_accepted, rest_accepted, refused, settled, progress, outcomes, report
    )
