"""The backup file: the sealed log in one file, JSON lines, readable with ``jq``.

    {"jetyard_backup": 1, "created_at": ..., "log_end": N, "sealed_to": N, ...}  header
    {"seal": {...}}                                             every seal, in order
    {"seq": 1, "subject": "ev.…", "headers": {...}, "data": "<base64>"}   every event
    {"bucket": "jy-secrets", "key": "…", "value": "<base64>"}  what lives only in buckets

Seals come before the events, so a reader checks the events as they stream by with every
seal in hand. Only ``Jy-*`` headers are kept (the chain covers them; the server's own are
protocol). Reading is strict: a line that is not what its place says is refused with its line
number, never skipped.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from events.audit.chain import CONTENT_HEADER_PREFIX, LogMessage
from events.audit.seals import Seal, SealError

FORMAT = 1


class BackupError(ValueError):
    """A backup file that cannot be read as one, with where and why."""


@dataclass(frozen=True)
class BucketEntry:
    bucket: str
    key: str
    value: bytes


@dataclass(frozen=True)
class Header:
    created_at: str
    log_end: int
    """The last position the file holds."""
    sealed_to: int
    """The last position its seals cover (``log_end`` unless written with ``--unsealed``)."""
    seals: int
    buckets: tuple[str, ...]


def header_line(header: Header) -> str:
    fields = {
        "jetyard_backup": FORMAT, "created_at": header.created_at,
        "log_end": header.log_end, "sealed_to": header.sealed_to, "seals": header.seals,
        "buckets": list(header.buckets),
    }  # fmt: skip
    return json.dumps(fields) + "\n"


def seal_line(seal: Seal) -> str:
    return json.dumps({"seal": seal.model_dump(mode="json")}) + "\n"


def message_line(message: LogMessage) -> str:
    headers = {k: v for k, v in message.headers.items() if k.startswith(CONTENT_HEADER_PREFIX)}
    fields = {
        "seq": message.seq, "subject": message.subject, "headers": headers,
        "data": base64.b64encode(message.data).decode(),
    }  # fmt: skip
    return json.dumps(fields) + "\n"


def bucket_line(entry: BucketEntry) -> str:
    fields = {
        "bucket": entry.bucket, "key": entry.key,
        "value": base64.b64encode(entry.value).decode(),
    }  # fmt: skip
    return json.dumps(fields) + "\n"


class BackupReader:
    """One pass over a backup file: ``header`` and ``seals`` on opening, then ``messages()``,
    then ``entries()``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._file: IO[str] = path.open(encoding="utf-8")
        except OSError as exc:
            raise BackupError(f"cannot read {path}: {exc.strerror}") from exc
        self._number = 0
        self._held: dict[str, Any] | None = None
        first = self._next()
        if first is None or first.get("jetyard_backup") != FORMAT:
            self.close()
            raise BackupError(f"{path} is not a Jetyard backup (format {FORMAT})")
        try:
            self.header = Header(
                str(first["created_at"]), int(first["log_end"]), int(first["sealed_to"]),
                int(first["seals"]),
                tuple(str(b) for b in first["buckets"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as exc:
            self.close()
            raise BackupError(f"{path} line 1: a header without {exc}") from exc
        if min(self.header.log_end, self.header.sealed_to, self.header.seals) < 0:
            self.close()
            raise BackupError(f"{path} line 1: a negative position or count in the header")
        self.seals = list(self._seals())

    def messages(self) -> Iterator[LogMessage]:
        while (line := self._take("seq")) is not None:
            try:
                headers = line["headers"]
                if not isinstance(headers, dict) or not all(
                    isinstance(k, str) and isinstance(v, str) for k, v in headers.items()
                ):
                    raise TypeError("headers must map names to strings")
                if int(line["seq"]) < 1:
                    raise ValueError(f"position {line['seq']} (positions start at 1)")
                yield LogMessage(
                    int(line["seq"]), str(line["subject"]), headers,
                    base64.b64decode(line["data"], validate=True),
                )  # fmt: skip
            except (KeyError, TypeError, ValueError, binascii.Error) as exc:
                raise self._error(f"an event line that cannot be read ({exc})") from exc

    def entries(self) -> Iterator[BucketEntry]:
        while (line := self._take("bucket")) is not None:
            try:
                yield BucketEntry(
                    str(line["bucket"]), str(line["key"]),
                    base64.b64decode(line["value"], validate=True),
                )  # fmt: skip
            except (KeyError, TypeError, ValueError, binascii.Error) as exc:
                raise self._error(f"a bucket line that cannot be read ({exc})") from exc
        if self._held is not None or self._next() is not None:
            raise self._error("a line out of place (header, seals, events, buckets: in order)")

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> BackupReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- inside ------------------------------------------------------------------------

    def _seals(self) -> Iterator[Seal]:
        while (line := self._take("seal")) is not None:
            try:
                yield Seal.model_validate(line["seal"])
            except ValueError as exc:
                raise self._error(f"not a seal: {str(exc).splitlines()[0]}") from exc

    def _take(self, kind: str) -> dict[str, Any] | None:
        """The next line if it is of ``kind`` (else it stays for the next reader)."""
        line = self._held if self._held is not None else self._next()
        self._held = None
        if line is None:
            return None
        if kind not in line:
            self._held = line
            return None
        return line

    def _next(self) -> dict[str, Any] | None:
        text = self._file.readline()
        if not text:
            return None
        self._number += 1
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise self._error(f"not JSON ({exc.msg})") from exc
        if not isinstance(value, dict):
            raise self._error("not a JSON object")
        return value

    def _error(self, why: str) -> BackupError:
        return BackupError(f"{self.path} line {self._number}: {why}")


__all__ = ["BackupError", "BackupReader", "BucketEntry", "Header", "SealError"]
