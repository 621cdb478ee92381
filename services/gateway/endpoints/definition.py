"""A model folder's definition file, read when ``createEndpoint`` names a model folder and
leaves out the command, the port or the health check: the file is fetched from the storage
data plane with a short-lived download token (as ``vfolderAccess`` grants one) and parsed by
``schemas.model_definition``; what the create gives wins over the file. Reads the vfolders
view and the file over HTTP; writes nothing."""

from __future__ import annotations

import time
from typing import Any

import httpx
from strawberry.types import Info

from projections.folders.tables import FolderRecord
from schemas.folder_tokens import Claims, Operation, issue
from schemas.model_definition import (
    DEFINITION_FILES,
    MAX_DEFINITION_BYTES,
    ModelDefinitionError,
    parse_model_definition,
)
from schemas.vfolder import FolderStatus
from services.gateway.context import Context, ctx_of
from services.gateway.core.folder_lookup import resolve
from services.gateway.core.inputs import InputError
from services.gateway.endpoints.inputs import RevisionInput

READ_TIMEOUT_S = 10.0


async def definition_for(info: Info[Context, Any], spec: RevisionInput) -> dict[str, Any] | None:
    """Revision fields from the model folder's definition; None when none is needed, the
    folder has none, or this gateway cannot read folders (no storage key)."""
    complete = spec.command is not None and spec.port is not None and spec.health is not None
    ctx = ctx_of(info)
    key = ctx.settings.storage_token_key
    if spec.model is None or complete or key is None:
        return None
    folder = await _folder(info, spec.model)
    if folder is None:  # not one the caller reads: a replica's mount will say so
        return None
    for name in DEFINITION_FILES:
        text = await _read(ctx, key.get_secret_value().encode(), folder, name)
        if text is None:
            continue
        try:
            return parse_model_definition(text, name).revision_fields()
        except ModelDefinitionError as exc:
            raise InputError(f"model folder {folder.name}: {exc}") from None
    return None


async def _folder(info: Info[Context, Any], ref: str) -> FolderRecord | None:
    """The folder ``ref`` names for the caller, resolved as a mount is
    (``core.folder_lookup.resolve``), if it is ready."""
    found = await resolve(info, ref)
    return found if found is not None and found.status is FolderStatus.READY else None


async def _read(ctx: Context, key: bytes, folder: FolderRecord, path: str) -> str | None:
    """The file's text; None when the folder has no such file."""
    claims = Claims(
        op=Operation.DOWNLOAD, volume=folder.volume, folder=folder.id, path=path,
        exp=int(time.time() + ctx.settings.storage_token_ttl_s),
    )  # fmt: skip
    base = ctx.settings.storage_url.rstrip("/")
    url = f"{base}/folders/{folder.volume}/{folder.id}/download"
    headers = {"Authorization": f"Bearer {issue(key, claims)}"}
    # Streamed, and given up past the bound: a huge file in the folder is never read whole
    # into the gateway's memory.
    kept = bytearray()
    try:
        async with (
            httpx.AsyncClient(timeout=READ_TIMEOUT_S) as client,
            client.stream("GET", url, params={"path": path}, headers=headers) as answer,
        ):
            if answer.status_code == 404:
                return None
            if answer.status_code != 200:
                said = (await answer.aread())[:200].decode("utf-8", errors="replace")
                raise InputError(
                    f"cannot read the model folder's {path}: the storage service answered "
                    f"{answer.status_code} {said}"
                )
            async for chunk in answer.aiter_bytes():
                kept += chunk
                if len(kept) > MAX_DEFINITION_BYTES:
                    raise InputError(f"{path} is over {MAX_DEFINITION_BYTES} bytes")
    except httpx.HTTPError as exc:
        raise InputError(f"cannot read the model folder's {path}: {exc}") from None
    return kept.decode("utf-8", errors="replace")
