"""What the features share for turning GraphQL input into commands: the error that names a
mistake in one sentence, and amounts and sizes parsed with their units. Pure."""

from __future__ import annotations

from decimal import Decimal

from schemas.bounds import (
    DEFAULT_LIMITS,
    MEMORY_MIN_BYTES,
    BoundsError,
    InputLimits,
    decimal_of,
    memory_bytes,
)


class InputError(ValueError):
    """Input the gateway refuses before anything is sent."""


def parse_memory(text: str, limits: InputLimits = DEFAULT_LIMITS) -> int:
    """``"64m"``, ``"1.5GiB"``, ``"1073741824"`` → bytes, at least Docker's 6 MiB."""
    try:
        return memory_bytes(text, limits, least=MEMORY_MIN_BYTES)
    except BoundsError as exc:
        raise InputError(str(exc)) from None


def parse_amount(what: str, text: str) -> Decimal:
    """A plain non-negative decimal (ASCII digits, at most one point)."""
    try:
        return decimal_of(what, text)
    except BoundsError as exc:
        raise InputError(str(exc)) from None
