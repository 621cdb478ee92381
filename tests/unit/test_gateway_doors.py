"""The pure rules behind the API's doors: introspection is priced at the exact size of its
answer, apart from data; an operation over a transport that cannot carry it is named; a client
that left is told apart from a bug."""

from __future__ import annotations

from typing import Any

import pytest
from graphql import (
    FragmentDefinitionNode,
    GraphQLError,
    OperationDefinitionNode,
    get_introspection_query,
    graphql_sync,
    parse,
    validate,
)
from starlette.requests import ClientDisconnect
from strawberry.http.exceptions import WebSocketDisconnected

from services.gateway.errors import is_disconnect
from services.gateway.limits import MAX_COST, MAX_INTROSPECTION_COST, _Walk, cost_rule
from services.gateway.requests import (
    MUTATION_OVER_GET,
    SUBSCRIPTION_OVER_HTTP,
    GraphQLRequest,
    request_of_query_string,
    wrong_transport,
)
from services.gateway.schema import schema

SCHEMA = schema._schema
EVERY_OPTION = get_introspection_query(
    descriptions=True,
    specified_by_url=True,
    directive_is_repeatable=True,
    schema_description=True,
    input_value_deprecation=True,
)


def _fields_in(value: Any) -> int:
    if isinstance(value, dict):
        return sum(1 + _fields_in(v) for v in value.values())
    if isinstance(value, list):
        return sum(_fields_in(v) for v in value)
    return 0


def _walked(query: str) -> _Walk:
    document = parse(query)
    fragments = {
        d.name.value: d for d in document.definitions if isinstance(d, FragmentDefinitionNode)
    }
    operation = next(d for d in document.definitions if isinstance(d, OperationDefinitionNode))
    walk = _Walk(SCHEMA, fragments)
    walk.cost(operation.selection_set, SCHEMA.query_type, set())
    return walk


@pytest.mark.parametrize(
    "query",
    [
        get_introspection_query(),
        EVERY_OPTION,
        '{ __type(name: "Session") { name fields { name type { name ofType { name } } } } }',
        "{ __schema { types { name fields { args { type { name } } } } } }",
        '{ __type(name: "Query") { fields { type { name fields { name } } } } }',
        '{ a: __type(name: "Query") { name } b: __type(name: "no such type") { name } }',
    ],
)
def test_introspection_costs_exactly_the_fields_its_answer_holds(query: str) -> None:
    answer = graphql_sync(SCHEMA, query)
    assert answer.errors is None
    assert _walked(query).introspection == _fields_in(answer.data)


def test_graphiqls_query_passes_and_data_is_priced_by_pages_as_before() -> None:
    assert validate(SCHEMA, parse(EVERY_OPTION), [cost_rule(MAX_COST)]) == []
    assert _walked(EVERY_OPTION).introspection < MAX_INTROSPECTION_COST / 5
    heavy = "{ sessions(first: 500) { edges { node { id history { status reason } } } } }"
    errors = validate(SCHEMA, parse(heavy), [cost_rule(MAX_COST)])
    assert len(errors) == 1
    assert errors[0].message.startswith("the operation would cost about ")
    assert _walked(heavy).introspection == 0


def test_introspection_over_its_own_limit_is_refused_with_its_size() -> None:
    errors: list[GraphQLError] = validate(
        SCHEMA, parse(EVERY_OPTION), [cost_rule(MAX_COST, max_introspection=1000)]
    )
    size = _walked(EVERY_OPTION).introspection
    assert [e.message for e in errors] == [
        f"IntrospectionQuery's introspection would cost {size} fields (the limit is 1000): "
        "ask for less of the schema at once"
    ]


@pytest.mark.parametrize(
    ("method", "query", "name", "refused"),
    [
        ("POST", 'subscription { sessionStatus(id: "x") { status } }', None, (400, "ws")),
        ("GET", 'subscription S { sessionStatus(id: "x") { status } }', "S", (400, "ws")),
        ("GET", 'mutation { destroySession(id: "x") { id } }', None, (405, "post")),
        ("POST", 'mutation { destroySession(id: "x") { id } }', None, None),
        ("GET", "{ viewer { email } }", None, None),
        ("POST", "query A { viewer { email } } subscription B { x }", "A", None),
        ("POST", "query A { viewer { email } } subscription B { x }", None, None),  # GraphQL's
        ("POST", "subscription {", None, None),  # a syntax error is GraphQL's to say
    ],
)
def test_an_operation_over_a_transport_that_cannot_carry_it_is_named(
    method: str, query: str, name: str | None, refused: tuple[int, str] | None
) -> None:
    expected = None
    if refused is not None:
        status, kind = refused
        expected = (status, SUBSCRIPTION_OVER_HTTP if kind == "ws" else MUTATION_OVER_GET)
    assert wrong_transport(method, GraphQLRequest(query, None, name)) == expected


def test_a_get_carries_its_operation_in_the_query_string() -> None:
    asked = request_of_query_string(b"query=mutation+%7B+x+%7D&operationName=M")
    assert asked == GraphQLRequest("mutation { x }", None, "M")
    assert request_of_query_string(b"") is None  # the GraphiQL page


def test_a_client_that_left_is_no_bug() -> None:
    assert is_disconnect(WebSocketDisconnected())
    assert is_disconnect(ClientDisconnect())
    assert is_disconnect(RuntimeError('Cannot call "send" once a close message has been sent.'))
    assert not is_disconnect(RuntimeError("something else broke"))
    assert not is_disconnect(OSError("NATS socket failed"))  # that is `unavailable`
    assert not is_disconnect(KeyError("a bug"))
