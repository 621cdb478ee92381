"""What a person types for a project or a user, turned into the id a command carries: a
project by its name (in a given domain) or its id, a user by their email or id. A name that
names nothing is refused with the domain and the projects it has. Reads the directory."""

from __future__ import annotations

from graphql import GraphQLError

from commands.authorisation import Principal
from commands.tenancy import Project, User
from schemas.tenancy import email_digest, project_id_for, user_id_for
from services.gateway.admin_api.send import not_found, visible_project, visible_user
from services.gateway.context import Context
from services.gateway.core.visibility import sees_project

KNOWN_SHOWN = 20


def project_in(ctx: Context, me: Principal, domain: str, key: str) -> Project:
    """The project ``key`` names in ``domain``: its name first, else its id."""
    for project_id in (project_id_for(domain, key), key):
        project = ctx.directory.projects.get(project_id)
        if project is not None and project.domain == domain and sees_project(me, project):
            return project
    known = sorted(
        p.name
        for p in ctx.directory.projects.values()
        if p.domain == domain and p.active and sees_project(me, p)
    )
    listed = ", ".join(known[:KNOWN_SHOWN]) + (", …" if len(known) > KNOWN_SHOWN else "")
    raise GraphQLError(
        f"there is no project {key!r} in domain {domain!r}; "
        + (f"its projects: {listed}" if known else "it has no projects yet (createProject)"),
        extensions={"code": "not-found"},
    )


def project_anywhere(ctx: Context, me: Principal, key: str) -> Project:
    """A project by id, by ``DOMAIN/NAME``, or by a name only one domain (that the caller
    sees) has."""
    project = ctx.directory.projects.get(key)
    if project is not None and sees_project(me, project):
        return project
    if "/" in key:
        domain, name = key.split("/", 1)
        return project_in(ctx, me, domain, name)
    named = [p for p in ctx.directory.projects.values() if p.name == key and sees_project(me, p)]
    if len(named) == 1:
        return named[0]
    if not named:
        return project_in(ctx, me, me.domain, key)  # refused, naming the caller's projects
    domains = ", ".join(sorted(p.domain for p in named))
    raise GraphQLError(
        f"there is a project {key!r} in domains {domains}: write DOMAIN/{key}",
        extensions={"code": "invalid"},
    )


def projects_in(ctx: Context, me: Principal, domain: str, keys: list[str]) -> tuple[str, ...]:
    """The ids of the projects named, in order, each once."""
    return tuple(dict.fromkeys(project_in(ctx, me, domain, key).id for key in keys))


def user_named(ctx: Context, me: Principal, key: str) -> User:
    """The user ``key`` names: an email (as it was given at creation) or a user id."""
    if "@" in key:
        user_id = user_id_for(email_digest(key.strip(), ctx.services.email_key))
        user = ctx.directory.users.get(user_id)
        if user is None:
            raise not_found("user with the email", key)
        return visible_user(ctx, me, user_id)
    return visible_user(ctx, me, key)


def project_of_user(ctx: Context, me: Principal, user: User, key: str) -> Project:
    """A project of the user's own domain, by name or id (an id of another domain: not found)."""
    project = project_in(ctx, me, user.domain, key)
    return visible_project(ctx, me, project.id)
