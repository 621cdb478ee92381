"""The agent's Prometheus metrics (docs/metrics.md), served on ``JETYARD_AGENT_METRICS_PORT``
when set: the kernels it runs, the devices it offers, the lag of its ledger fold and the
process' shared counters (events appended). Reads only what the agent keeps; no subjects."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client.metrics_core import GaugeMetricFamily, Metric

from events.metrics import Metrics, consumer_lag
from services.node.agent import NodeAgent


class AgentCollector:
    def __init__(self, agent: NodeAgent) -> None:
        self._agent = agent

    def collect(self) -> Iterable[Metric]:
        agent = self._agent
        labels = [agent.node_id, agent.settings.hostname]
        kernels = GaugeMetricFamily(
            "jetyard_agent_kernels_running",
            "Kernels this agent has reported started and not yet ended",
            labels=["node", "hostname"],
        )
        kernels.add_metric(labels, len(agent.record.running))
        devices = GaugeMetricFamily(
            "jetyard_agent_devices",
            "Accelerator devices this agent offers",
            labels=["node", "hostname"],
        )
        devices.add_metric(labels, len(agent.capacity.devices))
        yield from (kernels, devices)


def agent_metrics(agent: NodeAgent) -> Metrics:
    metrics = Metrics()
    metrics.add(AgentCollector(agent))
    consumer_lag(metrics).fold(agent.fold)
    return metrics
