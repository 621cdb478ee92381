"""Where ``jetyard up``'s services serve ``/metrics`` (docs/metrics.md). The gateway, the storage
data plane and the app proxy answer it on their own listeners; the projections, the tenancy
service, the scheduler, the agent, the serving controller and the sealer get a metrics port
each, kept in ``<data-dir>/<service>-metrics.port`` (6031 to 6036 the first time if free, else
a free one; ``JETYARD_<SERVICE>_METRICS_PORT`` replaces it). Every address is written to
``<data-dir>/prometheus-targets.json``, in the format of Prometheus' ``file_sd_configs``, so a
Prometheus on this machine scrapes the whole stack from that one file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from jetyard.runtime.data_dir import kept_service_port

OWN_LISTENER = {
    "projections": ("JETYARD_PROJECTIONS_METRICS_PORT", 6031),
    "tenancy": ("JETYARD_TENANCY_METRICS_PORT", 6032),
    "scheduler": ("JETYARD_SCHEDULER_METRICS_PORT", 6033),
    "agent": ("JETYARD_AGENT_METRICS_PORT", 6034),
    "serving": ("JETYARD_SERVING_METRICS_PORT", 6035),
    "sealer": ("JETYARD_SEALER_METRICS_PORT", 6036),
}
"""Service -> the variable naming its metrics port, and the port it gets the first time."""
TARGETS_FILE = "prometheus-targets.json"


@dataclass(frozen=True)
class MetricsSetup:
    ports: dict[str, int]
    """Service -> its metrics port, for the services with no listener of their own."""

    @classmethod
    def of(cls, data_dir: Path) -> tuple[MetricsSetup, list[str]]:
        """The ports of this start, and a warning for each kept one that is taken."""
        ports, warnings = {}, []
        for service, (variable, default) in OWN_LISTENER.items():
            wanted = int(os.environ.get(variable, "0") or 0)
            name, what = f"{service}-metrics", f"{service} metrics"
            ports[service], warning = kept_service_port(data_dir, name, default, wanted, what)
            if warning is not None:
                warnings.append(warning)
        return cls(ports), warnings

    def env(self) -> dict[str, str]:
        return {OWN_LISTENER[s][0]: str(port) for s, port in self.ports.items()}

    def urls(self, listeners: dict[str, str]) -> dict[str, str]:
        """Service -> its ``/metrics`` URL; ``listeners`` names the base URLs of the services
        that serve it on their own listener (gateway, storage, appproxy)."""
        found = {s: f"http://127.0.0.1:{port}/metrics" for s, port in self.ports.items()}
        found.update({s: f"{base}/metrics" for s, base in listeners.items()})
        return found

    @staticmethod
    def write_targets(data_dir: Path, urls: dict[str, str]) -> Path:
        """``prometheus-targets.json``: one target group per service (``job`` label
        ``jetyard-<service>``, as in deploy/prometheus.yml)."""
        groups = [
            {
                "targets": [url.split("://", 1)[1].split("/", 1)[0]],
                "labels": {"job": f"jetyard-{service}", "service": service},
            }
            for service, url in sorted(urls.items())
        ]
        path = data_dir / TARGETS_FILE
        partial = path.with_name(path.name + ".partial")
        partial.write_text(json.dumps(groups, indent=2) + "\n")
        os.replace(partial, path)
        return path
