"""How the SDK writes GraphQL: the base of its models (snake_case attributes, camelCase on the
wire, frozen), ``selection``, which writes the selection set of a model so that a query asks
for exactly the fields its model reads, GraphQL literals for arguments written inline, and
``Caller``, what the typed parts (``sessions``, ``admin``, ``folders``) need of a client.
Talks to nothing itself."""

from __future__ import annotations

import json
import types
import typing
from collections.abc import AsyncGenerator, Mapping
from typing import Any, Protocol, Union

from pydantic import BaseModel, ConfigDict
from pydantic.alias_generators import to_camel


class Caller(Protocol):
    """A client's GraphQL calls (``AsyncClient`` is one)."""

    async def graphql(
        self, query: str, variables: dict[str, Any] | None = None
    ) -> dict[str, Any]: ...

    def subscribe(
        self, query: str, variables: dict[str, Any] | None = None
    ) -> AsyncGenerator[dict[str, Any], None]: ...


class Model(BaseModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, frozen=True, extra="ignore"
    )

    def as_json(self) -> dict[str, Any]:
        """As the gateway writes it (camelCase), JSON-ready: what ``--json`` prints."""
        return self.model_dump(mode="json", by_alias=True)


def camel_name(name: str) -> str:
    """``total_resource_slots`` -> ``totalResourceSlots``: the API's spelling of a name."""
    head, *rest = name.split("_")
    return head + "".join(word.title() for word in rest)


def _inner_model(annotation: Any) -> type[Model] | None:
    if isinstance(annotation, type) and issubclass(annotation, Model):
        return annotation
    origin = typing.get_origin(annotation)
    if origin in (list, tuple, Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _inner_model(arg)
            if found is not None:
                return found
    return None


def selection(model: type[Model]) -> str:
    """``id status resources { cpu memoryBytes gpu } ...``: every field, nested ones too."""
    parts = []
    for name, field in model.model_fields.items():
        alias = field.alias or name
        inner = _inner_model(field.annotation)
        parts.append(f"{alias} {{ {selection(inner)} }}" if inner is not None else alias)
    return " ".join(parts)


def literal(value: Any) -> str:
    """A GraphQL literal. Arguments are written inline rather than as variables so that a
    call reads the same whether the schema types an argument ``ID`` or ``String``."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)  # JSON string escapes are GraphQL string escapes
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k}: {literal(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    raise TypeError(f"no GraphQL literal for {type(value).__name__}")


def past(position: int | None) -> dict[str, int] | None:
    """The ``asOf`` argument for a log position (None: now)."""
    return None if position is None else {"position": position}


def arguments(**values: Any) -> str:
    given = {k: v for k, v in values.items() if v is not None}
    return "(" + ", ".join(f"{k}: {literal(v)}" for k, v in given.items()) + ")" if given else ""
