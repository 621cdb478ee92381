"""What a GraphQL request over HTTP must look like before GraphQL sees it, and which
operations a caller with no credentials may send. Pure; reads and writes nothing.

A body is a JSON object (UTF-8) with a string ``query`` and, if present, an object
``variables`` and a string ``operationName``; anything else is a 400 with a sentence saying
what was wrong. Python's JSON parser recurses, so nesting is bounded before it is parsed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from graphql import FieldNode, GraphQLSyntaxError, OperationDefinitionNode, OperationType, parse

MAX_BODY_BYTES = 1 << 20
"""A GraphQL request is text a person or a client library wrote: a megabyte is plenty."""
MAX_NESTING = 64
"""Brackets open at once in a body: variables nest a few levels, never hundreds."""
ANONYMOUS_FIELDS = frozenset({"login", "__typename"})
"""What a request without credentials may ask: signing in, nothing else (not even
introspection: a lab's API schema is its own business)."""


EXAMPLE = 'a JSON object such as {"query": "{ viewer { email } }", "variables": {}}'


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
        document = parse(request.query, max_tokens=2000)
    except GraphQLSyntaxError:
        return False
    operations = [d for d in document.definitions if isinstance(d, OperationDefinitionNode)]
    if request.operation_name is not None:
        operations = [
            o for o in operations if o.name is not None and o.name.value == request.operation_name
        ]
    if len(operations) != 1 or len(document.definitions) != 1:
        return False
    operation = operations[0]
    if operation.operation is not OperationType.MUTATION:
        return False
    fields = operation.selection_set.selections
    return all(isinstance(f, FieldNode) and f.name.value in ANONYMOUS_FIELDS for f in fields)
