"""Strict at the edge, lenient in the log: find unknown fields in input before validation.

Value objects embedded in events (``SessionSpec``, ``ResourceSlots``, ``Actor``...) ignore
unknown fields, so code that is one version behind can still read events that gained a field.
Input from users must not get that leniency (a typo such as ``gpus`` would silently request
nothing), so commands check their raw input against the whole model tree with this function.
"""

from __future__ import annotations

import functools
import types
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel


def _models_in(annotation: Any) -> list[tuple[str, type[BaseModel]]]:
    """Model types reachable from an annotation, tagged by how they nest (one, seq, map)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [("one", annotation)]
    origin = get_origin(annotation)
    args = get_args(annotation)
    if origin in (Union, types.UnionType):
        return [found for arg in args for found in _models_in(arg)]
    if origin in (list, tuple, set, frozenset):
        return [("seq", m) for arg in args if arg is not Ellipsis for _, m in _models_in(arg)]
    if origin is dict and len(args) == 2:
        return [("map", m) for _, m in _models_in(args[1])]
    return []


@functools.cache
def _fields_of(model: type[BaseModel]) -> dict[str, list[tuple[str, type[BaseModel]]]]:
    """Every key the model accepts (names and aliases) -> the models nested under it. Worked
    out once per model: every command a runner parses walks the same tree."""
    found: dict[str, list[tuple[str, type[BaseModel]]]] = {}
    for name, field in model.model_fields.items():
        nested = _models_in(field.annotation)
        found[name] = nested
        if field.alias:
            found[field.alias] = nested
    return found


def unknown_fields(model: type[BaseModel], data: Any, path: str = "") -> list[str]:
    """Dotted paths of keys in ``data`` that ``model`` (or a nested model) does not define."""
    if _all_known(model, data):
        return []  # the common case, checked without naming every place on the way
    return _named(model, data, path)


def _all_known(model: type[BaseModel], data: Any) -> bool:
    """Whether ``unknown_fields`` finds nothing: the same walk, without the paths."""
    if not isinstance(data, dict):
        return True
    known = _fields_of(model)
    for key, value in data.items():
        if key not in known:
            return False
        for shape, nested in known[key]:
            if shape == "one":
                items = [value]
            elif shape == "seq" and isinstance(value, list | tuple):
                items = list(value)
            elif shape == "map" and isinstance(value, dict):
                items = list(value.values())
            else:
                continue
            if not all(_all_known(nested, item) for item in items):
                return False
    return True


def _named(model: type[BaseModel], data: Any, path: str) -> list[str]:
    if not isinstance(data, dict):
        return []
    found: list[str] = []
    known = _fields_of(model)
    for key, value in data.items():
        where = f"{path}.{key}" if path else str(key)
        if key not in known:
            found.append(where)
            continue
        for shape, nested in known[key]:
            if shape == "one":
                found += _named(nested, value, where)
            elif shape == "seq" and isinstance(value, list | tuple):
                for i, item in enumerate(value):
                    found += _named(nested, item, f"{where}[{i}]")
            elif shape == "map" and isinstance(value, dict):
                for k, item in value.items():
                    found += _named(nested, item, f"{where}.{k}")
    return found
