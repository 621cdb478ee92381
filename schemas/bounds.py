"""Bounds on everything a client sends: amounts parsed strictly (ASCII digits, no exponent, no
NaN or infinity), positive minimums where zero or a tiny value would mean "unlimited" or fail
at the container engine, maximums for every slot and count, and no control characters in any
text. The gateway checks them before it sends anything; the scheduler and the tenancy service
check the same rules again on the command, so no writer can put an out-of-range value on the
log. Pure; no subjects.

The maximums are configurable (``InputLimits``, from ``JETYARD_LIMIT_*``) and default well
above any real machine; the hard ceilings below them keep every stored value inside a signed
64-bit integer, so no read model can overflow.
"""

from __future__ import annotations

import re
from decimal import Decimal

from pydantic import BaseModel, ConfigDict, Field

CPU_MIN_MILLI = 10
"""0.01 of a core: Docker's ``--cpus`` takes nothing finer (NanoCPUs in steps of 10^7), and a
zero limit would mean "no limit"."""
MEMORY_MIN_BYTES = 6 * 1024 * 1024
"""Docker refuses a memory limit below 6 MiB ("Minimum memory limit allowed is 6MB")."""
GPU_QUANTUM_TEXT = "0.01"

CEILING = 1 << 62
"""No stored amount or count reaches this: it leaves room to add many in a signed 64-bit
integer, which is what the read models store."""

_NUMBER = re.compile(r"^[0-9]+(?:\.[0-9]+)?$")
_SIZE = re.compile(r"^([0-9]+(?:\.[0-9]+)?)([kmgtKMGT]?)(?:[iI]?[bB])?$")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
DIGITS_MAX = 30
"""Longer numbers are refused before any arithmetic: no value we accept needs more."""


class BoundsError(ValueError):
    """A value outside what Jetyard accepts; the message names the limit."""


class InputLimits(BaseModel):
    """The configurable maximums (per kernel for slots). Defaults are far above any machine."""

    model_config = ConfigDict(frozen=True)

    max_cpu_milli: int = Field(default=4096 * 1000, ge=CPU_MIN_MILLI, le=CEILING)
    """4,096 cores per kernel."""
    max_memory_bytes: int = Field(default=64 << 40, ge=MEMORY_MIN_BYTES, le=CEILING)
    """64 TiB per kernel."""
    max_gpu_hundredths: int = Field(default=256 * 100, ge=1, le=CEILING)
    """256 devices per kernel."""
    max_count: int = Field(default=1_000_000, ge=1, le=CEILING)
    """Any count in a policy (sessions, pending sessions, folders...)."""
    max_seconds: int = Field(default=366 * 24 * 3600, ge=1, le=CEILING)
    """Any duration in seconds (a year)."""
    max_text: int = Field(default=4096, ge=64, le=1 << 20)
    """Any single text value: an env value, a command word, a description."""


DEFAULT_LIMITS = InputLimits()

CEILINGS = InputLimits(
    max_cpu_milli=CEILING,
    max_memory_bytes=CEILING,
    max_gpu_hundredths=CEILING,
    max_count=CEILING,
    max_seconds=CEILING,
    max_text=1 << 20,
)
"""What a command model checks by itself (no settings at hand): the minimums, the control
characters and the hard ceilings. The configured maximums are checked where the settings are
(the gateway, the scheduler, the tenancy service)."""


def decimal_of(what: str, text: str) -> Decimal:
    """A non-negative decimal written with ASCII digits and at most one point: no sign, no
    exponent, no NaN or infinity, no digits of other scripts."""
    cleaned = text.strip()
    if cleaned.startswith("-") and _NUMBER.match(cleaned[1:]):
        raise BoundsError(f"{what} must not be negative, got {_shown(text)}")
    if len(cleaned) > DIGITS_MAX or not _NUMBER.match(cleaned):
        raise BoundsError(
            f"{what} {_shown(text)} is not a plain number: write digits 0-9 with at most one "
            "decimal point (no sign, exponent, NaN or infinity), e.g. 2 or 0.5"
        )
    return Decimal(cleaned)


def cpu_milli(text: str, limits: InputLimits = DEFAULT_LIMITS) -> int:
    """Cores as text -> milli-CPU, between 0.01 core and the configured maximum."""
    amount = decimal_of("cpu", text) * 1000
    if amount != amount.to_integral_value():
        raise BoundsError(f"cpu {_shown(text)} is finer than 0.001 of a core")
    return check_cpu(int(amount), limits, shown=_shown(text))


def check_cpu(milli: int, limits: InputLimits = DEFAULT_LIMITS, *, shown: str = "") -> int:
    shown = shown or f"{milli / 1000:g}"
    if milli < CPU_MIN_MILLI:
        raise BoundsError(
            f"cpu {shown} is below the least a container can be given: 0.01 of a core "
            "(Docker's smallest CPU limit; zero would mean no limit at all)"
        )
    if milli > limits.max_cpu_milli:
        raise BoundsError(
            f"cpu {shown} is above the most one kernel may ask for: "
            f"{limits.max_cpu_milli / 1000:g} cores (JETYARD_LIMIT_MAX_CPU_MILLI)"
        )
    return milli


def memory_bytes(text: str, limits: InputLimits = DEFAULT_LIMITS, *, least: int = 1) -> int:
    """A size as text (bytes, or with k/m/g/t, optionally "iB"/"b") -> bytes. ``least`` is the
    smallest accepted (sessions: Docker's 6 MiB; limits: 0)."""
    cleaned = text.strip()
    if cleaned.startswith("-") and _SIZE.match(cleaned[1:]):
        raise BoundsError(f"memory must not be negative, got {_shown(text)}")
    match = _SIZE.match(cleaned) if len(cleaned) <= DIGITS_MAX else None
    if match is None:
        raise BoundsError(
            f"memory {_shown(text)} is not a size: write digits 0-9 with an optional unit "
            "k, m, g or t (powers of 1024), e.g. 512m or 2g"
        )
    amount = int(Decimal(match.group(1)) * _UNITS[match.group(2).lower()])
    return check_memory(amount, limits, least=least, shown=_shown(text))


def check_memory(
    amount: int, limits: InputLimits = DEFAULT_LIMITS, *, least: int = 1, shown: str = ""
) -> int:
    shown = shown or f"{amount} bytes"
    if amount < least:
        if least == MEMORY_MIN_BYTES:
            raise BoundsError(
                f"memory {shown} is below the least a container can be given: 6 MiB "
                "(Docker's smallest memory limit)"
            )
        raise BoundsError(f"memory {shown} is below {least} bytes")
    if amount > limits.max_memory_bytes:
        raise BoundsError(
            f"memory {shown} is above the most one kernel may ask for: "
            f"{limits.max_memory_bytes >> 30} GiB (JETYARD_LIMIT_MAX_MEMORY_BYTES)"
        )
    return amount


def gpu_hundredths(text: str, limits: InputLimits = DEFAULT_LIMITS) -> int:
    """Devices as text -> hundredths: 0 (none) or a multiple of 0.01 up to the maximum."""
    amount = decimal_of("gpu", text) * 100
    if amount != amount.to_integral_value():
        raise BoundsError(
            f"gpu {_shown(text)} is finer than a share allows: GPUs are given in steps of "
            f"{GPU_QUANTUM_TEXT} of a device"
        )
    return check_gpu(int(amount), limits, shown=_shown(text))


def check_gpu(hundredths: int, limits: InputLimits = DEFAULT_LIMITS, *, shown: str = "") -> int:
    shown = shown or f"{hundredths / 100:g}"
    if hundredths < 0 or hundredths > limits.max_gpu_hundredths:
        raise BoundsError(
            f"gpu {shown} is above the most one kernel may ask for: "
            f"{limits.max_gpu_hundredths / 100:g} devices (JETYARD_LIMIT_MAX_GPU_HUNDREDTHS)"
        )
    return hundredths


def check_count(
    what: str, value: int, limits: InputLimits = DEFAULT_LIMITS, *, least: int = 0
) -> int:
    if value < least:
        raise BoundsError(f"{what} must be at least {least}, got {value}")
    if value > limits.max_count:
        raise BoundsError(
            f"{what} {value} is above the most Jetyard accepts: {limits.max_count} "
            "(JETYARD_LIMIT_MAX_COUNT)"
        )
    return value


def check_seconds(
    what: str, value: int, limits: InputLimits = DEFAULT_LIMITS, *, least: int = 1
) -> int:
    if value < least:
        raise BoundsError(f"{what} must be at least {least} second(s), got {value}")
    if value > limits.max_seconds:
        raise BoundsError(
            f"{what} {value} s is above the most Jetyard accepts: {limits.max_seconds} s "
            "(JETYARD_LIMIT_MAX_SECONDS)"
        )
    return value


def check_text(
    what: str, value: str, limits: InputLimits = DEFAULT_LIMITS, *, lines: bool = False
) -> str:
    """No control characters (NUL, escapes...) and not longer than the maximum. ``lines``
    lets tabs and newlines through (a command word may be a multi-line script)."""
    if len(value) > limits.max_text:
        raise BoundsError(f"{what} is {len(value)} characters long; the most is {limits.max_text}")
    bad = control_character_in_text(value) if lines else control_character(value)
    if bad is not None:
        raise BoundsError(
            f"{what} contains a control character ({bad}): only printable text is accepted"
        )
    return value


_CONTROL = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")


_CONTROL_IN_TEXT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
"""The same, less tab and line feed."""


def control_character(value: str) -> str | None:
    """The first control character in ``value`` as U+XXXX, or None (tabs and newlines count)."""
    found = _CONTROL.search(value)
    return None if found is None else f"U+{ord(found.group()):04X}"


def control_character_in_text(value: str) -> str | None:
    """Like ``control_character``, for text that may hold tabs and newlines."""
    found = _CONTROL_IN_TEXT.search(value)
    return None if found is None else f"U+{ord(found.group()):04X}"


def _shown(text: str) -> str:
    """The value as said back to the client: quoted, shortened, control characters escaped."""
    short = text if len(text) <= 40 else text[:37] + "..."
    return repr(short)
