"""Resumable uploads into a folder (tus 1.0 core; creation, expiration, termination).

``POST .../uploads`` creates an upload (``Upload-Length``; the target in ``Upload-Metadata``
``path``, or the token's path), ``HEAD .../uploads/<id>`` says how much has arrived,
``PATCH`` appends from that offset, ``DELETE`` abandons it. Bytes go to a part file in the
volume's upload area (hidden from every listing and download) and are renamed into place
when the last byte arrives. The quota is checked at creation (where the upload's reservation
is filed: ``quota.reserve``), at the start of every PATCH and every ``quota_recheck_bytes``
during one. Memory per upload: two ``chunk_bytes`` batches at most.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Awaitable, Callable

from anyio import to_thread
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from schemas.folder_paths import FolderPath, check_new_name, parse_path
from services.storage import folderfs
from services.storage.access import Admission, Grant, admit, plane_of
from services.storage.errors import StorageError, as_storage_error
from services.storage.quota import reserve
from services.storage.tokens import Claims, Operation
from services.storage.tus import (
    OFFSET_CONTENT_TYPE,
    RESUMABLE,
    TUS_EXTENSIONS,
    TUS_VERSION,
    check_version,
    http_date,
    metadata,
    number,
)
from services.storage.upload_bytes import append_body
from services.storage.upload_state import UploadArea, UploadBusy, UploadState, new_upload_id

Handler = Callable[[Request], Awaitable[Response]]


def tus(handler: Handler) -> Handler:
    """Every answer of the upload endpoints, errors included, says ``Tus-Resumable``."""

    async def answer(request: Request) -> Response:
        try:
            return await handler(request)
        except Exception as exc:
            known = as_storage_error(exc)
            if known is None:
                raise
            raise StorageError(
                known.code, known.status, known.message, {**RESUMABLE, **known.headers}
            ) from exc

    return answer


async def options(request: Request) -> Response:
    limit = plane_of(request).settings.max_upload_bytes
    headers = {"Tus-Version": TUS_VERSION, "Tus-Extension": TUS_EXTENSIONS}
    return Response(status_code=204, headers={**RESUMABLE, **headers, "Tus-Max-Size": str(limit)})


def _target(pairs: dict[str, str], claims: Claims) -> FolderPath:
    if "path" in pairs:
        return parse_path(pairs["path"], creating=True)
    if "filename" in pairs and claims.prefix:
        return claims.folder_path.child(check_new_name(pairs["filename"]))
    return claims.folder_path


@tus
async def create(request: Request) -> Response:
    check_version(request.headers)
    admission = admit(request, Operation.UPLOAD)
    plane, claims = admission.plane, admission.claims
    length = number(request.headers, "Upload-Length")
    limit = min(
        plane.settings.max_upload_bytes, claims.max_bytes or plane.settings.max_upload_bytes
    )
    if length > limit:
        raise StorageError("too_large", 413, f"this upload may be at most {limit} bytes")
    target = _target(metadata(request.headers.get("upload-metadata")), claims)
    if target.is_root:
        raise StorageError("bad_header", 400, "name the file: Upload-Metadata 'path'")
    grant = admission.grant(target, consume=False)
    room = plane.hooks.owner_room(grant.folder_id)
    area = UploadArea(grant.volume.upload_area(grant.folder_id))
    now = plane.now()
    state = UploadState(
        id=new_upload_id(),
        volume=admission.volume_name,
        folder=admission.folder_id,
        path=str(target),
        length=length,
        created=now,
        expires=now + plane.settings.upload_ttl_s,
    )

    def file_upload() -> None:
        with folderfs.open_root(grant.root) as root:
            folderfs.check_creatable(root, target)
        reserve(plane.creations, plane.volumes, grant.volume, area, state, room)

    await to_thread.run_sync(file_upload)
    try:
        plane.used.use(claims, now=admission.now)  # spent only once everything has passed
    except BaseException:
        await to_thread.run_sync(area.remove, state.id)  # no reservation for a refused upload
        raise
    if length == 0:  # no PATCH will come: finish now
        await append_body(plane, grant, area, state, 0, _nothing(), 0)
    location = f"/folders/{state.volume}/{state.folder}/uploads/{state.id}"
    return Response(
        status_code=201,
        headers={**RESUMABLE, "Location": location, "Upload-Expires": http_date(state.expires)},
    )


async def _nothing() -> AsyncIterator[bytes]:
    return
    yield b""  # pragma: no cover - makes this an async generator


async def _find(admission: Admission, upload_id: str) -> tuple[UploadState, Grant, UploadArea]:
    area = UploadArea(admission.volume().upload_area(admission.folder_id))
    state = await to_thread.run_sync(area.load, upload_id)
    if (
        state is None
        or (state.volume, state.folder) != (admission.volume_name, admission.folder_id)
        or state.expires <= admission.now
    ):
        raise StorageError("upload_not_found", 404, "no such upload (it may have expired)")
    return state, admission.grant(parse_path(state.path), consume=False), area


@tus
async def status(request: Request) -> Response:
    check_version(request.headers)
    admission = admit(request, Operation.UPLOAD)
    state, _, area = await _find(admission, request.path_params["upload_id"])
    offset = await to_thread.run_sync(area.offset, state)
    headers = {
        "Upload-Offset": str(offset),
        "Upload-Length": str(state.length),
        "Upload-Expires": http_date(state.expires),
        "Cache-Control": "no-store",
    }
    return Response(status_code=200, headers={**RESUMABLE, **headers})


@tus
async def append(request: Request) -> Response:
    check_version(request.headers)
    admission = admit(request, Operation.UPLOAD)
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != OFFSET_CONTENT_TYPE:
        raise StorageError("bad_content_type", 415, f"send Content-Type: {OFFSET_CONTENT_TYPE}")
    offset = number(request.headers, "Upload-Offset")
    state, grant, area = await _find(admission, request.path_params["upload_id"])
    body = request.stream()
    try:
        declared = request.headers.get("content-length", "")
        length = int(declared) if declared.isdecimal() else None
        reached = await append_body(admission.plane, grant, area, state, offset, body, length)
    except Exception:
        await _drain(body, admission.plane.settings.drain_limit_bytes)
        raise
    expires = http_date(admission.now + admission.plane.settings.upload_ttl_s)
    headers = {"Upload-Offset": str(reached), "Upload-Expires": expires}
    return Response(status_code=204, headers={**RESUMABLE, **headers})


async def _drain(body: AsyncIterator[bytes], limit: int) -> None:
    """Read and drop what is left of a refused body (up to ``limit``), so the client, still
    sending, reads our error instead of a reset connection."""
    seen = 0
    try:
        async for chunk in body:
            seen += len(chunk)
            if seen > limit:
                return
    except (ClientDisconnect, RuntimeError):
        return


@tus
async def terminate(request: Request) -> Response:
    check_version(request.headers)
    admission = admit(request, Operation.UPLOAD)
    state, _, area = await _find(admission, request.path_params["upload_id"])

    def forget() -> None:
        try:
            fd = area.open_part(state)
        except UploadBusy:
            raise StorageError("upload_busy", 423, "the upload is being written") from None
        try:
            area.remove(state.id)
        finally:
            if fd is not None:
                os.close(fd)

    await to_thread.run_sync(forget)
    return Response(status_code=204, headers=RESUMABLE)
