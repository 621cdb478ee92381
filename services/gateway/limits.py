"""Limits on what one GraphQL request may ask for: depth, aliases, tokens and an estimated
cost (a list field multiplies the cost of what it selects by the page it asks for). Pure
validation; reads and writes nothing."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from graphql import (
    FieldNode,
    FragmentDefinitionNode,
    FragmentSpreadNode,
    GraphQLError,
    InlineFragmentNode,
    IntValueNode,
    OperationDefinitionNode,
    SelectionSetNode,
    ValidationContext,
    ValidationRule,
    VariableNode,
)
from strawberry.extensions import (
    AddValidationRules,
    MaxAliasesLimiter,
    MaxTokensLimiter,
    QueryDepthLimiter,
    SchemaExtension,
)

MAX_DEPTH = 10
MAX_ALIASES = 15
MAX_TOKENS = 2000
MAX_COST = 20_000
DEFAULT_PAGE = 50
"""With ``first`` given as a variable the page is unknown at validation: ten pages' worth."""


def cost_rule(max_cost: int) -> type[ValidationRule]:
    class CostLimit(ValidationRule):
        def __init__(self, context: ValidationContext) -> None:
            super().__init__(context)
            document = context.document
            fragments = {
                d.name.value: d
                for d in document.definitions
                if isinstance(d, FragmentDefinitionNode)
            }
            variables: dict[str, Any] = {}
            for definition in document.definitions:
                if not isinstance(definition, OperationDefinitionNode):
                    continue
                cost = _cost(definition.selection_set, fragments, variables, set())
                if cost > max_cost:
                    name = definition.name.value if definition.name else "the operation"
                    context.report_error(
                        GraphQLError(
                            f"{name} would cost about {cost} (the limit is {max_cost}): "
                            "ask for smaller pages or fewer nested fields"
                        )
                    )

    return CostLimit


def _cost(
    selection: SelectionSetNode | None,
    fragments: dict[str, FragmentDefinitionNode],
    variables: dict[str, Any],
    seen: set[str],
) -> int:
    if selection is None:
        return 0
    total = 0
    for node in selection.selections:
        if isinstance(node, FieldNode):
            inner = _cost(node.selection_set, fragments, variables, seen)
            total += 1 + _page(node) * inner if node.selection_set else 1
        elif isinstance(node, InlineFragmentNode):
            total += _cost(node.selection_set, fragments, variables, seen)
        elif isinstance(node, FragmentSpreadNode):
            name = node.name.value
            if name in seen or name not in fragments:
                continue  # a cycle is the validator's error to report, not ours
            total += _cost(fragments[name].selection_set, fragments, variables, seen | {name})
    return total


def _page(node: FieldNode) -> int:
    for argument in node.arguments or ():
        if argument.name.value == "first":
            if isinstance(argument.value, IntValueNode):
                return max(1, int(argument.value.value))
            if isinstance(argument.value, VariableNode):
                return DEFAULT_PAGE * 10  # unknown until run: assume a large page
    # Unpaged lists (nodes, users...) are bounded by what the cluster holds, and depth and
    # token limits bound how many of them one request nests.
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
