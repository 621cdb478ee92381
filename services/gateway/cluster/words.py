"""Amounts and lists in words for the cluster answer's notes: "2.5 GPUs", "1.5 cores",
"3 GiB", "node-a …; and 4 more nodes". Pure; no subjects."""

from __future__ import annotations

from decimal import Decimal

FULL = 100
SHOWN_NODES = 6
"""Nodes named in one sentence; the rest are counted."""


def listed(parts: list[str], total: int) -> str:
    """The words of the first nodes (at most ``SHOWN_NODES``) of ``total``, and how many more."""
    if not parts:
        return "the group has no GPU node available"
    rest = total - len(parts)
    return "; ".join(parts) + (f"; and {count(rest, 'more node')}" if rest > 0 else "")


def count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


def upper(text: str) -> str:
    return text[:1].upper() + text[1:]


def gpu_amount(hundredths: int) -> str:
    """ "0.5 GPU", "1 GPU", "2.8 GPUs"."""
    return f"{gpus(hundredths)} {'GPUs' if hundredths > FULL else 'GPU'}"


def gpus(hundredths: int) -> str:
    """250 -> "2.5", 200 -> "2", 40 -> "0.4"."""
    text = f"{Decimal(hundredths) / FULL:f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


def cores(milli: int) -> str:
    text = f"{Decimal(milli) / 1000:f}"
    amount = text.rstrip("0").rstrip(".") if "." in text else text
    return f"{amount} {'core' if milli == 1000 else 'cores'}"


def size(n: int) -> str:
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20)):
        if n >= scale:
            return f"{n / scale:.1f}".rstrip("0").rstrip(".") + f" {unit}"
    return f"{n} B"
