"""Reading a folder over HTTP: a file with ``Range`` support, a directory as a tar stream.
Both stream from disk in ``chunk_bytes`` pieces; neither ever holds a whole file."""

from __future__ import annotations

import os
from urllib.parse import quote

from anyio import to_thread
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from services.storage import folderfs
from services.storage.access import admit, query_path
from services.storage.archive import tar_chunks
from services.storage.errors import StorageError
from services.storage.ranges import RangeNotSatisfiable, etag, parse_range, range_applies
from services.storage.streams import FileChunks, in_threads
from services.storage.tokens import Operation
from services.storage.tus import http_date

# Bytes are served as bytes: no sniffing, never shown inline (a folder's HTML must not run
# in the browser under the storage service's origin).
_SAFE = {"X-Content-Type-Options": "nosniff", "Cache-Control": "private, no-cache"}


def attachment(name: str) -> str:
    ascii_name = "".join(
        c if c.isascii() and c.isprintable() and c not in '"\\' else "_" for c in name
    )
    return f"attachment; filename=\"{ascii_name}\"; filename*=UTF-8''{quote(name, safe='')}"


async def download(request: Request) -> Response:
    admission = admit(request, Operation.DOWNLOAD)
    grant = admission.grant(query_path(request, admission.claims))

    def opened() -> tuple[int, os.stat_result]:
        with folderfs.open_root(grant.root) as root:
            return folderfs.open_for_reading(root, grant.path)

    fd, info = await to_thread.run_sync(opened)
    chunks = None
    try:
        size = info.st_size
        tag = etag(info.st_ino, size, info.st_mtime_ns)
        modified = http_date(info.st_mtime)
        headers = {
            **_SAFE,
            "Accept-Ranges": "bytes",
            "ETag": tag,
            "Last-Modified": modified,
            "Content-Disposition": attachment(grant.path.name),
        }
        wanted = None
        if range_applies(request.headers.get("if-range"), tag, modified):
            try:
                wanted = parse_range(request.headers.get("range"), size)
            except RangeNotSatisfiable:
                raise StorageError(
                    "range_not_satisfiable",
                    416,
                    f"the file has {size} bytes",
                    {"Content-Range": f"bytes */{size}"},
                ) from None
        start, length, code = 0, size, 200
        if wanted is not None:
            start, length, code = wanted.start, wanted.length, 206
            headers["Content-Range"] = wanted.content_range(size)
        headers["Content-Length"] = str(length)
        if request.method == "HEAD":
            return Response(status_code=code, headers=headers)
        chunk_bytes = admission.plane.settings.chunk_bytes
        chunks = FileChunks(fd, start, length, chunk_bytes)
        return StreamingResponse(
            in_threads(chunks),
            status_code=code,
            headers=headers,
            media_type="application/octet-stream",
        )
    finally:
        if chunks is None:
            os.close(fd)


async def archive(request: Request) -> Response:
    admission = admit(request, Operation.ARCHIVE)
    grant = admission.grant(query_path(request, admission.claims))

    def is_directory() -> None:  # refuse now, while an error can still be an answer
        with folderfs.open_root(grant.root) as root, folderfs.open_dir(root, grant.path):
            pass

    await to_thread.run_sync(is_directory)
    top = grant.path.name or grant.folder_id
    chunks = tar_chunks(grant.root, grant.path, top, admission.plane.settings.chunk_bytes)
    headers = {**_SAFE, "Content-Disposition": attachment(f"{top}.tar")}
    if request.method == "HEAD":
        return Response(status_code=200, headers=headers, media_type="application/x-tar")
    return StreamingResponse(in_threads(chunks), headers=headers, media_type="application/x-tar")
