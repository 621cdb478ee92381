"""Python SDK: sign every request with a keypair (``schemas.signing``) and call the gateway's
GraphQL endpoint. Talks HTTP only; reads and writes no subject.

    async with Client("http://127.0.0.1:8080", access_key, secret_key) as jy:
        data = await jy.graphql("{ sessions { id status } }")
        folder = await jy.folders.create("data")
        await jy.folders.upload("data", "train.csv")

Virtual folders (``jy.folders``) are in ``jetyard.sdk_folders``; their bytes move between
this machine and the storage data plane in ``jetyard.sdk_transfer``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import httpx

from schemas.signing import signed_headers

if TYPE_CHECKING:
    from jetyard.sdk_folders import Folders


def _now() -> datetime:
    return datetime.now(UTC)


class JetyardAuth(httpx.Auth):
    """Signs each request as sent: date now, a fresh nonce, the hash of the body."""

    requires_request_body = True

    def __init__(
        self, access_key: str, secret_key: str, clock: Callable[[], datetime] = _now
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


class JetyardError(RuntimeError):
    """The gateway or the storage data plane refused or failed a call; the message carries the
    server's explanation, ``code`` its machine-readable code where it gave one (a GraphQL
    error's ``extensions.code``, an outcome's code, or the data plane's ``error``)."""

    def __init__(
        self,
        message: str,
        status: int | None = None,
        errors: Any = None,
        code: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.errors = errors
        self.code = code


class Client:
    """A signed GraphQL client. Use as an async context manager, or call ``aclose``."""

    def __init__(
        self,
        endpoint: str,
        access_key: str,
        secret_key: str,
        *,
        timeout_s: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self._http = httpx.AsyncClient(
            base_url=endpoint.rstrip("/"),
            auth=JetyardAuth(access_key, secret_key, clock),
            timeout=timeout_s,
            transport=transport,
        )
        self._folders: Folders | None = None

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._folders is not None:
            await self._folders.aclose()
        await self._http.aclose()

    @property
    def folders(self) -> Folders:
        """Virtual folders: their GraphQL calls and their files (``jetyard.sdk_folders``)."""
        from jetyard.sdk_folders import Folders

        if self._folders is None:
            self._folders = Folders(self)
        return self._folders

    async def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``data`` of the answer; raises ``JetyardError`` on an HTTP or GraphQL error."""
        payload: dict[str, Any] = {"query": query}
        if variables is not None:
            payload["variables"] = variables
        try:
            response = await self._http.post("/graphql", json=payload)
        except httpx.HTTPError as exc:
            raise JetyardError(f"cannot reach the gateway at {self._http.base_url}: {exc}") from exc
        if response.is_error:
            raise JetyardError(
                f"the gateway answered {response.status_code} {response.reason_phrase}: "
                f"{_explain(response)}",
                status=response.status_code,
            )
        answer = response.json()
        if answer.get("errors"):
            messages = "; ".join(str(e.get("message", e)) for e in answer["errors"])
            raise JetyardError(
                messages,
                status=response.status_code,
                errors=answer["errors"],
                code=_first_code(answer["errors"]),
            )
        data = answer.get("data")
        return data if isinstance(data, dict) else {}


def _first_code(errors: Any) -> str | None:
    for error in errors if isinstance(errors, list) else []:
        extensions = error.get("extensions") if isinstance(error, dict) else None
        if isinstance(extensions, dict) and isinstance(extensions.get("code"), str):
            return str(extensions["code"])
    return None


def _explain(response: httpx.Response) -> str:
    """The server's own words: a problem+json ``detail``, GraphQL errors, or the text."""
    try:
        body = response.json()
    except ValueError:
        return response.text.strip() or "(no body)"
    if isinstance(body, dict):
        if "detail" in body:
            code = body.get("code")
            return f"{body['detail']} ({code})" if code else str(body["detail"])
        if body.get("errors"):
            return "; ".join(str(e.get("message", e)) for e in body["errors"])
    return response.text.strip()
