"""HTTP ``Range`` for downloads (RFC 9110 §14), pure: one range of bytes, or the whole file.

Several ranges, a unit other than bytes, or a header that cannot be read are ignored and
the whole file is sent (200), as the RFC allows; a range that starts past the end is
refused (416). ``If-Range`` that names another version of the file also sends it whole.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_ONE = re.compile(r"^\s*bytes\s*=\s*(\d{0,19})\s*-\s*(\d{0,19})\s*$", re.IGNORECASE)


class RangeNotSatisfiable(Exception):
    pass


@dataclass(frozen=True)
class ByteRange:
    start: int
    end: int  # inclusive

    @property
    def length(self) -> int:
        return self.end - self.start + 1

    def content_range(self, size: int) -> str:
        return f"bytes {self.start}-{self.end}/{size}"


def parse_range(header: str | None, size: int) -> ByteRange | None:
    """The range to send, or None for the whole file; ``RangeNotSatisfiable`` for 416."""
    if header is None:
        return None
    match = _ONE.match(header)
    if match is None:
        return None
    first, last = match.groups()
    if not first and not last:
        return None
    if not first:  # the last N bytes
        suffix = int(last)
        if suffix == 0 or size == 0:
            raise RangeNotSatisfiable
        return ByteRange(max(0, size - suffix), size - 1)
    start = int(first)
    end = int(last) if last else size - 1
    if last and end < start:
        return None
    if start >= size:
        raise RangeNotSatisfiable
    return ByteRange(start, min(end, size - 1))


def etag(inode: int, size: int, mtime_ns: int) -> str:
    return f'"{inode:x}-{size:x}-{mtime_ns:x}"'


def range_applies(if_range: str | None, current_etag: str, last_modified: str) -> bool:
    """Whether a Range may be honoured given ``If-Range`` (absent: yes)."""
    return if_range is None or if_range.strip() in (current_etag, last_modified)
