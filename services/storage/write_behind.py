"""Write-behind for uploads: the kernel is asked to start writing each written batch to disk
at once (``sync_file_range(SYNC_FILE_RANGE_WRITE)``, Linux), so the disk works while the
rest of the body arrives and the ``fsync`` before the answer finds little left to write.

Durability is unchanged: nothing here waits for the disk or promises anything; the upload's
``fsync`` still comes before it is answered. Without write-behind a 1 GiB upload on the
benchmark's disk spent 0.23 s in that final ``fsync`` (a third of the upload), with it ~2 ms
(docs/benchmarks.md, "Issue 31: uploads"). PostgreSQL does the same for its data files
(``backend_flush_after``) to keep its ``fsync`` short; it also keeps dirty pages from piling
up in the page cache behind a large upload.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from collections.abc import Callable

_SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        call = libc.sync_file_range
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    call.restype = ctypes.c_int
    return call


_start = _sync_file_range()


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask for the ``length`` bytes of ``fd`` at ``offset`` to be written out now, without
    waiting. A hint: where the call is missing or refused (another OS, a filesystem without
    it), the final ``fsync`` simply writes everything, as it would anyway."""
    if _start is not None and length > 0:
        _start(fd, offset, length, _SYNC_FILE_RANGE_WRITE)  # ctypes drops the GIL meanwhile
