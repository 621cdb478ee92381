"""The one error every refusal of the gateway or the storage data plane becomes, and how a
GraphQL answer is read into data or that error. Talks to nothing itself."""

from __future__ import annotations

from typing import Any

import httpx


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
