"""Monitors and auditors read and act on nothing: every mutation they send is refused here,
before any resolver runs, whatever the resolvers check themselves (they check too: a new
mutation that forgets is still refused). Logging in and out are theirs."""

from __future__ import annotations

from collections.abc import AsyncIterator

from graphql import FieldNode, GraphQLError, OperationDefinitionNode
from strawberry.extensions import SchemaExtension
from strawberry.types.graphql import OperationType

from services.gateway.context import Context

ALLOWED = frozenset({"login", "logout", "__typename"})
"""The mutations a read-only role may send."""


class ReadOnlyRoles(SchemaExtension):
    async def on_execute(self) -> AsyncIterator[None]:
        execution = self.execution_context
        context = execution.context
        principal = context.principal if isinstance(context, Context) else None
        if (
            principal is not None
            and principal.read_only
            and execution.operation_type is OperationType.MUTATION
        ):
            refused = sorted(_fields(execution.graphql_document, execution.operation_name))
            if refused:
                message = (
                    f"{principal.role.value}s read; they act on nothing ({', '.join(refused)} "
                    "refused)"
                )
                context.denied.append(message)
                raise GraphQLError(message, extensions={"code": "forbidden"})
        yield


def _fields(document: object, name: str | None) -> set[str]:
    """The operation's top-level fields not in ``ALLOWED`` (a fragment at the top counts as
    refused: its fields are not looked into)."""
    definitions = getattr(document, "definitions", ())
    operations = [d for d in definitions if isinstance(d, OperationDefinitionNode)]
    chosen = [o for o in operations if name is None or (o.name and o.name.value == name)]
    refused: set[str] = set()
    for operation in chosen[:1]:
        for selection in operation.selection_set.selections:
            if not isinstance(selection, FieldNode):
                refused.add("a fragment")
            elif selection.name.value not in ALLOWED:
                refused.add(selection.name.value)
    return refused
