"""A small log and its seals, made with the real chain and signing code, for the audit tests."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from events.audit.chain import Chain, LogMessage
from events.audit.seals import NO_PREVIOUS, Seal, sign

AT = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


def message(seq: int, text: str | None = None) -> LogMessage:
    body = {"name": "Example", "n": seq, "text": text or f"event {seq}"}
    headers = {"Jy-Event": "Example", "Jy-Event-Id": f"id-{seq}", "Nats-Msg-Id": f"m{seq}"}
    return LogMessage(seq, f"ev.session.s{seq % 3}", headers, json.dumps(body).encode())


def log_of(count: int) -> list[LogMessage]:
    return [message(seq) for seq in range(1, count + 1)]


def seal_log(log: list[LogMessage], key: Ed25519PrivateKey, every: int) -> list[Seal]:
    """Seals over ``log`` every ``every`` messages (the last one over what is left)."""
    chain, seals = Chain(), list[Seal]()
    for index, item in enumerate(log, 1):
        chain.add(item)
        if index % every == 0 or index == len(log):
            previous = seals[-1] if seals else None
            count = chain.count
            seals.append(
                sign(
                    key,
                    number=len(seals) + 1,
                    first=previous.last + 1 if previous else 1,
                    last=chain.position,
                    count=count,
                    head=chain.head,
                    marks=bytes(chain.marks),
                    previous=previous.digest() if previous else NO_PREVIOUS,
                    sealed_at=AT,
                )
            )
            chain.cut()
    return seals


def with_data(item: LogMessage, data: bytes) -> LogMessage:
    return replace(item, data=data)
