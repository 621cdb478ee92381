"""The asynchronous client: signed (or token-authenticated) GraphQL calls over httpx, the
gateway's subscriptions over graphql-transport-ws, and the typed parts built on them:
``sessions`` and ``apps`` (``jetyard.sdk.sessions``), ``folders`` (``jetyard.sdk.folders``),
``admin`` and ``usage`` (``jetyard.sdk.admin``), ``registries`` (``jetyard.sdk.images``),
``endpoints`` (``jetyard.sdk.endpoints``).
Talks HTTP and WebSocket only."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable
from datetime import datetime
from typing import Any

import httpx

from jetyard.sdk.admin import Admin, Usage
from jetyard.sdk.audit import Audit
from jetyard.sdk.auth import Anonymous, Auth, BearerAuth, JetyardAuth, now
from jetyard.sdk.config import Credentials, resolve
from jetyard.sdk.endpoints import Endpoints
from jetyard.sdk.errors import JetyardError, data_of
from jetyard.sdk.folders import Folders
from jetyard.sdk.images import Registries
from jetyard.sdk.models import LoginResult
from jetyard.sdk.sessions import Apps, Sessions
from jetyard.sdk.subscriptions import subscribe
from jetyard.sdk.wire import selection


def auth_of(
    access_key: str | None,
    secret_key: str | None,
    token: str | None,
    clock: Callable[[], datetime] = now,
) -> Auth:
    if access_key and secret_key:
        return JetyardAuth(access_key, secret_key, clock)
    if access_key or secret_key:
        raise ValueError("a keypair needs both its access key and its secret key")
    return BearerAuth(token) if token else Anonymous()


class AsyncClient:
    """Use as an async context manager, or call ``aclose``. Authenticates with a keypair
    (``access_key``, ``secret_key``), a login ``token``, or nothing (``login`` only)."""

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
        self.endpoint = endpoint.rstrip("/")
        self.auth = auth_of(access_key, secret_key, token, clock)
        self._http = httpx.AsyncClient(
            base_url=self.endpoint, auth=self.auth, timeout=timeout_s, transport=transport
        )
        self._folders: Folders | None = None

    @classmethod
    def from_config(cls, credentials: Credentials | None = None, **options: Any) -> AsyncClient:
        """As ``jetyard`` itself finds them: ``JETYARD_ENDPOINT``, ``JETYARD_ACCESS_KEY`` and
        ``JETYARD_SECRET_KEY``, else what ``jetyard login`` kept (``jetyard.sdk.config``)."""
        found = credentials or resolve()
        return cls(found.endpoint, found.access_key, found.secret_key, token=found.token, **options)

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._folders is not None:
            await self._folders.aclose()
        await self._http.aclose()

    @property
    def folders(self) -> Folders:
        """Virtual folders: their GraphQL calls and their files (``jetyard.sdk.folders``)."""
        if self._folders is None:
            self._folders = Folders(self)
        return self._folders

    @property
    def sessions(self) -> Sessions:
        return Sessions(self)

    @property
    def apps(self) -> Apps:
        return Apps(self)

    @property
    def endpoints(self) -> Endpoints:
        """Model-serving endpoints and their tokens (``jetyard.sdk.endpoints``)."""
        return Endpoints(self)

    @property
    def admin(self) -> Admin:
        return Admin(self)

    @property
    def audit(self) -> Audit:
        """The log as auditors read it, and refusals (``jetyard.sdk.audit``)."""
        return Audit(self)

    @property
    def usage(self) -> Usage:
        return Usage(self)

    @property
    def registries(self) -> Registries:
        """Registries and their rescans, image pull policies (superadmins)."""
        return Registries(self)

    async def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``data`` of the answer; raises ``JetyardError`` on an HTTP or GraphQL error."""
        payload: dict[str, Any] = {"query": query}
        if variables is not None:
            payload["variables"] = variables
        try:
            response = await self._http.post("/graphql", json=payload)
        except httpx.HTTPError as exc:
            raise JetyardError(f"cannot reach the gateway at {self._http.base_url}: {exc}") from exc
        return data_of(response)

    def subscribe(
        self, query: str, variables: dict[str, Any] | None = None
    ) -> AsyncGenerator[dict[str, Any], None]:
        """Each ``data`` a GraphQL subscription streams, until it completes."""
        return subscribe(self.endpoint, self.auth, query, variables)

    async def login(self, email: str, password: str) -> LoginResult:
        """A login token for this email and password (needs no credentials)."""
        data = await self.graphql(
            "mutation($email: String!, $password: String!) { login(email: $email, "
            f"password: $password) {{ {selection(LoginResult)} }} }}",
            {"email": email, "password": password},
        )
        return LoginResult.model_validate(data["login"])

    async def logout(self) -> bool:
        """End the login this client's token is (a keypair has nothing to end)."""
        if not isinstance(self.auth, BearerAuth):
            return False
        return bool((await self.graphql("mutation { logout }")).get("logout"))
