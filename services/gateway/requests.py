"""What a GraphQL request over HTTP must look like before GraphQL sees it, and which
operations a caller with no credentials may send. Pure; reads and writes nothing.

A body is a JSON object (UTF-8) with a string ``query`` and, if present, an object
``variables`` and a string ``operationName``; anything else is a 400 with a sentence saying
what was wrong. Python's JSON parser recurses, so nesting is bounded before it is parsed.
An operation sent over a transport that cannot carry it (a subscription over HTTP, a mutation
over GET) is refused with a sentence naming the one that can (``wrong_transport``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from graphql import (
    DocumentNode,
    FieldNode,
    GraphQLSyntaxError,
    OperationDefinitionNode,
    OperationType,
    parse,
)

MAX_BODY_BYTES = 1 << 20
"""A GraphQL request is text a person or a client library wrote: a megabyte is plenty."""
MAX_NESTING = 64
MAX_PARSE_TOKENS = 2000
"""As the query limits (``limits.MAX_TOKENS``): a longer document is refused there anyway."""
"""Brackets open at once in a body: variables nest a few levels, never hundreds."""
ANONYMOUS_FIELDS = frozenset({"login", "__typename"})
"""What a request without credentials may ask: signing in, nothing else (not even
introspection: a lab's API schema is its own business)."""


EXAMPLE = 'a JSON object such as {"query": "{ viewer { email } }", "variables": {}}'
WRONG_TRANSPORT = "wrong-transport"
SUBSCRIPTION_OVER_HTTP = (
    "subscriptions need a WebSocket (graphql-transport-ws): open ws://<gateway>/graphql with "
    "the subprotocol graphql-transport-ws, sign in with connection_init, then subscribe "
    "(the SDK's jetyard.sdk.subscriptions.subscribe does this); over HTTP only queries and "
    "mutations are answered"
)
MUTATION_OVER_GET = (
    "mutations need POST: send the same query as a JSON body "
    '({"query": ..., "variables": ...}) to /graphql; GET answers queries only'
)


class BadRequestError(ValueError):
    """The body is not a GraphQL request; the message says why."""


@dataclass(frozen=True, slots=True)
class GraphQLRequest:
    query: str
    variables: dict[str, Any] | None
    operation_name: str | None


def parse_body(body: bytes) -> GraphQLRequest:
    """The request in ``body``, or BadRequestError naming the first thing wrong."""
    if len(body) > MAX_BODY_BYTES:
        raise BadRequestError(f"the body is larger than {MAX_BODY_BYTES} bytes")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise BadRequestError(f"the body is not UTF-8 (byte {exc.start} is not)") from None
    depth = _nesting(text)
    if depth > MAX_NESTING:
        raise BadRequestError(f"the body nests deeper than {MAX_NESTING} levels")
    if not text.strip():
        raise BadRequestError(f"the body is empty; send {EXAMPLE}")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise BadRequestError(f"the body is not JSON: {str(exc)[:200]}") from None
    if not isinstance(data, dict):
        kind = "null" if data is None else type(data).__name__
        raise BadRequestError(f"the body is a JSON {kind}; send {EXAMPLE}")
    query = data.get("query")
    if not isinstance(query, str) or not query.strip():
        raise BadRequestError('"query" must be a string holding a GraphQL document')
    variables = data.get("variables")
    if variables is not None and not isinstance(variables, dict):
        raise BadRequestError('"variables" must be a JSON object (or null)')
    name = data.get("operationName")
    if name is not None and not isinstance(name, str):
        raise BadRequestError('"operationName" must be a string (or null)')
    return GraphQLRequest(query, variables, name)


def _nesting(text: str) -> int:
    """The deepest bracket nesting outside strings (a quick scan, no recursion)."""
    depth = deepest = 0
    in_string = escaped = False
    for char in text:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "[{":
            depth += 1
            if depth > deepest:
                deepest = depth
                if deepest > MAX_NESTING:
                    return deepest
        elif char in "]}":
            depth -= 1
    return deepest


def anonymous_allowed(request: GraphQLRequest) -> bool:
    """Whether a request with no credentials asks only for what anyone may (``login``). A
    document that does not parse is not: GraphQL's own error would describe the schema."""
    try:
        document = parse(request.query, max_tokens=MAX_PARSE_TOKENS)
    except GraphQLSyntaxError:
        return False
    if len(document.definitions) != 1:
        return False
    operation = _chosen(document, request.operation_name)
    if operation is None or operation.operation is not OperationType.MUTATION:
        return False
    fields = operation.selection_set.selections
    return all(isinstance(f, FieldNode) and f.name.value in ANONYMOUS_FIELDS for f in fields)


def request_of_query_string(query_string: bytes) -> GraphQLRequest | None:
    """The operation a GET asks for (``?query=...&operationName=...``), if any."""
    fields = parse_qs(query_string.decode("latin-1"), max_num_fields=16)
    query = fields.get("query", [""])[0]
    name = fields.get("operationName", [None])[0]
    return GraphQLRequest(query, None, name) if query.strip() else None


def wrong_transport(method: str, request: GraphQLRequest) -> tuple[int, str] | None:
    """(HTTP status, why) when ``method`` cannot carry the operation asked for: a subscription
    needs a WebSocket (400), a mutation needs POST (405). A document that does not parse, or
    names no single operation, is GraphQL's to answer."""
    operation = _operation(request)
    if operation is None:
        return None
    if operation.operation is OperationType.SUBSCRIPTION:
        return 400, SUBSCRIPTION_OVER_HTTP
    if operation.operation is OperationType.MUTATION and method == "GET":
        return 405, MUTATION_OVER_GET
    return None


def _operation(request: GraphQLRequest) -> OperationDefinitionNode | None:
    try:
        document = parse(request.query, max_tokens=MAX_PARSE_TOKENS)
    except GraphQLSyntaxError:
        return None
    return _chosen(document, request.operation_name)


def _chosen(document: DocumentNode, name: str | None) -> OperationDefinitionNode | None:
    """The operation ``name`` picks (or the only one), if exactly one."""
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if name is not None:
        operations = [o for o in operations if o.name is not None and o.name.value == name]
    return operations[0] if len(operations) == 1 else None
