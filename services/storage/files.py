"""Directory operations of the data plane: list, mkdir, move, delete (HTTP handlers)."""

from __future__ import annotations

from typing import Any, TypeVar

from anyio import to_thread
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request
from starlette.responses import JSONResponse

from schemas.folder_paths import FolderPath, parse_path
from services.storage import folderfs, foldertree
from services.storage.access import Grant, admit, plane_of, query_path
from services.storage.errors import StorageError
from services.storage.tokens import Claims, Operation
from services.storage.volumes import Capability

MAX_JSON_BODY = 64 * 1024


class _Body(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class MkdirBody(_Body):
    path: str | None = None
    parents: bool = False


class MoveBody(_Body):
    source: str = Field(alias="from")
    target: str = Field(alias="to")


class DeleteBody(_Body):
    path: str | None = None
    recursive: bool = False


BodyT = TypeVar("BodyT", bound=_Body)


async def read_json(request: Request, model: type[BodyT]) -> BodyT:
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_JSON_BODY:
            raise StorageError(
                "body_too_large", 413, f"a JSON body is at most {MAX_JSON_BODY} bytes"
            )
    try:
        return model.model_validate_json(bytes(body) or b"{}")
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise StorageError("bad_body", 400, f"{where}: {first['msg']}") from None


def _or_token_path(text: str | None, claims: Claims, *, creating: bool = False) -> FolderPath:
    return claims.folder_path if text is None else parse_path(text, creating=creating)


async def list_entries(request: Request) -> JSONResponse:
    admission = admit(request, Operation.LIST)
    grant = admission.grant(query_path(request, admission.claims))
    limit_text = request.query_params.get("limit", "")
    page_max = plane_of(request).settings.list_limit
    limit = int(limit_text) if limit_text.isdecimal() else page_max
    if not 1 <= limit <= page_max:
        raise StorageError("bad_limit", 400, f"limit must be between 1 and {page_max}")
    after = request.query_params.get("after", "")

    def page() -> tuple[list[foldertree.Listed], bool]:
        with folderfs.open_root(grant.root) as root:
            return foldertree.list_dir(root, grant.path, after=after[:4096], limit=limit)

    entries, more = await to_thread.run_sync(page)
    listed: list[dict[str, Any]] = [
        {"name": e.name, "type": e.kind, "size": e.size, "mtime": e.mtime, "safe": e.safe}
        for e in entries
    ]
    return JSONResponse(
        {
            "path": str(grant.path),
            "entries": listed,
            "more": more,
            "next_after": entries[-1].name if more and entries else None,
        }
    )


async def make_dir(request: Request) -> JSONResponse:
    admission = admit(request, Operation.MKDIR)
    body = await read_json(request, MkdirBody)
    grant = admission.grant(_or_token_path(body.path, admission.claims, creating=True))

    def make() -> None:
        with folderfs.open_root(grant.root) as root:
            folderfs.make_dir(root, grant.path, parents=body.parents)

    await to_thread.run_sync(make)
    admission.plane.changed(grant)
    return JSONResponse({"path": str(grant.path)}, status_code=201)


async def move(request: Request) -> JSONResponse:
    admission = admit(request, Operation.MOVE)
    body = await read_json(request, MoveBody)
    grant = admission.grant(parse_path(body.source), parse_path(body.target, creating=True))

    def rename() -> None:
        with folderfs.open_root(grant.root) as root:
            folderfs.move(root, grant.paths[0], grant.paths[1])

    await to_thread.run_sync(rename)
    admission.plane.changed(grant)
    return JSONResponse({"from": str(grant.paths[0]), "to": str(grant.paths[1])})


async def delete(request: Request) -> JSONResponse:
    admission = admit(request, Operation.DELETE)
    body = await read_json(request, DeleteBody)
    grant = admission.grant(_or_token_path(body.path, admission.claims))
    await to_thread.run_sync(_delete, grant, body.recursive)
    admission.plane.changed(grant)
    return JSONResponse({"path": str(grant.path)})


def _delete(grant: Grant, recursive: bool) -> None:
    counted = Capability.FAST_SIZE in grant.volume.capabilities
    with folderfs.open_root(grant.root) as root:
        removed = foldertree.delete(root, grant.path, recursive=recursive, count=counted)
    if counted:
        grant.volume.record_change(grant.folder_id, -removed)
