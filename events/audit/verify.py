"""Checking a log against its seals. Pure: messages and seals are handed in, in log order.

``Verifier`` first checks the seals among themselves (each signed by a trusted key, numbered
in turn, naming its predecessor's digest, covering the positions right after it), then takes
the log's messages one at a time, extends the chain, and compares each link with the mark the
covering seal kept for it and each seal's last link with its head. The first difference is
reported with the position where the log stops being what was sealed: a changed message (its
bytes, subject or headers), a missing one, one inserted, two reordered. Messages after the last
seal are linked and counted as not sealed yet, which is no failure.

A verifier may start from a trusted seal (``start``, with the digest an operator anchored
outside the cluster): the chain then resumes from that seal's head and nothing before it is
read. Or it reads from the log's first position and checks that the anchored digest is among
the seals it verified (a log rewritten and sealed afresh with a stolen key does not hold it).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from events.audit.chain import MARK_BYTES, Chain, LogMessage
from events.audit.seals import NO_PREVIOUS, Seal, SealError, signed_by


@dataclass(frozen=True)
class Problem:
    """Where the log first differs from its seals, and how."""

    position: int
    kind: str
    """``changed``, ``missing``, ``inserted``, ``reordered``, ``seal`` or ``anchor``."""
    text: str


@dataclass
class VerifyReport:
    events: int = 0
    """Messages read and linked."""
    seals: int = 0
    """Seals whose every message matched."""
    sealed_to: int = 0
    """The last position a verified seal covers."""
    unsealed: int = 0
    """Messages after the last seal."""
    head: str = ""
    """The chain's value after the last message read (hex)."""
    last_seal: str | None = None
    """The digest of the last verified seal: the one to anchor next."""
    problem: Problem | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.problem is None

    def summary(self) -> str:
        if self.problem is not None:
            return f"FAILED at position {self.problem.position}: {self.problem.text}"
        tail = f"; {self.unsealed} events after it not sealed yet" if self.unsealed else ""
        return (
            f"verified: {self.events} events, {self.seals} seals, sealed up to position "
            f"{self.sealed_to}{tail}"
        )


class Verifier:
    def __init__(
        self,
        seals: list[Seal],
        keys: dict[str, Ed25519PublicKey],
        *,
        start: Seal | None = None,
        anchor: str | None = None,
    ) -> None:
        self.report = VerifyReport()
        self._anchor = anchor
        self._anchored = start is not None
        self._chain = Chain()
        self._skip_to = 0
        previous: Seal | None = None
        if start is not None:
            if not signed_by(start, keys):
                raise SealError(f"the trusted seal {start.number} is not signed by a trusted key")
            if anchor is not None and start.digest() != anchor:
                raise SealError(f"seal {start.number}'s digest is not the anchored {anchor}")
            self._chain = Chain(bytes.fromhex(start.head), start.last)
            self._skip_to = start.last
            self.report.sealed_to, self.report.last_seal = start.last, start.digest()
            seals = [s for s in seals if s.number > start.number]
            previous = start
        self._seals, self._seal_problem = _good_prefix(seals, keys, previous)
        self._index = 0
        self._marks = self._seals[0].mark_list() if self._seals else []
        self._done = False

    def message(self, message: LogMessage) -> bool:
        """Take the log's next message; False once a problem is found (read no more)."""
        if self._done:
            return False
        if message.seq <= self._skip_to:
            return True  # before the trusted seal: taken as it sealed them
        if message.seq <= self._chain.position:
            return self._fail(
                message.seq, "reordered",
                f"position {message.seq} comes after position {self._chain.position}: "
                "events inserted or reordered",
            )  # fmt: skip
        seal = self._seals[self._index] if self._index < len(self._seals) else None
        if seal is not None:
            found = self._place(seal, message)
            if found is not None:
                return self._fail(*found)
        self._chain.add(message)
        self.report.events += 1
        self.report.head = self._chain.head.hex()
        if seal is None:
            self.report.unsealed += 1
            return True
        marks, count = self._chain.marks, self._chain.count
        if bytes(marks[-MARK_BYTES:]) != self._marks[count - 1]:
            return self._fail(
                message.seq, "changed",
                f"position {message.seq} is not what seal {seal.number} sealed (its bytes, "
                "subject or headers changed, or events were removed, inserted or reordered "
                "before it)",
            )  # fmt: skip
        if count == seal.count:
            return self._close(seal)
        return True

    def finish(self) -> VerifyReport:
        """The report, once the log's last message was handed in."""
        if self._done:
            return self.report
        if self._index < len(self._seals):
            seal = self._seals[self._index]
            missing = self._expected(seal) or self._chain.position + 1
            self._fail(
                missing, "missing",
                f"seal {seal.number} covers positions {seal.first} to {seal.last}, but the log "
                f"ends at position {self._chain.position}",
            )  # fmt: skip
            return self.report
        if self._seal_problem is not None:
            self._fail(*self._seal_problem)
            return self.report
        if self._anchor is not None and not self._anchored:
            self._fail(
                0, "anchor",
                f"no verified seal has the anchored digest {self._anchor}: the log was "
                "rewritten, or the anchor belongs to another installation",
            )  # fmt: skip
        self._done = True
        return self.report

    # ---- inside ------------------------------------------------------------------------

    def _expected(self, seal: Seal) -> int | None:
        """The position the next message must have, where the seal's range has no gaps."""
        if seal.count != seal.last - seal.first + 1:
            return None
        return seal.first + self._chain.count

    def _place(self, seal: Seal, message: LogMessage) -> tuple[int, str, str] | None:
        if message.seq < seal.first:
            return (
                message.seq, "inserted",
                f"position {message.seq} lies in a range seal {seal.number - 1} sealed "
                "without it",
            )  # fmt: skip
        expected = self._expected(seal)
        if message.seq > seal.last:
            position = expected if expected is not None else self._chain.position + 1
            return (
                position, "missing",
                f"seal {seal.number} covers {seal.count} events up to position {seal.last}, "
                f"but the log goes on at position {message.seq} after "
                f"{self._chain.count} of them",
            )  # fmt: skip
        if expected is not None and message.seq != expected:
            return (
                expected, "missing",
                f"position {expected} is not where seal {seal.number} sealed it (the log goes "
                f"on at position {message.seq}): removed or moved",
            )  # fmt: skip
        return None

    def _close(self, seal: Seal) -> bool:
        if self._chain.head.hex() != seal.head:
            return self._fail(
                seal.last, "changed",
                f"the chain after position {seal.last} is not seal {seal.number}'s head",
            )  # fmt: skip
        self._chain.cut()
        self.report.seals += 1
        self.report.sealed_to = seal.last
        self.report.last_seal = seal.digest()
        if self._anchor is not None and self.report.last_seal == self._anchor:
            self._anchored = True
        self._index += 1
        if self._index < len(self._seals):
            self._marks = self._seals[self._index].mark_list()
        return True

    def _fail(self, position: int, kind: str, text: str) -> bool:
        self.report.problem = Problem(position, kind, text)
        self._done = True
        return False


def _good_prefix(
    seals: list[Seal], keys: dict[str, Ed25519PublicKey], previous: Seal | None
) -> tuple[list[Seal], tuple[int, str, str] | None]:
    """The seals up to the first that does not follow from its predecessor or is not signed
    by a trusted key, and what is wrong with that one."""
    good: list[Seal] = []
    for seal in seals:
        wrong = _wrong(seal, keys, previous)
        if wrong is not None:
            return good, (seal.first, "seal", f"seal {seal.number}: {wrong}")
        good.append(seal)
        previous = seal
    return good, None


def _wrong(seal: Seal, keys: dict[str, Ed25519PublicKey], previous: Seal | None) -> str | None:
    if not signed_by(seal, keys):
        return f"not signed by a trusted key (key id {seal.key_id}): forged or altered"
    number, digest, first = (
        (1, NO_PREVIOUS, 1)
        if previous is None
        else (previous.number + 1, previous.digest(), previous.last + 1)
    )
    if seal.number != number:
        return f"numbered {seal.number} where seal {number} belongs: a seal removed or moved"
    if seal.previous != digest:
        return "does not name its predecessor's digest: a seal replaced or moved"
    if seal.first != first or seal.last < seal.first:
        return f"covers positions {seal.first} to {seal.last}, not from {first} on"
    if seal.count > seal.last - seal.first + 1:
        return f"claims {seal.count} events in {seal.last - seal.first + 1} positions"
    try:
        seal.mark_list()
    except SealError as exc:
        return str(exc)
    return None
