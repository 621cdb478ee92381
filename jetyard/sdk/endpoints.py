"""Model-serving endpoints from Python, reached as ``AsyncClient.endpoints`` (``Client.endpoints``
blocks): typed calls over the gateway's endpoint queries and mutations.

    async with AsyncClient.from_config() as jy:
        await jy.endpoints.create("echo", image="jetyard-echo:1", port=8000, replicas=2,
                                  rules=[{"metric": "rps", "scale_up_above": 10}])
        issued = await jy.endpoints.create_token("echo", expires_in_s=30 * 86400)
        print(issued.token)                  # shown once: Authorization: Bearer <token>
        await jy.endpoints.scale("echo", 3)

An endpoint is named by its id or its name. A refusal is a ``JetyardError`` with the server's
message and code (an endpoint the caller cannot see: ``not-found``).
"""

from __future__ import annotations

import builtins
from collections.abc import Mapping, Sequence
from typing import Any

from jetyard.sdk.errors import JetyardError
from jetyard.sdk.models.endpoints import Endpoint, EndpointDetail, EndpointToken, IssuedToken
from jetyard.sdk.wire import Caller, arguments, camel_name, literal, selection

LISTED = selection(Endpoint)
DETAIL = selection(EndpointDetail)
DAY_S = 24 * 3600


def _camel(values: Mapping[str, Any]) -> dict[str, Any]:
    """Given values (not None) with the API's names; nested mappings too."""
    return {
        camel_name(k): _camel(v) if isinstance(v, Mapping) else v
        for k, v in values.items()
        if v is not None
    }


def revision_input(**fields: Any) -> dict[str, Any]:
    """A ``RevisionInput``: ``env`` as a mapping, ``health`` and the rest in snake_case."""
    env = fields.pop("env", None)
    given = _camel(fields)
    if env is not None:
        given["env"] = [{"name": k, "value": v} for k, v in env.items()]
    if "command" in given:
        given["command"] = list(given["command"])
    return given


def scaling_input(
    rules: Sequence[Mapping[str, Any]] | None = None, **bounds: Any
) -> dict[str, Any] | None:
    """A ``ScalingInput`` (None if nothing is given): rules as mappings in snake_case."""
    given = _camel(bounds)
    if rules is not None:
        given["rules"] = [_camel(rule) for rule in rules]
    return given or None


class Endpoints:
    """The endpoint calls of one ``AsyncClient``."""

    def __init__(self, client: Caller) -> None:
        self._client = client

    async def list(self, *, destroyed: bool = False, page_size: int = 50) -> list[Endpoint]:
        """Every endpoint the caller sees (all pages); destroyed ones only when asked."""
        found: list[Endpoint] = []
        after: str | None = None
        while True:
            args = arguments(first=page_size, after=after, destroyed=destroyed or None)
            data = await self._client.graphql(
                f"{{ endpoints{args} {{ edges {{ node {{ {LISTED} }} }} "
                "pageInfo { hasNextPage endCursor } } }"
            )
            page = data["endpoints"]
            found += [Endpoint.model_validate(edge["node"]) for edge in page["edges"]]
            if not page["pageInfo"]["hasNextPage"]:
                return found
            after = page["pageInfo"]["endCursor"]

    async def get(self, endpoint: str, *, ended_replicas: int = 0) -> EndpointDetail:
        """The endpoint ``endpoint`` names (id or name), in full; ``ended_replicas`` of the
        latest replicas that ended are listed too."""
        query = DETAIL.replace("replicas {", f"replicas(ended: {ended_replicas}) {{", 1)
        data = await self._client.graphql(f"{{ endpoint(id: {literal(endpoint)}) {{ {query} }} }}")
        if data.get("endpoint") is None:
            raise JetyardError(f"there is no endpoint {endpoint}", code="not-found")
        return EndpointDetail.model_validate(data["endpoint"])

    async def _mutate(self, mutation: str, /, **args: Any) -> EndpointDetail:
        data = await self._client.graphql(
            f"mutation {{ {mutation}{arguments(**args)} {{ commandId status endpointId "
            f"endpoint {{ {DETAIL} }} }} }}"
        )
        outcome = data[mutation]
        if str(outcome.get("status", "")).lower() == "pending":
            raise JetyardError(
                f"{mutation} was sent but not decided in the gateway's wait; it may still take "
                f"effect (command {outcome.get('commandId')})",
                code="pending",
            )
        if outcome.get("endpoint") is None:
            return await self.get(outcome["endpointId"])
        return EndpointDetail.model_validate(outcome["endpoint"])

    async def create(
        self,
        name: str,
        *,
        image: str,
        port: int | None = None,
        replicas: int = 1,
        min_replicas: int | None = None,
        max_replicas: int | None = None,
        rules: Sequence[Mapping[str, Any]] | None = None,
        open_to_public: bool = False,
        project: str | None = None,
        **revision: Any,
    ) -> EndpointDetail:
        """Make an endpoint. ``revision`` takes the other ``RevisionInput`` fields in
        snake_case (``model``, ``command``, ``env`` as a mapping, ``cpu``, ``memory``, ``gpu``,
        ``health`` as a mapping...); ``rules`` are mappings of ``ScalingRuleInput`` fields."""
        spec = revision_input(image=image, port=port, **revision)
        given: dict[str, Any] = {
            "name": name, "revision": spec, "replicas": replicas, "openToPublic": open_to_public,
        }  # fmt: skip
        scaling = scaling_input(rules, min_replicas=min_replicas, max_replicas=max_replicas)
        if scaling is not None:
            given["scaling"] = scaling
        if project is not None:
            given["project"] = project
        return await self._mutate("createEndpoint", input=given)

    async def update(self, endpoint: str, *, reason: str = "", **revision: Any) -> EndpointDetail:
        """Roll to a new revision: ``revision`` as for ``create``; what is left out stays."""
        return await self._mutate(
            "updateEndpoint", id=endpoint, revision=revision_input(**revision), reason=reason
        )

    async def scale(self, endpoint: str, replicas: int) -> EndpointDetail:
        return await self._mutate("scaleEndpoint", id=endpoint, replicas=replicas)

    async def modify(
        self,
        endpoint: str,
        *,
        rules: Sequence[Mapping[str, Any]] | None = None,
        open_to_public: bool | None = None,
        **bounds: Any,
    ) -> EndpointDetail:
        """Change ``min_replicas``, ``max_replicas``, ``cold_start_timeout_s``, ``max_surge``,
        ``max_unavailable``, the rules (all replaced; ``[]`` removes them) or the openness."""
        return await self._mutate(
            "modifyEndpoint", id=endpoint, scaling=scaling_input(rules, **bounds),
            openToPublic=open_to_public,
        )  # fmt: skip

    async def destroy(self, endpoint: str, *, reason: str = "") -> EndpointDetail:
        return await self._mutate("destroyEndpoint", id=endpoint, reason=reason)

    async def create_token(
        self, endpoint: str, *, expires_in_s: int = 30 * DAY_S, note: str = ""
    ) -> IssuedToken:
        """A bearer token; its text (``IssuedToken.token``) is shown only this once."""
        data = await self._client.graphql(
            f"mutation {{ createEndpointToken"
            f"{arguments(id=endpoint, expiresInS=expires_in_s, note=note)} "
            f"{{ {selection(IssuedToken)} }} }}"
        )
        issued = IssuedToken.model_validate(data["createEndpointToken"])
        if issued.status.lower() == "pending":
            raise JetyardError(
                "the token was sent but not decided in the gateway's wait: it may work soon "
                f"(token id {issued.token_id}); its text is {issued.token}",
                code="pending",
            )
        return issued

    async def tokens(self, endpoint: str) -> builtins.list[EndpointToken]:
        return (await self.get(endpoint)).tokens

    async def revoke_token(self, endpoint: str, token_id: str, *, reason: str = "") -> None:
        await self._mutate("revokeEndpointToken", id=endpoint, tokenId=token_id, reason=reason)
