"""Compute sessions and their apps from Python, reached as ``AsyncClient.sessions`` and
``AsyncClient.apps``: typed calls over the gateway's session queries and mutations, and its
subscriptions (``sessionStatus``, ``sessionOutput``, ``sessionPulls``) as async iterators.

    async with AsyncClient.from_config() as jy:
        created = await jy.sessions.create("jetyard-busybox:latest", type="batch",
                                           command=["sh", "-c", "echo hi; exit 3"])
        async for chunk in jy.sessions.output(created.session_id):
            print(*chunk.lines, sep="\\n")
        print((await jy.sessions.wait(created.session_id)).exit_code)   # 3

A REJECTED command is a ``JetyardError`` with the outcome's code and message.
"""

from __future__ import annotations

import asyncio
import builtins
import time
from collections.abc import AsyncGenerator, Mapping, Sequence
from contextlib import aclosing
from typing import Any

from jetyard.sdk.errors import JetyardError
from jetyard.sdk.models import (
    AppAccess,
    ImagePull,
    KernelOutput,
    Mount,
    Outcome,
    RunnableImage,
    ServicePort,
    Session,
    SessionSummary,
    StatusChange,
)
from jetyard.sdk.wire import Caller, camel_name, past, selection
from schemas.session import TERMINAL_STATUSES

FINAL = frozenset(str(status) for status in TERMINAL_STATUSES)
OUTCOME = selection(Outcome)


IMAGE_PAGE = 100
"""Registered images read at once (a page the gateway's cost limit allows with their apps)."""
IMAGE_FIELDS = "{ name registry digest servicePorts { name } } }"
MIN_PREFIX = 8
"""The shortest id prefix that names a session (what reasons print: ``c899eb13``)."""


def no_session(session_id: str) -> JetyardError:
    return JetyardError(f"there is no session {_shown(session_id)}", code="not-found")


def _shown(ref: str) -> str:
    """What a person typed, quoted back at most 80 characters long."""
    return ref if len(ref) <= 80 else f"{ref[:80]}..."


def named(ref: str, sessions: Sequence[SessionSummary]) -> SessionSummary:
    """The one session ``ref`` names among ``sessions``: its id, its name, or a unique prefix
    of its id (``MIN_PREFIX`` characters or more). A name several sessions share names the one
    of them still live, if only one is; otherwise ``JetyardError`` (code ``ambiguous``) lists
    the candidates, or (``not-found``) says there is none."""
    exact = [s for s in sessions if s.id == ref]
    if exact:
        return exact[0]
    by_name = [s for s in sessions if s.name == ref]
    live = [s for s in by_name if s.status not in FINAL]
    if len(by_name) > 1 and len(live) == 1:
        return live[0]
    by_prefix = [s for s in sessions if len(ref) >= MIN_PREFIX and s.id.startswith(ref)]
    found = by_name + [s for s in by_prefix if s not in by_name]
    if len(found) == 1:
        return found[0]
    if not found:
        short = f" (an id prefix needs {MIN_PREFIX} characters)" if len(ref) < MIN_PREFIX else ""
        raise JetyardError(f"there is no session {_shown(ref)}{short}", code="not-found")
    listed = "; ".join(f"{s.id} ({s.name or 'no name'}, {s.status})" for s in found[:10]) + (
        "; ..." if len(found) > 10 else ""
    )
    raise JetyardError(
        f"{_shown(ref)!r} names {len(found)} sessions: {listed}; give one's id", code="ambiguous"
    )


def accepted(outcome: Outcome) -> Outcome:
    if outcome.status == "REJECTED":
        raise JetyardError(outcome.message, code=outcome.code)
    return outcome


class Sessions:
    def __init__(self, client: Caller) -> None:
        self._client = client

    async def create(
        self,
        image: str,
        *,
        command: Sequence[str] | None = None,
        type: str = "interactive",
        cpu: str = "1",
        memory: str = "256m",
        gpu: str = "0",
        cluster_size: int | None = None,
        mounts: Sequence[Mount | str] = (),
        env: Mapping[str, str] | None = None,
        **more: Any,
    ) -> Outcome:
        """Ask for a session; ``more`` takes any other ``CreateSessionInput`` field in
        snake_case (``name``, ``project``, ``resource_group``, ``depends_on``, ...)."""
        spec: dict[str, Any] = {
            "image": image,
            "type": type,
            "cpu": cpu,
            "memory": memory,
            "gpu": gpu,
            "command": list(command) if command is not None else None,
            "clusterSize": cluster_size,
            "mounts": [_mount(m).as_json() for m in mounts] or None,
            "env": [{"name": k, "value": v} for k, v in (env or {}).items()] or None,
            **{camel_name(k): v for k, v in more.items()},
        }
        data = await self._client.graphql(
            "mutation($input: CreateSessionInput!) { createSession(input: $input) "
            f"{{ {OUTCOME} }} }}",
            {"input": {k: v for k, v in spec.items() if v is not None}},
        )
        return accepted(Outcome.model_validate(data["createSession"]))

    async def resolve(self, ref: str) -> str:
        """The id of the session ``ref`` names: its id, its name, or a unique prefix of its id
        (8+ characters); ``JetyardError`` (``not-found`` or ``ambiguous``, listing the
        candidates) otherwise. An id costs one query; a name or a prefix reads the listing."""
        if await self.get(ref) is not None:
            return ref
        return named(ref, await self.list()).id

    async def images(self) -> builtins.list[RunnableImage]:
        """What a session can run, by name: the registered images (``images``) and those the
        nodes report holding (``nodeImages``: a user sees the nodes of the groups they may
        run in)."""
        registered: dict[str, dict[str, Any]] = {}
        while True:
            # The page inline: the gateway prices a page given as a variable as a large one.
            query = f"query($at: Int!) {{ images(first: {IMAGE_PAGE}, offset: $at) {IMAGE_FIELDS}"
            page = (await self._client.graphql(query, {"at": len(registered)}))["images"]
            registered |= {i["name"]: i for i in page}
            if len(page) < IMAGE_PAGE:
                break
        data = await self._client.graphql("{ nodeImages { name nodes resourceGroups hosts } }")
        held = {i["name"]: i for i in data["nodeImages"]}
        return [
            RunnableImage(
                name=name,
                registered=name in registered,
                nodes=held[name]["nodes"] if name in held else 0,
                resource_groups=held[name]["resourceGroups"] if name in held else [],
                hosts=held[name]["hosts"] if name in held else [],
                apps=[p["name"] for p in registered.get(name, {}).get("servicePorts", [])],
                registry=registered.get(name, {}).get("registry"),
                digest=registered.get(name, {}).get("digest") or "",
            )
            for name in sorted(registered.keys() | held.keys())
        ]

    async def get(self, session_id: str, *, as_of: int | None = None) -> Session | None:
        """The session as the views hold it (``as_of``: as they held it at that log
        position); None if there is none the caller may see."""
        data = await self._client.graphql(
            f"query($id: ID!, $asOf: AsOf) {{ session(id: $id, asOf: $asOf) "
            f"{{ {selection(Session)} }} }}",
            {"id": session_id, "asOf": past(as_of)},
        )
        found = data.get("session")
        return None if found is None else Session.model_validate(found)

    async def list(
        self, *, status: str | None = None, page: int = 100, as_of: int | None = None
    ) -> list[SessionSummary]:
        """Every session the caller sees (all pages), oldest first; one status if given;
        ``as_of``: as they were at that log position (administrators and auditors)."""
        query = (
            "query($first: Int!, $after: String, $status: String, $asOf: AsOf) { "
            "sessions(first: $first, after: $after, status: $status, asOf: $asOf) { edges { "
            f"node {{ {selection(SessionSummary)} }} }} pageInfo {{ hasNextPage endCursor }} }} }}"
        )
        found: builtins.list[SessionSummary] = []
        after: str | None = None
        while True:
            variables = {"first": page, "after": after, "status": status, "asOf": past(as_of)}
            sessions = (await self._client.graphql(query, variables))["sessions"]
            found += [SessionSummary.model_validate(e["node"]) for e in sessions["edges"]]
            if not sessions["pageInfo"]["hasNextPage"]:
                return found
            after = sessions["pageInfo"]["endCursor"]

    async def terminate(self, session_id: str, reason: str = "user request") -> Outcome:
        data = await self._client.graphql(
            "mutation($id: ID!, $reason: String!) { terminateSession(id: $id, reason: $reason) "
            f"{{ {OUTCOME} }} }}",
            {"id": session_id, "reason": reason},
        )
        return accepted(Outcome.model_validate(data["terminateSession"]))

    async def logs(self, session_id: str) -> str:
        """Its kernels' output so far (all of it once ended); empty before any."""
        data = await self._client.graphql(
            "query($id: ID!) { sessionLogs(id: $id) }", {"id": session_id}
        )
        return str(data.get("sessionLogs") or "")

    async def statuses(self, session_id: str) -> AsyncGenerator[StatusChange, None]:
        """Its status changes from the first, live; ends at a final status."""
        fields = selection(StatusChange)
        query = f"subscription($id: ID!) {{ sessionStatus(id: $id) {{ {fields} }} }}"
        # Closed here, not left to the collector, when the caller stops early.
        async with aclosing(self._client.subscribe(query, {"id": session_id})) as stream:
            async for data in stream:
                yield StatusChange.model_validate(data["sessionStatus"])

    async def output(
        self, session_id: str, since: int = 0, kernel: str | None = None
    ) -> AsyncGenerator[KernelOutput, None]:
        """Its kernels' output from line ``since`` of each (or of one kernel), then live;
        ends once the session has ended and all its output is delivered."""
        query = (
            "subscription($id: ID!, $since: Int!, $kernel: String) { sessionOutput(id: $id, "
            f"since: $since, kernel: $kernel) {{ {selection(KernelOutput)} }} }}"
        )
        variables = {"id": session_id, "since": since, "kernel": kernel}
        async with aclosing(self._client.subscribe(query, variables)) as stream:
            async for data in stream:
                yield KernelOutput.model_validate(data["sessionOutput"])

    async def pulls(self, session_id: str) -> AsyncGenerator[ImagePull, None]:
        """The pulls of its image on its nodes as they go (``ImagePull``: bytes done and to
        do, then finished or failed), from its placement; ends once it runs or ends (at once
        when it already has)."""
        query = f"subscription($id: ID!) {{ sessionPulls(id: $id) {{ {selection(ImagePull)} }} }}"
        async with aclosing(self._client.subscribe(query, {"id": session_id})) as stream:
            async for data in stream:
                yield ImagePull.model_validate(data["sessionPulls"])

    async def wait(self, session_id: str, *, timeout_s: float | None = None) -> Session:
        """The session once it has ended (TERMINATED, CANCELLED or ERROR), as the views hold
        it; ``TimeoutError`` after ``timeout_s``."""
        async with asyncio.timeout(timeout_s):
            async with aclosing(self.statuses(session_id)) as changes:
                async for change in changes:
                    if change.status in FINAL:
                        break
            # The views follow the log: wait for them to show the end too.
            deadline = time.monotonic() + 60
            while True:
                session = await self.get(session_id)
                if session is not None and session.status in FINAL:
                    return session
                if time.monotonic() > deadline:
                    raise JetyardError(f"session {session_id} ended, but the views never said so")
                await asyncio.sleep(0.2)


class Apps:
    """The apps (service ports) of running sessions, through the app proxy."""

    def __init__(self, client: Caller) -> None:
        self._client = client

    async def list(self, session_id: str) -> list[ServicePort]:
        """Its kernels' apps as their agents found them (``terminal`` is always there too)."""
        fields = selection(ServicePort)
        query = f"query($id: ID!) {{ session(id: $id) {{ servicePorts {{ {fields} }} }} }}"
        found = (await self._client.graphql(query, {"id": session_id})).get("session")
        if found is None:
            raise no_session(session_id)
        return [ServicePort.model_validate(p) for p in found["servicePorts"]]

    async def start(self, session_id: str, app: str) -> AppAccess:
        """The URL of one app (``terminal``: a WebSocket shell), with a short-lived token."""
        data = await self._client.graphql(
            "mutation($id: ID!, $app: String!) { startApp(sessionId: $id, app: $app) "
            f"{{ {selection(AppAccess)} }} }}",
            {"id": session_id, "app": app},
        )
        return AppAccess.model_validate(data["startApp"])


def _mount(mount: Mount | str) -> Mount:
    return mount if isinstance(mount, Mount) else Mount(folder=mount)
