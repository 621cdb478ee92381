"""Limits on what one GraphQL request may ask for: depth, aliases, tokens and an estimated
cost (a list field multiplies the cost of what it selects by the page it asks for), pure
validation; introspection (``__schema``, ``__type``) apart, at the exact size of its answer
(``core.introspection``) against a limit of its own; and how often: operations sent over a
WebSocket count against the caller's rate limit like HTTP requests (the HTTP middleware never
sees them: one connection carries many operations), read and written in ``jy-ratelimits``
through the shared limiter."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    GraphQLInterfaceType,
    GraphQLList,
    GraphQLNamedType,
    GraphQLNonNull,
    GraphQLObjectType,
    GraphQLOutputType,
    GraphQLSchema,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    OperationType,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
    VariableNode,
    get_named_type,
)
from strawberry.extensions import (
    AddValidationRules,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
    SchemaExtension,
)

from services.gateway.context import Context
from services.gateway.core.introspection import INTROSPECTION_ROOTS, IntrospectionCost

MAX_DEPTH = 10
MAX_ALIASES = 15
MAX_TOKENS = 2000
MAX_COST = 20_000
MAX_INTROSPECTION_COST = 100_000
"""Fields in the answer to the introspection of one operation: GraphiQL's query (graphql-core's
``get_introspection_query`` with every option) answers about 9,500 on this schema."""
DEFAULT_PAGE = 50
"""With ``first`` given as a variable the page is unknown at validation: ten pages' worth."""


def cost_rule(
    max_cost: int, max_introspection: int = MAX_INTROSPECTION_COST
) -> type[ValidationRule]:
    class CostLimit(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            document = context.document
            fragments = {
                d.name.value: d
                for d in document.definitions
                if isinstance(d, FragmentDefinitionNode)
            }
            schema = context.schema
            roots = {
                OperationType.QUERY: schema.query_type,
                OperationType.MUTATION: schema.mutation_type,
                OperationType.SUBSCRIPTION: schema.subscription_type,
            }
            for definition in document.definitions:
                if not isinstance(definition, OperationDefinitionNode):
                    continue
                walk = _Walk(schema, fragments)
                cost = walk.cost(definition.selection_set, roots.get(definition.operation), set())
                name = definition.name.value if definition.name else "the operation"
                if cost > max_cost:
                    context.report_error(
                        GraphQLError(
                            f"{name} would cost about {cost} (the limit is {max_cost}): "
                            "ask for smaller pages or fewer nested fields"
                        )
                    )
                if walk.introspection > max_introspection:
                    context.report_error(
                        GraphQLError(
                            f"{name}'s introspection would cost {walk.introspection} fields (the "
                            f"limit is {max_introspection}): ask for less of the schema at once"
                        )
                    )

    return CostLimit


class _Walk:
    """The estimated cost of a selection, knowing each field's type: a list or a connection
    asked for without ``first`` counts at its default page size, as the resolver serves it.
    Introspection is counted apart, in ``introspection``."""

    def __init__(self, schema: GraphQLSchema, fragments: dict[str, FragmentDefinitionNode]) -> None:
        self.schema = schema
        self.fragments = fragments
        self.introspection = 0
        self._introspected = IntrospectionCost(schema, fragments)

    def cost(
        self, selection: SelectionSetNode | None, parent: GraphQLNamedType | None, seen: set[str]
    ) -> int:
        if selection is None:
            return 0
        total = 0
        for node in selection.selections:
            if isinstance(node, FieldNode) and node.name.value in INTROSPECTION_ROOTS:
                self.introspection += self._introspected.root(node)
            elif isinstance(node, FieldNode):
                field_type = _field_type(parent, node.name.value)
                named = get_named_type(field_type) if field_type is not None else None
                if node.selection_set:
                    inner = self.cost(node.selection_set, named, seen)
                    total += 1 + _page(node, field_type, parent) * inner
                else:
                    total += 1
            elif isinstance(node, InlineFragmentNode):
                total += self.cost(node.selection_set, self._type(node, parent), seen)
            elif isinstance(node, FragmentSpreadNode):
                name = node.name.value
                if name in seen or name not in self.fragments:
                    continue  # a cycle is the validator's error to report, not ours
                fragment = self.fragments[name]
                inner_type = self._type(fragment, parent)
                total += self.cost(fragment.selection_set, inner_type, seen | {name})
        return total

    def _type(
        self, node: InlineFragmentNode | FragmentDefinitionNode, parent: GraphQLNamedType | None
    ) -> GraphQLNamedType | None:
        condition = node.type_condition
        return parent if condition is None else self.schema.get_type(condition.name.value)


def _field_type(parent: GraphQLNamedType | None, name: str) -> GraphQLOutputType | None:
    if isinstance(parent, GraphQLObjectType | GraphQLInterfaceType):
        field = parent.fields.get(name)
        return field.type if field is not None else None
    return None


def _page(
    node: FieldNode, field_type: GraphQLOutputType | None, parent: GraphQLNamedType | None
) -> int:
    for argument in node.arguments or ():
        if argument.name.value == "first":
            if isinstance(argument.value, IntValueNode):
                return max(1, int(argument.value.value))
            if isinstance(argument.value, VariableNode):
                return DEFAULT_PAGE * 10  # unknown until run: assume a large page
    # A list without ``first`` is served a default page (or all of a bounded list, such as
    # a session's kernels): it costs that many of what it selects.
    if parent is not None and parent.name.endswith("Connection"):
        return 1  # a connection's edges are its page, counted on the connection
    unwrapped = field_type.of_type if isinstance(field_type, GraphQLNonNull) else field_type
    if isinstance(unwrapped, GraphQLList):
        return DEFAULT_PAGE
    named = get_named_type(field_type) if field_type is not None else None
    if named is not None and named.name.endswith("Connection"):
        return DEFAULT_PAGE
    return 1


def limits() -> list[Callable[[], SchemaExtension]]:
    """Factories: strawberry makes each extension afresh for every operation."""
    cost = cost_rule(MAX_COST)
    return [
        lambda: QueryDepthLimiter(max_depth=MAX_DEPTH),
        lambda: MaxAliasesLimiter(max_alias_count=MAX_ALIASES),
        lambda: MaxTokensLimiter(max_token_count=MAX_TOKENS),
        lambda: AddValidationRules([cost]),
    ]


class WebSocketRateLimit(SchemaExtension):
    """Each operation over a WebSocket takes from the caller's rate limit."""

    async def on_execute(self) -> AsyncIterator[None]:
        context = self.execution_context.context
        if isinstance(context, Context) and context.over_websocket:
            services = context.services
            limiter = services.limiter
            if limiter is not None:
                key = services.rate_key(context.principal, context.source)
                verdict = await limiter.take(key, services.rate_limit_of(context.principal))
                if not verdict.allowed:
                    raise GraphQLError(
                        f"more than {verdict.limit} requests a minute: try again in "
                        f"{verdict.retry_after_s}s",
                        extensions={"code": "rate-limited"},
                    )
        yield
