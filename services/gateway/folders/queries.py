"""The GraphQL folder queries: folders a page at a time and one folder. The caller's role
narrows what is read (``lookup.scope_of``): a user's page holds their own folders,
their projects', and those shared with or offered to them; an admin's or a monitor's their
domain's; a superadmin's all. Reads the vfolders view; writes nothing."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, TypeVar

import strawberry
from strawberry.types import Info

from projections.folders.queries import MAX_PAGE
from schemas.tenancy import project_id_for
from schemas.vfolder import FolderStatus, OwnerKind
from services.gateway.context import Context, ctx_of, invalid, who
from services.gateway.core.folder_lookup import resolve, scope_of
from services.gateway.core.history import AsOf, views_of
from services.gateway.core.types import PageInfo
from services.gateway.folders.types import VFolder, VFolderConnection, VFolderEdge

E = TypeVar("E", bound=StrEnum)


def choice(kind: type[E], what: str, value: str | None) -> E | None:
    if value is None:
        return None
    try:
        return kind(value)
    except ValueError:
        allowed = " | ".join(member.value for member in kind)
        raise invalid(f"{what} must be {allowed}, got {value[:40]!r}") from None


def project_ref(ctx: Context, domain: str, ref: str) -> str:
    """A project id, or the id of the project of that name in ``domain``."""
    if ref in ctx.directory.projects:
        return ref
    return project_id_for(domain, ref)


@strawberry.type
class VFolderQuery:
    @strawberry.field(description="Virtual folders the caller may see, oldest first (Relay).")
    async def vfolders(
        self,
        info: Info[Context, Any],
        first: int = 50,
        after: str | None = None,
        owner_kind: str | None = None,
        project: Annotated[
            str | None,
            strawberry.argument(description="a project's name (in your domain) or id"),
        ] = None,
        status: Annotated[
            str | None,
            strawberry.argument(description="one status; purged folders only when asked"),
        ] = None,
        name: Annotated[str | None, strawberry.argument(description="an exact name")] = None,
        as_of: AsOf | None = None,
    ) -> VFolderConnection:
        me = who(info)
        ctx = ctx_of(info)
        views = await views_of(info, as_of)
        past = None if as_of is None else views
        if not 1 <= first <= MAX_PAGE:
            raise invalid(f"first must be between 1 and {MAX_PAGE}, got {first}")
        kind = choice(OwnerKind, "ownerKind", owner_kind)
        if project is not None:
            if kind is OwnerKind.USER:
                raise invalid("project lists project folders: ownerKind cannot be user")
            kind = OwnerKind.PROJECT
        # A cursor it did not hand out is invalid input (the error mapping, errors.py).
        page = await views.folders.page(
            scope=scope_of(me),
            first=first,
            after=after,
            owner_kind=kind,
            owner_id=None if project is None else project_ref(ctx, me.domain, project),
            status=choice(FolderStatus, "status", status),
            name=name,
        )
        return VFolderConnection(
            edges=[VFolderEdge.of(record, past) for record in page.rows],
            page_info=PageInfo(has_next_page=page.has_next, end_cursor=page.end_cursor),
            total_count=page.total,
        )

    @strawberry.field(
        description="One folder, by id or by name (yours, then your projects', then one "
        "shared with you); null if you cannot see it."
    )
    async def vfolder(self, info: Info[Context, Any], id: str) -> VFolder | None:
        found = await resolve(info, id)
        return None if found is None else VFolder.of(found)
