"""Registries from Python (superadmins), reached as ``AsyncClient.registries``: the gateway's
``registries`` query, ``addRegistry``, ``modifyRegistry``, ``removeRegistry``,
``rescanRegistry`` (with its ``rescanProgress`` subscription followed alongside when asked)
and ``setImagePullPolicy``, as typed calls. A password or token is sent once and never comes
back (``RegistryInfo.has_secret``). Changes return the command's ``Outcome``; a REJECTED one
or a GraphQL error is a
``JetyardError`` with its code (a rescan's: ``registry-authentication``,
``registry-unreachable``, ``registry-tls``, ...).

    async with AsyncClient.from_config() as jy:
        await jy.registries.add("lab", "https://registry.lab:5000", username="ci",
                                password=token, projects=["default/research"])
        found = await jy.registries.rescan("lab", progress=print)
        print(found.registered, found.unchanged)
"""

from __future__ import annotations

import asyncio
import builtins
import contextlib
from collections.abc import Callable, Sequence
from contextlib import aclosing
from typing import Any

from jetyard.sdk.errors import JetyardError
from jetyard.sdk.models import Outcome, RegistryInfo, RescanProgress, RescanResult
from jetyard.sdk.wire import Caller, arguments, selection

PULL_POLICIES = ("if-not-present", "always", "digest")
"""What ``set_pull_policy`` takes (None: the resource group's policy)."""


class Registries:
    def __init__(self, client: Caller) -> None:
        self._client = client

    async def _send(self, field: str, types: str, **variables: Any) -> Outcome:
        """A mutation with its arguments as variables (``types`` declares them): a password or
        a CA is never part of the query's text, which a log or an error may quote."""
        given = ", ".join(f"{name}: ${name}" for name in variables)
        query = f"mutation({types}) {{ {field}({given}) {{ {selection(Outcome)} }} }}"
        outcome = Outcome.model_validate((await self._client.graphql(query, variables))[field])
        if outcome.status == "REJECTED":
            raise JetyardError(outcome.message, code=outcome.code)
        return outcome

    async def list(self) -> builtins.list[RegistryInfo]:
        """Every registry, removed ones included (``removed``), by name."""
        data = await self._client.graphql(f"{{ registries {{ {selection(RegistryInfo)} }} }}")
        return [RegistryInfo.model_validate(r) for r in data["registries"]]

    async def add(
        self,
        name: str,
        url: str,
        *,
        username: str = "",
        password: str = "",
        projects: Sequence[str] = (),
        verify_tls: bool = True,
        ca_pem: str = "",
    ) -> Outcome:
        """``url``: http(s)://host[:port]; ``projects``: ids or DOMAIN/NAME of the projects
        whose sessions may use its images (none: every project); ``ca_pem``: the lab's own CA."""
        return await self._send(
            "addRegistry", "$name: String!, $url: String!, $username: String!, "
            "$password: String!, $projects: [String!], $verifyTls: Boolean!, $caPem: String!",
            name=name, url=url, username=username, password=password,
            projects=builtins.list(projects), verifyTls=verify_tls, caPem=ca_pem,
        )  # fmt: skip

    async def modify(
        self,
        name: str,
        *,
        url: str | None = None,
        username: str | None = None,
        password: str | None = None,
        projects: Sequence[str] | None = None,
        verify_tls: bool | None = None,
        ca_pem: str | None = None,
    ) -> Outcome:
        """Change what is given; None leaves it as it is (a password of "" removes it)."""
        return await self._send(
            "modifyRegistry", "$name: String!, $url: String, $username: String, "
            "$password: String, $projects: [String!], $verifyTls: Boolean, $caPem: String",
            name=name, url=url, username=username, password=password,
            projects=None if projects is None else builtins.list(projects),
            verifyTls=verify_tls, caPem=ca_pem,
        )  # fmt: skip

    async def remove(self, name: str, reason: str = "") -> Outcome:
        """No rescan or pull uses it again; its sealed secret is forgotten."""
        return await self._send(
            "removeRegistry", "$name: String!, $reason: String!", name=name, reason=reason
        )

    async def rescan(
        self,
        name: str,
        repositories: Sequence[str] | None = None,
        progress: Callable[[RescanProgress], None] | None = None,
    ) -> RescanResult:
        """List its repositories (all, or those named) and tags, and record each image found;
        answers when done (give the client a ``timeout_s`` that long). ``progress`` is called
        with each ``RescanProgress`` the gateway publishes meanwhile (best effort: what is
        published before the subscription opens, or while it cannot, is not seen)."""
        listed = None if repositories is None else builtins.list(repositories)
        query = (
            f"mutation {{ rescanRegistry{arguments(name=name, repositories=listed)} "
            f"{{ {selection(RescanResult)} }} }}"
        )
        following = None if progress is None else asyncio.create_task(self._follow(name, progress))
        try:
            data = await self._client.graphql(query)
        finally:
            if following is not None:
                following.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await following
        return RescanResult.model_validate(data["rescanRegistry"])

    async def _follow(self, name: str, progress: Callable[[RescanProgress], None]) -> None:
        fields = selection(RescanProgress)
        query = f"subscription($name: String!) {{ rescanProgress(name: $name) {{ {fields} }} }}"
        # Progress is a courtesy: a subscription that fails leaves the rescan to answer alone.
        with contextlib.suppress(JetyardError):
            async with aclosing(self._client.subscribe(query, {"name": name})) as stream:
                async for data in stream:
                    progress(RescanProgress.model_validate(data["rescanProgress"]))

    async def set_pull_policy(self, image: str, policy: str | None) -> Outcome:
        """When nodes pull ``image``: one of ``PULL_POLICIES``, or None for its resource
        group's policy."""
        return await self._send(
            "setImagePullPolicy", "$name: String!, $policy: String", name=image, policy=policy
        )
