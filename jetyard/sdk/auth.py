"""How an SDK client authenticates: a keypair signing each request (``schemas.signing``), a
login token, or nothing (``login`` only); the same credentials open its subscriptions. Talks
to nothing itself."""

from __future__ import annotations

from collections.abc import Callable, Generator
from datetime import UTC, datetime

import httpx

from schemas.signing import signed_headers


def now() -> datetime:
    return datetime.now(UTC)


class JetyardAuth(httpx.Auth):
    """Signs each request as sent: date now, a fresh nonce, the hash of the body."""

    requires_request_body = True

    def __init__(
        self, access_key: str, secret_key: str, clock: Callable[[], datetime] = now
    ) -> None:
        self.access_key = access_key
        self._secret_key = secret_key
        self._clock = clock

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        # The host as the server will see it in the Host header (with a non-default port).
        request.headers.update(
            signed_headers(
                access_key=self.access_key,
                secret_key=self._secret_key,
                method=request.method,
                path_with_query=request.url.raw_path.decode("ascii"),
                host=request.headers["host"],
                content_type=request.headers.get("content-type", ""),
                body=request.content,
                now=self._clock(),
            )
        )
        yield request

    def connection_params(self, host: str, path: str = "/graphql") -> dict[str, str]:
        """``connection_init`` payload of a graphql-transport-ws subscription: the headers of
        a signed ``GET <path>`` with an empty body, and the host it was signed for."""
        headers = signed_headers(
            access_key=self.access_key,
            secret_key=self._secret_key,
            method="GET",
            path_with_query=path,
            host=host,
            content_type="",
            body=b"",
            now=self._clock(),
        )
        return {"host": host, **headers}


class BearerAuth(httpx.Auth):
    """A login token (``login`` mutation) sent as ``Authorization: Bearer``."""

    def __init__(self, token: str) -> None:
        self._token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["authorization"] = f"Bearer {self._token}"
        yield request

    def connection_params(self, host: str, path: str = "/graphql") -> dict[str, str]:
        return {"host": host, "authorization": f"Bearer {self._token}"}


class Anonymous(httpx.Auth):
    """No credentials: the gateway answers ``login`` only."""

    def connection_params(self, host: str, path: str = "/graphql") -> dict[str, str]:
        return {"host": host}


Auth = JetyardAuth | BearerAuth | Anonymous
