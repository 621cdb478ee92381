"""The control plane over the loss of the log's leader (issue 27's "leader loss under load") at
full size: a three-node NATS JetStream cluster, R3 streams, two scheduler replicas and
simulated agents, a burst of ``CreateSession``; a third of the way through, the ``JY_EVENTS``
leader's nats-server is SIGKILLed (``tests.integration.failover_burst``).

Prints the time from the kill to the next accepted create and to the whole burst accepted,
how many sends were refused and sent again, how far the sessions got (every one scheduled and
every job ended is the goal), and the independent replay's report of the whole log. Exits 1
when the sessions did not all get through, a create has no accepted outcome, or the replay
found a violation. The workload holds a GPU to the end in one session of four: give it an
agent (4 GPUs) per ten sessions, or sessions wait for capacity, which is not a failure of the
cluster.

Run:  python -m bench.cluster_failover [--agents 50] [--sessions 500] [--timeout 150]
"""

from __future__ import annotations

import argparse
import asyncio
import sys

from tests.integration.failover_burst import failover_burst


async def run(agent_count: int, sessions: int, timeout: float) -> bool:
    result = await failover_burst(agent_count, sessions, timeout)
    print(f"# {sessions} creates, {agent_count} simulated agents, 2 scheduler replicas")
    print(result)
    all_accepted = all(o is not None and o.accepted for o in result.outcomes.values())
    return result.progress.done and all_accepted and result.report.ok


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=500)
    parser.add_argument("--timeout", type=float, default=150.0)
    args = parser.parse_args()
    sys.exit(0 if asyncio.run(run(args.agents, args.sessions, args.timeout)) else 1)


if __name__ == "__main__":
    main()
