"""What an image's labels say about running it: the least resources a kernel of it needs and
the apps it serves, read from Backend.AI's labels or Jetyard's. Pure; no subjects.

Minimum resources come from ``ai.backend.resource.min.<slot>`` (``cpu`` in cores, ``mem`` as a
size such as ``512m`` or ``1g``, ``cuda.device`` in whole GPUs, ``cuda.shares`` in fractions of
one) and from Jetyard's ``jetyard.resource.min.<slot>`` (``cpu``, ``mem``, ``gpu``). Jetyard's
label wins over Backend.AI's for the same slot, as ``schemas.service_ports`` does for apps, so
an admin can correct a base image's label with one of their own. Service ports are
``schemas.service_ports.service_ports_of``'s reading.

A label that cannot be used is a problem to report (which label, what value, why), never an
exception: a registry scan must go on past one badly labelled image.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

from pydantic import BaseModel, ConfigDict

from schemas.bounds import (
    CEILINGS,
    BoundsError,
    cpu_milli,
    decimal_of,
    gpu_hundredths,
    memory_bytes,
)
from schemas.resources import ResourceSlots
from schemas.service_ports import ServicePort, ServicePortError, service_ports_of

BACKENDAI_MIN_PREFIX = "ai.backend.resource.min."
JETYARD_MIN_PREFIX = "jetyard.resource.min."
SHOWN_CHARS = 80
"""A label value is quoted back at most this long in a problem."""

Slot = str
"""A ``ResourceSlots`` field: ``cpu_milli``, ``memory_bytes`` or ``gpu_hundredths``."""


class ImageFacts(BaseModel):
    """What the labels say: the least resources per kernel, the apps, and the labels that
    could not be read (each a sentence naming the label, its value and the reason)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    min_resources: ResourceSlots = ResourceSlots()
    service_ports: tuple[ServicePort, ...] = ()
    problems: tuple[str, ...] = ()


def _cpu(text: str) -> int:
    # Zero is a fine minimum; cpu_milli's 0.01-core floor is for limits given to a container.
    return 0 if decimal_of("cpu", text) == 0 else cpu_milli(text, CEILINGS)


def _memory(text: str) -> int:
    return memory_bytes(text, CEILINGS, least=0)


def _gpu(text: str) -> int:
    return gpu_hundredths(text, CEILINGS)


def _whole_gpus(text: str) -> int:
    amount = decimal_of("gpu", text)
    if amount != amount.to_integral_value():
        raise BoundsError(f"gpu {text.strip()!r} is not a whole number of devices")
    return _gpu(text)


_Reader = tuple[Slot, Callable[[str], int]]

BACKENDAI_SLOTS: dict[str, _Reader] = {
    "cpu": ("cpu_milli", _cpu),
    "mem": ("memory_bytes", _memory),
    "cuda.device": ("gpu_hundredths", _whole_gpus),
    "cuda.shares": ("gpu_hundredths", _gpu),
}
JETYARD_SLOTS: dict[str, _Reader] = {
    "cpu": ("cpu_milli", _cpu),
    "mem": ("memory_bytes", _memory),
    "gpu": ("gpu_hundredths", _gpu),
}


def image_facts(labels: Mapping[str, str]) -> ImageFacts:
    """Read an image's labels (``config.Labels`` of its config blob)."""
    problems: list[str] = []
    backendai = _minimums(labels, BACKENDAI_MIN_PREFIX, BACKENDAI_SLOTS, problems)
    jetyard = _minimums(labels, JETYARD_MIN_PREFIX, JETYARD_SLOTS, problems)
    minimums = {**backendai, **jetyard}
    try:
        ports = service_ports_of(labels)
    except ServicePortError as exc:
        # The parser's message already names the label and the bad entry.
        problems.append(str(exc))
        ports = ()
    return ImageFacts(
        min_resources=ResourceSlots(**minimums),
        service_ports=ports,
        problems=tuple(problems),
    )


def _minimums(
    labels: Mapping[str, str],
    prefix: str,
    readers: Mapping[str, _Reader],
    problems: list[str],
) -> dict[Slot, int]:
    found: dict[Slot, int] = {}
    for name in sorted(labels):
        if not name.startswith(prefix):
            continue
        value = labels[name]
        reader = readers.get(name.removeprefix(prefix))
        if reader is None:
            known = ", ".join(prefix + s for s in readers)
            problems.append(
                f"label {name}={_shown(value)}: Jetyard has no such resource (it reads {known}); "
                "ignored"
            )
            continue
        slot, read = reader
        try:
            amount = read(value)
        except BoundsError as exc:
            # Every BoundsError quotes the value it refused.
            problems.append(f"label {name}: {exc}")
            continue
        # cuda.device and cuda.shares both ask for GPU: the larger is the minimum.
        found[slot] = max(found.get(slot, 0), amount)
    return found


def _shown(value: str) -> str:
    return repr(value if len(value) <= SHOWN_CHARS else value[: SHOWN_CHARS - 3] + "...")
