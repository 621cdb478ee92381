"""The synchronous client: the asynchronous one (``jetyard.sdk.async_client``) run on an
event loop of its own in a background thread, so that it works in plain scripts and in
notebooks (whose own loop is already running). Every method blocks and returns what its
async twin returns; the subscriptions become plain iterators.

    with Client.from_config() as jy:
        created = jy.sessions.create("jetyard-busybox:latest", type="batch", command=["true"])
        print(jy.sessions.wait(created.session_id).exit_code)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterator
from concurrent.futures import Future
from datetime import datetime
from typing import Any, ParamSpec, TypeVar

import httpx

from jetyard.sdk.async_client import AsyncClient
from jetyard.sdk.auth import now
from jetyard.sdk.config import Credentials, resolve
from jetyard.sdk.models import ImagePull, KernelOutput, StatusChange
from jetyard.sdk.models.audit import AuditEvent

P = ParamSpec("P")
T = TypeVar("T")


class Portal:
    """An event loop in a daemon thread, and a way to run a coroutine on it and wait."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="jetyard-sdk", daemon=True
        )
        self._thread.start()

    def call(self, coroutine: Coroutine[Any, Any, T]) -> T:
        future: Future[T] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result()

    def blocking(self, method: Callable[P, Awaitable[T]]) -> Callable[P, T]:
        async def run(*args: P.args, **kwargs: P.kwargs) -> T:
            return await method(*args, **kwargs)

        def call(*args: P.args, **kwargs: P.kwargs) -> T:
            return self.call(run(*args, **kwargs))

        call.__doc__ = method.__doc__
        return call

    def iterate(self, stream: AsyncIterator[T]) -> Iterator[T]:
        async def step() -> tuple[bool, T | None]:
            try:
                return True, await anext(stream)
            except StopAsyncIteration:
                return False, None

        async def close() -> None:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                await aclose()

        try:
            while True:
                more, item = self.call(step())
                if not more:
                    return
                yield item  # type: ignore[misc]
        finally:
            self.call(close())

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


class Client:
    """Use as a context manager, or call ``close``. Takes what ``AsyncClient`` takes: a
    keypair, a login ``token``, or nothing (``login`` only)."""

    def __init__(
        self,
        endpoint: str,
        access_key: str | None = None,
        secret_key: str | None = None,
        *,
        token: str | None = None,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] = now,
    ) -> None:
        self._portal = portal = Portal()

        async def make() -> AsyncClient:
            return AsyncClient(
                endpoint, access_key, secret_key, token=token, timeout_s=timeout_s,
                transport=transport, clock=clock,
            )  # fmt: skip

        try:
            self.aio = portal.call(make())
        except BaseException:
            portal.close()
            raise
        """The asynchronous client underneath (its calls belong on the portal's loop)."""
        self.endpoint = self.aio.endpoint
        self.graphql = portal.blocking(self.aio.graphql)
        self.login = portal.blocking(self.aio.login)
        self.logout = portal.blocking(self.aio.logout)
        self.sessions = Sessions(portal, self.aio)
        self.apps = Apps(portal, self.aio)
        self.usage = Usage(portal, self.aio)
        self.admin = Admin(portal, self.aio)
        self.registries = Registries(portal, self.aio)
        self.folders = Folders(portal, self.aio)
        self.endpoints = Endpoints(portal, self.aio)
        self.audit = Audit(portal, self.aio)

    @classmethod
    def from_config(cls, credentials: Credentials | None = None, **options: Any) -> Client:
        """As ``AsyncClient.from_config``: the environment, else ``jetyard login``'s file."""
        found = credentials or resolve()
        return cls(found.endpoint, found.access_key, found.secret_key, token=found.token, **options)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._portal.call(self.aio.aclose())
        self._portal.close()


class Sessions:
    """``AsyncClient.sessions``, blocking; the subscriptions as iterators."""

    def __init__(self, portal: Portal, aio: AsyncClient) -> None:
        inner = aio.sessions
        self._portal, self._inner = portal, inner
        self.create = portal.blocking(inner.create)
        self.get = portal.blocking(inner.get)
        self.list = portal.blocking(inner.list)
        self.terminate = portal.blocking(inner.terminate)
        self.logs = portal.blocking(inner.logs)
        self.wait = portal.blocking(inner.wait)
        self.resolve = portal.blocking(inner.resolve)
        self.images = portal.blocking(inner.images)

    def statuses(self, session_id: str) -> Iterator[StatusChange]:
        return self._portal.iterate(self._inner.statuses(session_id))

    def output(
        self, session_id: str, since: int = 0, kernel: str | None = None
    ) -> Iterator[KernelOutput]:
        return self._portal.iterate(self._inner.output(session_id, since, kernel))

    def pulls(self, session_id: str) -> Iterator[ImagePull]:
        return self._portal.iterate(self._inner.pulls(session_id))


class Apps:
    def __init__(self, portal: Portal, aio: AsyncClient) -> None:
        self.list = portal.blocking(aio.apps.list)
        self.start = portal.blocking(aio.apps.start)


class Usage:
    def __init__(self, portal: Portal, aio: AsyncClient) -> None:
        self.report = portal.blocking(aio.usage.report)


class Admin:
    """``AsyncClient.admin``, blocking."""

    def __init__(self, portal: Portal, aio: AsyncClient) -> None:
        inner, blocking = aio.admin, portal.blocking
        self.viewer, self.quotas = blocking(inner.viewer), blocking(inner.quotas)
        self.domains, self.projects = blocking(inner.domains), blocking(inner.projects)
        self.users, self.keypairs = blocking(inner.users), blocking(inner.keypairs)
        self.policies, self.nodes = blocking(inner.policies), blocking(inner.nodes)
        self.create_domain = blocking(inner.create_domain)
        self.create_project = blocking(inner.create_project)
        self.create_user = blocking(inner.create_user)
        self.add_user, self.add_users = blocking(inner.add_user), blocking(inner.add_users)
        self.deactivate_user = blocking(inner.deactivate_user)
        self.add_user_to_project = blocking(inner.add_user_to_project)
        self.create_keypair = blocking(inner.create_keypair)
        self.deactivate_keypair = blocking(inner.deactivate_keypair)
        self.reactivate_keypair = blocking(inner.reactivate_keypair)
        self.create_policy = blocking(inner.create_policy)
        self.modify_policy = blocking(inner.modify_policy)
        self.cordon_node = blocking(inner.cordon_node)
        self.uncordon_node = blocking(inner.uncordon_node)


class Registries:
    """``AsyncClient.registries``, blocking (a rescan's progress callback runs on the
    client's thread)."""

    def __init__(self, portal: Portal, aio: AsyncClient) -> None:
        inner, blocking = aio.registries, portal.blocking
        self.list, self.add = blocking(inner.list), blocking(inner.add)
        self.modify, self.remove = blocking(inner.modify), blocking(inner.remove)
        self.rescan = blocking(inner.rescan)
        self.set_pull_policy = blocking(inner.set_pull_policy)


class Folders:
    """``AsyncClient.folders``, blocking (progress callbacks run on the client's thread)."""

    def __init__(self, portal: Portal, aio: AsyncClient) -> None:
        inner, blocking = aio.folders, portal.blocking
        self.create, self.list = blocking(inner.create), blocking(inner.list)
        self.get = blocking(inner.get)
        self.rename, self.clone = blocking(inner.rename), blocking(inner.clone)
        self.trash, self.restore = blocking(inner.trash), blocking(inner.restore)
        self.purge, self.share = blocking(inner.purge), blocking(inner.share)
        self.accept, self.decline = blocking(inner.accept), blocking(inner.decline)
        self.revoke, self.leave = blocking(inner.revoke), blocking(inner.leave)
        self.set_quota, self.access = blocking(inner.set_quota), blocking(inner.access)
        self.upload, self.download = blocking(inner.upload), blocking(inner.download)
        self.ls, self.mkdir = blocking(inner.ls), blocking(inner.mkdir)
        self.rm, self.mv = blocking(inner.rm), blocking(inner.mv)


class Audit:
    """``AsyncClient.audit``, blocking (``events`` as a list: every page)."""

    def __init__(self, portal: Portal, aio: AsyncClient) -> None:
        inner, blocking = aio.audit, portal.blocking
        self.page, self.refusals = blocking(inner.page), blocking(inner.refusals)
        self.position_at = blocking(inner.position_at)

        async def every(**filters: Any) -> list[AuditEvent]:
            return [event async for event in inner.events(**filters)]

        self.events = blocking(every)


class Endpoints:
    """``AsyncClient.endpoints``, blocking."""

    def __init__(self, portal: Portal, aio: AsyncClient) -> None:
        inner, blocking = aio.endpoints, portal.blocking
        self.list, self.get = blocking(inner.list), blocking(inner.get)
        self.create, self.update = blocking(inner.create), blocking(inner.update)
        self.scale, self.modify = blocking(inner.scale), blocking(inner.modify)
        self.destroy = blocking(inner.destroy)
        self.create_token, self.tokens = blocking(inner.create_token), blocking(inner.tokens)
        self.revoke_token = blocking(inner.revoke_token)
