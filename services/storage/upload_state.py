"""Uploads in progress, on disk: ``<id>.part`` (the bytes so far) and ``<id>.json`` (where
they go, how long they are, until when) in a volume's upload area, so a restarted process
resumes them. The offset is the part file's size, never a number written beside it: a crash
between writing bytes and writing a counter cannot make them disagree.

A state whose part file is gone is a finished upload (the part was renamed into place); it
stays, marked ``completed``, until it expires, so a client that lost the last response
learns from HEAD that nothing is left to send.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from schemas.ids import Token

UPLOAD_ID = re.compile(r"^[0-9a-f]{32}$")


def new_upload_id() -> str:
    return secrets.token_hex(16)


class UploadState(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")

    id: str = Field(pattern=UPLOAD_ID.pattern)
    volume: Token
    folder: Token
    path: str
    length: int = Field(ge=0)
    created: float
    expires: float
    completed: bool = False


class UploadBusy(Exception):
    """Another request is writing this upload (a PATCH still running after its client left)."""


@dataclass(frozen=True)
class UploadArea:
    directory: Path

    def _state(self, upload_id: str) -> Path:
        return self.directory / f"{upload_id}.json"

    def part_name(self, upload_id: str) -> str:
        return f"{upload_id}.part"

    def create(self, state: UploadState) -> None:
        fd = os.open(
            self.directory / self.part_name(state.id),
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
            0o600,
        )
        os.close(fd)
        self.save(state)

    def save(self, state: UploadState) -> None:
        temp = self.directory / f"{state.id}.json.{secrets.token_hex(4)}.tmp"
        temp.write_text(state.model_dump_json())
        os.replace(temp, self._state(state.id))

    def load(self, upload_id: str) -> UploadState | None:
        if not UPLOAD_ID.match(upload_id):
            return None
        try:
            return UploadState.model_validate_json(self._state(upload_id).read_bytes())
        except (FileNotFoundError, ValidationError):
            return None

    def offset(self, state: UploadState) -> int:
        if state.completed:
            return state.length
        try:
            return (self.directory / self.part_name(state.id)).stat().st_size
        except FileNotFoundError:
            return state.length  # renamed into place just before a crash: finished

    def active(self, now: float) -> Iterator[tuple[UploadState, int]]:
        """Every upload here that is neither finished nor expired, with what has arrived:
        the reservations (``reservations``). One read of each state file."""
        for entry in os.scandir(self.directory):
            upload_id, _, suffix = entry.name.partition(".")
            if suffix != "json":
                continue
            state = self.load(upload_id)
            if state is None or state.completed or state.expires <= now:
                continue
            yield state, self.offset(state)

    def open_part(self, state: UploadState) -> int | None:
        """The part file, opened for writing and locked (``UploadBusy`` if locked), or None
        if it is gone (the upload finished)."""
        try:
            fd = os.open(
                self.directory / self.part_name(state.id),
                os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC,
            )
        except FileNotFoundError:
            return None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise UploadBusy(state.id) from None
        return fd

    def remove(self, upload_id: str) -> None:
        """Forget an upload: its state first, so a crash in between leaves an orphan part
        (swept by age), never a state that looks finished."""
        self._state(upload_id).unlink(missing_ok=True)
        (self.directory / self.part_name(upload_id)).unlink(missing_ok=True)

    def sweep(self, now: float, ttl_s: float) -> int:
        """Remove expired uploads and orphan parts older than ``ttl_s``; how many."""
        removed = 0
        for entry in os.scandir(self.directory):
            upload_id, _, suffix = entry.name.partition(".")
            if not UPLOAD_ID.match(upload_id):
                continue
            if suffix == "json":
                state = self.load(upload_id)
                if state is not None and state.expires > now:
                    continue
            elif suffix == "part":
                if self._state(upload_id).exists() or not _older(entry, now - ttl_s):
                    continue
            elif suffix.endswith(".tmp"):
                if _older(entry, now - ttl_s):
                    with contextlib.suppress(FileNotFoundError):
                        os.unlink(entry.path)
                        removed += 1
                continue
            else:
                continue
            removed += self._remove_unless_busy(upload_id)
        return removed

    def _remove_unless_busy(self, upload_id: str) -> int:
        part = self.directory / self.part_name(upload_id)
        try:
            fd = os.open(part, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
        except FileNotFoundError:
            self.remove(upload_id)
            return 1
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return 0  # still being written: it is not expired for long
        try:
            self.remove(upload_id)
        finally:
            os.close(fd)
        return 1


def _older(entry: os.DirEntry[str], limit: float) -> bool:
    """Whether ``entry`` was last changed before ``limit`` (False if it is gone)."""
    try:
        return entry.stat(follow_symlinks=False).st_mtime <= limit
    except FileNotFoundError:
        return False
