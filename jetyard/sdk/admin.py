"""Administration and accounting from Python, reached as ``AsyncClient.admin`` and
``AsyncClient.usage``: the gateway's tenancy queries and mutations (domains, projects, users,
keypairs, resource policies, nodes) as typed calls, and the ``usage`` report. Arguments are
snake_case (nested mappings too) and written as GraphQL literals; left out (None), they take
the gateway's defaults. A REJECTED outcome is a ``JetyardError`` with its message.

A roster (``read_roster``) is the people to bring in at once, read from CSV with the columns
``email,name,project,role`` (``name`` and ``role`` optional, in any order, a header line
first); every mistake names its line, and ``add_users`` sends nothing while one remains."""

from __future__ import annotations

import builtins
import csv
import io
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TypeVar

from jetyard.sdk.errors import JetyardError
from jetyard.sdk.models import (
    AdminOutcome,
    DomainInfo,
    IssuedKeypair,
    KeypairInfo,
    Node,
    ProjectInfo,
    Quota,
    ResourcePolicyInfo,
    UsageRow,
    UserInfo,
    Viewer,
)
from jetyard.sdk.wire import Caller, Model, arguments, camel_name, past, selection

M = TypeVar("M", bound=Model)
PAGE = 100
PASSWORD_BYTES = 12


def new_password() -> str:
    """A password to hand to a new person (16 URL-safe characters)."""
    return secrets.token_urlsafe(PASSWORD_BYTES)


@dataclass(frozen=True)
class NewUser:
    """A person just added; ``password`` is shown here once and kept nowhere else."""

    email: str
    user_id: str
    password: str
    projects: tuple[str, ...]
    role: str
    domain: str


class PartlyAddedError(JetyardError):
    """A roster stopped at ``row``: those in ``added`` were created, nobody after them."""

    def __init__(self, added: builtins.list[NewUser], row: Newcomer, message: str) -> None:
        made = ", ".join(u.email for u in added) or "nobody"
        super().__init__(
            f"line {row.line} ({row.email}) was refused: {message}; created before it: {made}"
        )
        self.added = added
        self.row = row


def camel(value: Any) -> Any:
    """Mapping keys (at any depth) from snake_case to the API's camelCase."""
    if isinstance(value, Mapping):
        return {camel_name(str(k)): camel(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [camel(v) for v in value]
    return value


# ---- rosters: a class at the start of a term, from CSV (pure) ---------------------------

COLUMNS = ("email", "name", "project", "role")
REQUIRED = ("email", "project")
ROLES = ("user", "admin", "monitor", "superadmin")
_ROSTER_EMAIL = re.compile(r"^[^@\s]{1,64}@[^@\s.]+(?:\.[^@\s.]+)+$")


class RosterError(JetyardError):
    """A roster that cannot be read whole; ``line`` is the file's line (1: the header)."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(f"line {line}: {message}", code="invalid")
        self.line = line


@dataclass(frozen=True)
class Newcomer:
    line: int
    email: str
    project: str
    role: str = "user"
    name: str = ""


def read_roster(text: str) -> list[Newcomer]:
    """The rows of a roster; a ``RosterError`` for the first line that is wrong."""
    reader = csv.reader(io.StringIO(text.lstrip("\ufeff")))
    header = [column.strip().lower() for column in next(reader, [])]
    if not header or header == [""]:
        raise RosterError(1, f"the file is empty: its first line names the columns {COLUMNS}")
    unknown = [c for c in header if c not in COLUMNS]
    if unknown:
        raise RosterError(1, f"unknown column {unknown[0]!r}; the columns are {', '.join(COLUMNS)}")
    for column in REQUIRED:
        if column not in header:
            raise RosterError(1, f"no {column!r} column; {' and '.join(REQUIRED)} are required")
    found: list[Newcomer] = []
    seen: dict[str, int] = {}
    for row in reader:
        line = reader.line_num
        if not any(cell.strip() for cell in row):
            continue
        if len(row) != len(header):
            raise RosterError(line, f"{len(row)} fields where the header names {len(header)}")
        cells = {column: cell.strip() for column, cell in zip(header, row, strict=True)}
        newcomer = _newcomer(line, cells)
        key = newcomer.email.lower()
        if key in seen:
            raise RosterError(line, f"{newcomer.email} is already on line {seen[key]}")
        seen[key] = line
        found.append(newcomer)
    if not found:
        raise RosterError(reader.line_num or 1, "no one to add: the file has only its header")
    return found


def _newcomer(line: int, cells: dict[str, str]) -> Newcomer:
    email = cells["email"]
    if not _ROSTER_EMAIL.match(email):
        raise RosterError(
            line, f"email {email[:80]!r} is not an email address, e.g. ada@example.org"
        )
    if not cells["project"]:
        raise RosterError(line, f"no project for {email}")
    role = (cells.get("role") or "user").lower()
    if role not in ROLES:
        raise RosterError(line, f"role {role!r} is not one of {' | '.join(ROLES)}")
    return Newcomer(line, email, cells["project"], role, cells.get("name", ""))


class Admin:
    def __init__(self, client: Caller) -> None:
        self._client = client

    async def _query(self, field: str, model: type[M], **args: Any) -> list[M]:
        query = f"{{ {field}{arguments(**camel(args))} {{ {selection(model)} }} }}"
        return [model.model_validate(row) for row in (await self._client.graphql(query))[field]]

    async def _pages(self, field: str, model: type[M], **args: Any) -> list[M]:
        """Every row of an offset-paged listing, a page at a time (the cost limit)."""
        found: list[M] = []
        while True:
            page = await self._query(field, model, first=PAGE, offset=len(found), **args)
            found += page
            if len(page) < PAGE:
                return found

    async def _mutate(self, field: str, **args: Any) -> AdminOutcome:
        query = f"mutation {{ {field}{arguments(**camel(args))} {{ {selection(AdminOutcome)} }} }}"
        outcome = AdminOutcome.model_validate((await self._client.graphql(query))[field])
        if outcome.status == "REJECTED":
            raise JetyardError(outcome.message)
        return outcome

    # ---- reading --------------------------------------------------------------------------

    async def viewer(self) -> Viewer:
        data = await self._client.graphql(f"{{ viewer {{ {selection(Viewer)} }} }}")
        return Viewer.model_validate(data["viewer"])

    async def quotas(self) -> builtins.list[Quota]:
        """The caller's keypair, user, project and domain quotas: held, waiting and limit."""
        return await self._query("myQuota", Quota)

    async def domains(self, *, as_of: int | None = None) -> builtins.list[DomainInfo]:
        """``as_of``: as they were at that log position (administrators and auditors), as
        for every listing here."""
        return await self._pages("domains", DomainInfo, as_of=past(as_of))

    async def projects(
        self, domain: str | None = None, *, as_of: int | None = None
    ) -> builtins.list[ProjectInfo]:
        return await self._pages("projects", ProjectInfo, domain=domain, as_of=past(as_of))

    async def users(
        self, domain: str | None = None, *, as_of: int | None = None
    ) -> builtins.list[UserInfo]:
        return await self._pages("users", UserInfo, domain=domain, as_of=past(as_of))

    async def keypairs(
        self, user_id: str | None = None, *, as_of: int | None = None
    ) -> builtins.list[KeypairInfo]:
        return await self._pages("keypairs", KeypairInfo, user_id=user_id, as_of=past(as_of))

    async def policies(self, *, as_of: int | None = None) -> builtins.list[ResourcePolicyInfo]:
        return await self._pages("resourcePolicies", ResourcePolicyInfo, as_of=past(as_of))

    async def nodes(self, *, as_of: int | None = None) -> builtins.list[Node]:
        return await self._query("nodes", Node, as_of=past(as_of))

    # ---- changing -------------------------------------------------------------------------

    async def create_domain(self, name: str, **more: Any) -> AdminOutcome:
        return await self._mutate("createDomain", name=name, **more)

    async def create_project(self, domain: str, name: str, **more: Any) -> AdminOutcome:
        return await self._mutate("createProject", domain=domain, name=name, **more)

    async def create_user(
        self,
        email: str,
        password: str,
        domain: str = "default",
        role: str = "user",
        projects: builtins.list[str] | None = None,
        policy: str | None = None,
        fair_share: int | None = None,
    ) -> AdminOutcome:
        """A person, with a default keypair; ``projects``: names (or ids) of projects of
        ``domain``; ``fair_share``: their share among their project's users (1 to 10000;
        left out: 1). The outcome's ``id`` is the user's. ``add_user`` also makes a password."""
        return await self._mutate(
            "createUser", email=email, password=password, domain=domain, role=role,
            projects=projects, policy=policy, fair_share=fair_share,
        )  # fmt: skip

    async def add_user(
        self,
        email: str,
        project: str | builtins.list[str],
        *,
        role: str = "user",
        password: str | None = None,
        domain: str | None = None,
        fair_share: int | None = None,
    ) -> NewUser:
        """Onboarding in one call: the person, in the project(s) named (by name), with a
        default keypair, and a password (made here when not given: ``NewUser.password`` is
        the only place it is shown). ``domain``: the caller's own when left out;
        ``fair_share``: as ``create_user``'s."""
        named = [project] if isinstance(project, str) else builtins.list(project)
        domain = domain or (await self.viewer()).domain
        secret = password or new_password()
        outcome = await self.create_user(
            email, secret, domain=domain, role=role, projects=named, fair_share=fair_share
        )
        return NewUser(email, str(outcome.id), secret, tuple(named), role, domain)

    async def add_users(
        self,
        newcomers: builtins.list[Newcomer],
        *,
        domain: str | None = None,
        on_added: Callable[[Newcomer, NewUser], None] | None = None,
    ) -> builtins.list[NewUser]:
        """Everyone on a roster (``jetyard.sdk.roster``). Every row is checked against the
        gateway first (its project exists, its email is not taken): a mistake is a
        ``RosterError`` naming the line, and nobody is created. A refusal part-way (a race)
        is a ``PartlyAddedError`` that lists exactly who was created."""
        domain = domain or (await self.viewer()).domain
        projects = {p.name for p in await self.projects(domain) if p.active}
        taken = {(u.email or "").lower() for u in await self.users()}
        for row in newcomers:
            if row.project not in projects:
                known = ", ".join(sorted(projects)) or "none"
                raise RosterError(
                    row.line,
                    f"there is no project {row.project!r} in domain {domain!r}; "
                    f"its projects: {known}",
                )
            if row.email.lower() in taken:
                raise RosterError(row.line, f"a user with the email {row.email} already exists")
        added: builtins.list[NewUser] = []
        for row in newcomers:
            try:
                made = await self.add_user(row.email, row.project, role=row.role, domain=domain)
            except JetyardError as exc:
                raise PartlyAddedError(added, row, str(exc)) from exc
            added.append(made)
            if on_added is not None:
                on_added(row, made)
        return added

    async def deactivate_user(self, user_id: str, reason: str = "") -> AdminOutcome:
        return await self._mutate("deactivateUser", id=user_id, reason=reason)

    async def add_user_to_project(self, user_id: str, project_id: str) -> AdminOutcome:
        """``user_id``: an id or an email; ``project_id``: a name (or an id)."""
        return await self._mutate("addUserToProject", user_id=user_id, project_id=project_id)

    async def create_keypair(
        self, user_id: str, policy: str | None = None, rate_limit: int | None = None
    ) -> IssuedKeypair:
        """``user_id``: an id or an email. The secret key is in the answer only."""
        args = arguments(**camel({"user_id": user_id, "policy": policy, "rate_limit": rate_limit}))
        query = f"mutation {{ createKeypair{args} {{ {selection(IssuedKeypair)} }} }}"
        issued = IssuedKeypair.model_validate((await self._client.graphql(query))["createKeypair"])
        if issued.outcome.status == "REJECTED":
            raise JetyardError(issued.outcome.message)
        return issued

    async def deactivate_keypair(self, access_key: str, reason: str = "") -> AdminOutcome:
        return await self._mutate("deactivateKeypair", access_key=access_key, reason=reason)

    async def reactivate_keypair(self, access_key: str) -> AdminOutcome:
        return await self._mutate("reactivateKeypair", access_key=access_key)

    async def create_policy(
        self,
        kind: str,
        name: str,
        keypair: Mapping[str, Any] | None = None,
        storage: Mapping[str, Any] | None = None,
    ) -> AdminOutcome:
        """``kind`` keypair (limits in ``keypair``: ``max_concurrent_sessions``,
        ``total_resource_slots={"cpu": "4"}``, ...) or user/project (``storage``)."""
        return await self._mutate(
            "createResourcePolicy", kind=kind, name=name, keypair=keypair, storage=storage
        )

    async def modify_policy(
        self,
        kind: str,
        name: str,
        keypair: Mapping[str, Any] | None = None,
        storage: Mapping[str, Any] | None = None,
    ) -> AdminOutcome:
        return await self._mutate(
            "modifyResourcePolicy", kind=kind, name=name, keypair=keypair, storage=storage
        )

    async def cordon_node(self, node_id: str, reason: str | None = None) -> AdminOutcome:
        return await self._mutate("cordonNode", id=node_id, reason=reason)

    async def uncordon_node(self, node_id: str, reason: str | None = None) -> AdminOutcome:
        return await self._mutate("uncordonNode", id=node_id, reason=reason)


class Usage:
    """Resource use over a period, from the gateway's ``usage`` query."""

    def __init__(self, client: Caller) -> None:
        self._client = client

    async def report(
        self,
        start: datetime,
        end: datetime,
        group_by: str = "user",
        *,
        domain: str | None = None,
        project: str | None = None,
        user_id: str | None = None,
        resource_group: str | None = None,
    ) -> list[UsageRow]:
        """One row per ``group_by`` key (session, user, project, domain, resource_group) of
        the resources x time used in [``start``, ``end``) (timezone-aware; at most 366 days),
        narrowed to one domain, project (id or name), user or resource group if given."""
        query = (
            "query($from: DateTime!, $to: DateTime!, $groupBy: UsageGroup!, $domain: String, "
            "$projectId: ID, $userId: ID, $resourceGroup: String) { usage(from: $from, to: $to, "
            "groupBy: $groupBy, domain: $domain, projectId: $projectId, userId: $userId, "
            f"resourceGroup: $resourceGroup) {{ rows {{ {selection(UsageRow)} }} }} }}"
        )
        variables = {
            "from": start.isoformat(), "to": end.isoformat(), "groupBy": group_by.upper(),
            "domain": domain, "projectId": project, "userId": user_id,
            "resourceGroup": resource_group,
        }  # fmt: skip
        rows = (await self._client.graphql(query, variables))["usage"]["rows"]
        return [UsageRow.model_validate(row) for row in rows]
