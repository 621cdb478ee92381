"""Administration and accounting from Python, reached as ``AsyncClient.admin`` and
``AsyncClient.usage``: the gateway's tenancy queries and mutations (domains, projects, users,
keypairs, resource policies, nodes) as typed calls, and the ``usage`` report. Arguments are
snake_case (nested mappings too) and written as GraphQL literals; left out (None), they take
the gateway's defaults. A REJECTED outcome is a ``JetyardError`` with its message."""

from __future__ import annotations

import builtins
from collections.abc import Mapping
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
from jetyard.sdk.wire import Caller, Model, arguments, camel_name, selection

M = TypeVar("M", bound=Model)
PAGE = 100


def camel(value: Any) -> Any:
    """Mapping keys (at any depth) from snake_case to the API's camelCase."""
    if isinstance(value, Mapping):
        return {camel_name(str(k)): camel(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [camel(v) for v in value]
    return value


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
        """The caller's keypair, user, project and domain quotas: limits, use, pending."""
        return await self._query("myQuota", Quota)

    async def domains(self) -> builtins.list[DomainInfo]:
        return await self._pages("domains", DomainInfo)

    async def projects(self, domain: str | None = None) -> builtins.list[ProjectInfo]:
        return await self._pages("projects", ProjectInfo, domain=domain)

    async def users(self, domain: str | None = None) -> builtins.list[UserInfo]:
        return await self._pages("users", UserInfo, domain=domain)

    async def keypairs(self, user_id: str | None = None) -> builtins.list[KeypairInfo]:
        return await self._pages("keypairs", KeypairInfo, user_id=user_id)

    async def policies(self) -> builtins.list[ResourcePolicyInfo]:
        return await self._pages("resourcePolicies", ResourcePolicyInfo)

    async def nodes(self) -> builtins.list[Node]:
        return await self._query("nodes", Node)

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
    ) -> AdminOutcome:
        """A person; ``projects`` are project ids. The outcome's ``id`` is the user's."""
        return await self._mutate(
            "createUser", email=email, password=password, domain=domain, role=role,
            projects=projects, policy=policy,
        )  # fmt: skip

    async def deactivate_user(self, user_id: str, reason: str = "") -> AdminOutcome:
        return await self._mutate("deactivateUser", id=user_id, reason=reason)

    async def add_user_to_project(self, user_id: str, project_id: str) -> AdminOutcome:
        return await self._mutate("addUserToProject", user_id=user_id, project_id=project_id)

    async def create_keypair(
        self, user_id: str, policy: str | None = None, rate_limit: int | None = None
    ) -> IssuedKeypair:
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
