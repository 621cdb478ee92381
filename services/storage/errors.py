"""Errors of the data plane as JSON ``{"error": code, "message": sentence}``, one place that
turns every refusal (paths, tokens, the disk) into its status code."""

from __future__ import annotations

import errno
import logging
from collections.abc import Mapping

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from schemas.folder_paths import UnsafePath
from services.storage.folderfs import FolderFsError
from services.storage.tokens import TokenError
from services.storage.volumes import FolderNotFound

log = logging.getLogger(__name__)


class StorageError(Exception):
    def __init__(
        self, code: str, status: int, message: str, headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(message)
        self.code, self.status, self.message = code, status, message
        self.headers = dict(headers or {})


# What the disk can say about a request that is the client's or the folder's fault.
_OS_ERRORS: dict[int, tuple[str, int, str]] = {
    errno.ENOSPC: ("no_space", 507, "the volume is full"),
    errno.EDQUOT: ("quota_exceeded", 413, "the folder's quota is used up"),
    errno.EACCES: ("permission_denied", 403, "the storage service may not touch this entry"),
    errno.EPERM: ("permission_denied", 403, "the storage service may not touch this entry"),
    errno.ENAMETOOLONG: ("unsafe_path", 400, "a name or the path is too long"),
    errno.ELOOP: ("symlink_refused", 403, "the path passes through a symlink, never followed"),
    errno.ENOTDIR: ("not_a_directory", 409, "a component of the path is not a directory"),
    errno.EISDIR: ("is_a_directory", 409, "the path names a directory"),
    errno.ENOTEMPTY: ("not_empty", 409, "the directory is not empty"),
    errno.EEXIST: ("exists", 409, "the entry already exists"),
    errno.ENOENT: ("not_found", 404, "the entry does not exist (it may have just been removed)"),
    errno.EXDEV: ("cross_device", 409, "source and target lie on different filesystems"),
}


_HTTP_ERRORS = {
    404: ("no_route", "no such endpoint: see docs/storage.md for the routes"),
    405: ("method_not_allowed", "this endpoint does not take that method"),
}


def error_json(
    code: str, status: int, message: str, headers: Mapping[str, str] | None = None
) -> JSONResponse:
    return JSONResponse({"error": code, "message": message}, status_code=status, headers=headers)


def as_storage_error(exc: Exception) -> StorageError | None:
    """The refusal ``exc`` stands for, or None if it is a fault of the service."""
    if isinstance(exc, StorageError):
        return exc
    if isinstance(exc, FolderFsError | TokenError):
        return StorageError(exc.code, exc.status, exc.message)
    if isinstance(exc, UnsafePath):
        return StorageError(exc.code, 400, exc.message)
    if isinstance(exc, FolderNotFound):
        return StorageError("folder_not_found", 404, str(exc))
    if isinstance(exc, OSError) and exc.errno in _OS_ERRORS:
        return StorageError(*_OS_ERRORS[exc.errno])
    return None


async def handle_error(request: Request, exc: Exception) -> Response:
    if isinstance(exc, HTTPException):
        code, message = _HTTP_ERRORS.get(exc.status_code, ("http_error", str(exc.detail)))
        return error_json(code, exc.status_code, message, exc.headers)
    known = as_storage_error(exc)
    if known is None:
        log.exception("storage data plane: %s %s failed", request.method, request.url.path)
        return error_json("internal", 500, "the storage service failed; see its log")
    return error_json(known.code, known.status, known.message, known.headers)


ERROR_HANDLERS = {
    HTTPException: handle_error,
    StorageError: handle_error,
    FolderFsError: handle_error,
    TokenError: handle_error,
    UnsafePath: handle_error,
    FolderNotFound: handle_error,
    OSError: handle_error,
    Exception: handle_error,
}
