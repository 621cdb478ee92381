"""This machine's NUMA layout, read from sysfs: which CPUs sit on which NUMA node, and which
NUMA node a PCI device (a GPU) is attached to. Reads and writes no subjects."""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from pathlib import Path

from schemas.devices import NumaNode

log = logging.getLogger(__name__)

NODE_ROOT = Path("/sys/devices/system/node")
PCI_ROOT = Path("/sys/bus/pci/devices")


def parse_cpulist(text: str) -> tuple[int, ...]:
    """``"0-3,8,10-11"`` (the kernel's list format) -> ``(0, 1, 2, 3, 8, 10, 11)``."""
    cpus: set[int] = set()
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return tuple(sorted(cpus))


def format_cpulist(cpus: Iterable[int]) -> str:
    """The inverse, with runs folded: what Docker's ``CpusetCpus`` takes."""
    runs: list[list[int]] = []
    for cpu in sorted(set(cpus)):
        if runs and cpu == runs[-1][1] + 1:
            runs[-1][1] = cpu
        else:
            runs.append([cpu, cpu])
    return ",".join(f"{a}" if a == b else f"{a}-{b}" for a, b in runs)


def numa_nodes(root: Path = NODE_ROOT) -> tuple[NumaNode, ...]:
    """Every NUMA node with CPUs, in node order. Memory-only nodes (no CPUs to pin to) are
    left out; a machine without the sysfs tree reports none."""
    found: list[NumaNode] = []
    for path in root.glob("node[0-9]*"):
        try:
            node = int(path.name.removeprefix("node"))
            cpus = parse_cpulist((path / "cpulist").read_text())
        except (OSError, ValueError) as exc:
            log.warning("NUMA node %s is not readable and is left out: %s", path, exc)
            continue
        if cpus:
            found.append(NumaNode(node=node, cpus=cpus))
    return tuple(sorted(found, key=lambda n: n.node))


def pci_numa_node(bus_id: str, root: Path = PCI_ROOT) -> int | None:
    """The NUMA node of a PCI device, from NVML's bus id (``00000000:3B:00.0``, an 8-digit
    domain). Linux names the directory with a 4-digit domain, lower case (``0000:3b:00.0``);
    both spellings are tried. -1 (no affinity) or anything unreadable: None."""
    bus = bus_id.strip().lower()
    domain, sep, rest = bus.partition(":")
    names = [bus]
    if sep:
        with contextlib.suppress(ValueError):  # not hex: only the spelling as given
            names.insert(0, f"{int(domain, 16):04x}:{rest}")
    for name in names:
        try:
            node = int((root / name / "numa_node").read_text().strip())
        except (OSError, ValueError):
            continue
        return node if node >= 0 else None
    return None
