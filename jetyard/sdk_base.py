"""What every SDK module shares: the two ways a client authenticates (a keypair signing each
request, ``schemas.signing``; a login token) and the one error every refusal becomes. Talks to
nothing itself."""

from __future__ import annotations

from collections.abc import Callable, Generator
from datetime import UTC, datetime
from typing import Any

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


def refusal(errors: Any, status: int | None = None) -> JetyardError:
    """GraphQL ``errors`` (a list, or one error) as one ``JetyardError``: their messages,
    the first machine-readable code."""
    listed = errors if isinstance(errors, list) else [errors]
    return JetyardError(messages(listed), status=status, errors=listed, code=first_code(listed))


def messages(errors: list[Any]) -> str:
    return "; ".join(str(e.get("message", e)) if isinstance(e, dict) else str(e) for e in errors)


def first_code(errors: Any) -> str | None:
    for error in errors if isinstance(errors, list) else []:
        extensions = error.get("extensions") if isinstance(error, dict) else None
        if isinstance(extensions, dict) and isinstance(extensions.get("code"), str):
            return str(extensions["code"])
    return None


def explain(response: httpx.Response) -> str:
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
            return messages(body["errors"])
    return response.text.strip()


def data_of(response: httpx.Response) -> dict[str, Any]:
    """The ``data`` of a GraphQL answer; ``JetyardError`` on an HTTP or GraphQL error."""
    if response.is_error:
        raise JetyardError(
            f"the gateway answered {response.status_code} {response.reason_phrase}: "
            f"{explain(response)}",
            status=response.status_code,
            code=first_code((_json_or_empty(response)).get("errors")),
        )
    answer = response.json()
    if answer.get("errors"):
        raise refusal(answer["errors"], response.status_code)
    data = answer.get("data")
    return data if isinstance(data, dict) else {}


def _json_or_empty(response: httpx.Response) -> dict[str, Any]:
    try:
        body = response.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}
