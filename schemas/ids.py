"""Identifiers: the subject-safe token rule and the deterministic id derivations."""

from __future__ import annotations

import hashlib
import re
import uuid
from typing import Annotated

from pydantic import AfterValidator

TOKEN_PATTERN = re.compile(r"^[A-Za-z0-9_-]{1,64}$")

# Every id that becomes part of a subject is derived in this namespace, so that the same
# input (command id, host name) gives the same id on every machine and after every restart.
JETYARD_NAMESPACE = uuid.UUID("6c1f4e0a-2b55-4d0e-9d3a-4a8f1b0c7e21")


class InvalidTokenError(ValueError):
    """A value cannot be used as one token of a NATS subject."""


def check_token(value: str, what: str = "id") -> str:
    """Return ``value`` if it is a safe subject token, else raise with the rule spelled out."""
    if not TOKEN_PATTERN.match(value):
        raise InvalidTokenError(
            f"{what} {value[:80]!r}{'...' if len(value) > 80 else ''} is not a valid id: "
            "use 1 to 64 characters of A-Z, a-z, 0-9, '_' or '-'"
        )
    return value


Token = Annotated[str, AfterValidator(check_token)]
"""A string that may be used as one subject token (ids, command ids)."""


_NAMESPACED = hashlib.sha1(JETYARD_NAMESPACE.bytes, usedforsecurity=False)
"""The hash with the namespace already fed in: each id copies it and adds its name."""
_VARIANT = {digit: f"{(int(digit, 16) & 0x3) | 0x8:x}" for digit in "0123456789abcdef"}
"""The hex digit that starts a uuid's fourth group, from the hash's digit there: the RFC 4122
variant's two bits over the hash's low two."""


def derived_id(kind: str, *parts: str) -> str:
    """A stable uuid5 text id for ``kind`` from ``parts`` (e.g. a session from its command id):
    ``str(uuid.uuid5(JETYARD_NAMESPACE, "kind/part/..."))``, computed without the ``UUID``
    objects, as text from the hash's hex digits (a decision pass derives several ids per
    session)."""
    digest = _NAMESPACED.copy()
    digest.update("/".join((kind, *parts)).encode())
    h = digest.hexdigest()
    # Version 5 in the third group's first digit; the variant bits in the fourth's.
    return f"{h[:8]}-{h[8:12]}-5{h[13:16]}-{_VARIANT[h[16]]}{h[17:20]}-{h[20:32]}"


def session_id_for(command_id: str) -> str:
    """The session created by a ``CreateSession`` command: retries map to the same session."""
    return derived_id("session", command_id)


def kernel_id_for(session_id: str, index: int) -> str:
    return derived_id("kernel", session_id, str(index))


def node_id_for_host(hostname: str, cluster_id: str = "") -> str:
    """The node id agents had before each kept its own (``services.node.identity``): a uuid5
    of the installation's cluster id and the host name (from the host name alone without a
    cluster id). An agent whose data directory predates ``node.id`` keeps it, as its ledger
    and containers carry it; a new agent gets a random id instead, so two agents on one host
    are two nodes."""
    if cluster_id:
        return derived_id("node", cluster_id, hostname)
    return derived_id("node", hostname)


def event_id_for(causation_id: str, aggregate_type: str, aggregate_id: str, version: int) -> str:
    """Event ids derive from what caused them, so a retried decision writes the same ids."""
    return derived_id("event", causation_id, aggregate_type, aggregate_id, str(version))


def new_id() -> str:
    return str(uuid.uuid4())
