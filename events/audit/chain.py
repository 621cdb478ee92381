"""The hash chain over the event log. Pure: bytes in, digests out.

Every message of ``JY_EVENTS`` extends the chain with what was stored: its position, its
subject, its ``Jy-*`` headers and its payload bytes. ``link(previous, message)`` is
SHA-256 over the previous link and those fields, each length-prefixed, so that no two
different messages (or the same message at another position) give the same input. The server's
own ``Nats-*`` headers (expected sequences, batch ids, message ids) are protocol, not content,
and stay out: a restored log is written without them and must verify the same.

A seal (``events.audit.seals``) records the chain's value after its last message, and a
*mark* per message — the first ``MARK_BYTES`` of each link — so a verifier that finds the
chain broken can name the first position where the log differs from what was sealed.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass

GENESIS = hashlib.sha256(b"jetyard seal chain v1").digest()
"""The chain's value before the log's first message."""
MARK_BYTES = 8
"""How much of each link a seal keeps, to locate a difference (not to secure it: the head,
signed, does that)."""
CONTENT_HEADER_PREFIX = "Jy-"


@dataclass(frozen=True, slots=True)
class LogMessage:
    """One stored message of the log, as the chain sees it."""

    seq: int
    subject: str
    headers: Mapping[str, str]
    data: bytes


def content_headers(headers: Mapping[str, str]) -> bytes:
    """The headers the chain covers, in one canonical form (sorted ``name: value`` lines)."""
    lines = sorted(
        f"{name}: {value}"
        for name, value in headers.items()
        if name.startswith(CONTENT_HEADER_PREFIX)
    )
    return "\n".join(lines).encode()


def link(previous: bytes, message: LogMessage) -> bytes:
    """The chain's value once ``message`` follows ``previous``."""
    subject = message.subject.encode()
    headers = content_headers(message.headers)
    digest = hashlib.sha256(previous)
    digest.update(message.seq.to_bytes(8, "big"))
    digest.update(len(subject).to_bytes(4, "big"))
    digest.update(subject)
    digest.update(len(headers).to_bytes(4, "big"))
    digest.update(headers)
    digest.update(len(message.data).to_bytes(8, "big"))
    digest.update(message.data)
    return digest.digest()


class Chain:
    """The chain as messages arrive in log order, with the marks of those since ``cut``."""

    def __init__(self, head: bytes = GENESIS, position: int = 0) -> None:
        self.head = head
        self.position = position
        """The last position linked (0: none)."""
        self.marks = bytearray()
        self.count = 0
        """Messages linked since the last ``cut``."""

    def add(self, message: LogMessage) -> bytes:
        if message.seq <= self.position:
            raise ValueError(
                f"position {message.seq} does not follow {self.position}: a log is read in order"
            )
        self.head = link(self.head, message)
        self.position = message.seq
        self.marks += self.head[:MARK_BYTES]
        self.count += 1
        return self.head

    def cut(self) -> tuple[bytes, int]:
        """The marks and count since the last cut, and start anew from here."""
        marks, count = bytes(self.marks), self.count
        self.marks, self.count = bytearray(), 0
        return marks, count
