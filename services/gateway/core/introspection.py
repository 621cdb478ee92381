"""What an introspection selection (``__schema``, ``__type``) costs: the exact number of fields
its answer holds on this schema, counted over the schema in memory (no resolver runs). Data is
priced by pages a resolver may fetch (``limits``); introspection fetches nothing, so pages
would price GraphiQL's own query at 90,000 for an answer of a few thousand objects. Pure;
reads and writes nothing."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLEnumType,
    GraphQLInputObjectType,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLSchema,
    GraphQLUnionType,
    InlineFragmentNode,
    SelectionSetNode,
    StringValueNode,
)

INTROSPECTION_ROOTS = frozenset({"__schema", "__type"})
SCHEMA, TYPE, FIELD, INPUT_VALUE, ENUM_VALUE, DIRECTIVE = (
    "__Schema", "__Type", "__Field", "__InputValue", "__EnumValue", "__Directive",
)  # fmt: skip


class IntrospectionCost:
    """Counts the answer of introspection selections on one schema. Each (selection, schema
    object) pair is counted once and remembered, so a query that nests as far as GraphQL's
    own depth rule lets it costs a walk of the schema, not of its answer."""

    def __init__(self, schema: GraphQLSchema, fragments: dict[str, FragmentDefinitionNode]):
        self.schema = schema
        self.fragments = fragments
        self._memo: dict[tuple[int, int], int] = {}

    def root(self, node: FieldNode) -> int:
        """The cost of one ``__schema`` or ``__type(name: ...)`` field."""
        if node.name.value == "__schema":
            return 1 + self._count(node.selection_set, SCHEMA, self.schema, frozenset())
        name = next((a.value for a in node.arguments or () if a.name.value == "name"), None)
        if isinstance(name, StringValueNode):
            found = self.schema.get_type(name.value)
            types = [] if found is None else [found]
        else:  # a variable: the dearest type it could name
            types = list(self.schema.type_map.values())
        inner = [self._count(node.selection_set, TYPE, t, frozenset()) for t in types]
        return 1 + max(inner, default=0)

    def _count(
        self, selection: SelectionSetNode | None, kind: str, value: Any, seen: frozenset[str]
    ) -> int:
        if selection is None or value is None:
            return 0
        key = (id(selection), id(value))
        if key not in self._memo:
            self._memo[key] = self._fields(selection, kind, value, seen)
        return self._memo[key]

    def _fields(
        self, selection: SelectionSetNode, kind: str, value: Any, seen: frozenset[str]
    ) -> int:
        total = 0
        for node in selection.selections:
            if isinstance(node, FieldNode):
                total += 1
                if node.selection_set is not None:
                    for inner_kind, inner in self._children(kind, value, node.name.value):
                        total += self._count(node.selection_set, inner_kind, inner, seen)
            elif isinstance(node, InlineFragmentNode):
                condition = node.type_condition
                if condition is None or condition.name.value == kind:
                    total += self._count(node.selection_set, kind, value, seen)
            elif isinstance(node, FragmentSpreadNode):
                name = node.name.value
                fragment = self.fragments.get(name)
                if fragment is None or name in seen:
                    continue  # a cycle or a missing fragment is the validator's to report
                if fragment.type_condition.name.value == kind:
                    total += self._fields(fragment.selection_set, kind, value, seen | {name})
        return total

    def _children(self, kind: str, value: Any, field: str) -> Iterable[tuple[str, Any]]:
        """The introspection objects ``field`` of ``value`` answers (none for a leaf)."""
        if kind == SCHEMA:
            schema: GraphQLSchema = value
            if field == "types":
                return [(TYPE, t) for t in schema.type_map.values()]
            if field == "directives":
                return [(DIRECTIVE, d) for d in schema.directives]
            roots = {
                "queryType": schema.query_type,
                "mutationType": schema.mutation_type,
                "subscriptionType": schema.subscription_type,
            }
            return [(TYPE, roots[field])] if roots.get(field) is not None else []
        if kind == TYPE:
            return self._of_type(value, field)
        if kind in (FIELD, DIRECTIVE) and field == "args":
            return [(INPUT_VALUE, a) for a in value.args.values()]
        if kind in (FIELD, INPUT_VALUE) and field == "type":
            return [(TYPE, value.type)]
        return []

    def _of_type(self, value: Any, field: str) -> Iterable[tuple[str, Any]]:
        if field == "ofType":
            wrapped = isinstance(value, GraphQLList | GraphQLNonNull)
            return [(TYPE, value.of_type)] if wrapped else []
        if field == "fields" and isinstance(value, GraphQLObjectType | GraphQLInterfaceType):
            return [(FIELD, f) for f in value.fields.values()]
        if field == "interfaces" and isinstance(value, GraphQLObjectType | GraphQLInterfaceType):
            return [(TYPE, i) for i in value.interfaces]
        if field == "possibleTypes" and isinstance(value, GraphQLInterfaceType | GraphQLUnionType):
            return [(TYPE, t) for t in self.schema.get_possible_types(value)]
        if field == "enumValues" and isinstance(value, GraphQLEnumType):
            return [(ENUM_VALUE, v) for v in value.values.values()]
        if field == "inputFields" and isinstance(value, GraphQLInputObjectType):
            return [(INPUT_VALUE, f) for f in value.fields.values()]
        return []
