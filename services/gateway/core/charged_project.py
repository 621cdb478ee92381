"""Which project a new session or endpoint is charged to: the one the caller named (in their
domain), or their only project; otherwise an error that says which projects they are in. One
rule for ``createSession`` and ``createEndpoint``. Reads the folded directory."""

from __future__ import annotations

from graphql import GraphQLError

from commands.authorisation import Principal
from schemas.tenancy import project_id_for
from services.gateway.context import Context


def charged_project(ctx: Context, principal: Principal, name: str | None, what: str) -> str:
    """The project id; ``what`` names the thing being made ("session", "endpoint")."""
    if name is not None:
        project_id = project_id_for(principal.domain, name)
        if project_id not in ctx.directory.projects:
            raise GraphQLError(
                f"there is no project {name!r} in domain {principal.domain}",
                extensions={"code": "not-found"},
            )
        return project_id
    if len(principal.projects) == 1:
        return next(iter(principal.projects))
    have = sorted(
        ctx.directory.projects[p].name for p in principal.projects if p in ctx.directory.projects
    )
    raise GraphQLError(
        f"say which project the {what} is for (input.project): "
        + (f"you are in {', '.join(have)}" if have else "you are in no project yet"),
        extensions={"code": "invalid"},
    )
