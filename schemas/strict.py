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
    """Dotted paths of keys in ``data`` that ``model`` (or a nested model) does not define.
    Clean input (the common case) is walked once without naming the places on the way; only
    input with an unknown key is walked again to name every one."""
    if not _walk(model, data, None):
        return []
    return _walk(model, data, path)


def _walk(model: type[BaseModel], data: Any, path: str | None) -> list[str]:
    """``unknown_fields``'s walk. With ``path`` None nothing is named: it stops at the first
    unknown key, found as ``[""]``."""
    if not isinstance(data, dict):
        return []
    found: list[str] = []
    known = _fields_of(model)
    for key, value in data.items():
        where = None if path is None else f"{path}.{key}" if path else str(key)
        if key not in known:
            if where is None:
                return [""]
            found.append(where)
            continue
        for shape, nested in known[key]:
            if shape == "one":
                items = [(value, where)]
            elif shape == "seq" and isinstance(value, list | tuple):
                items = [
                    (v, None if where is None else f"{where}[{i}]") for i, v in enumerate(value)
                ]
            elif shape == "map" and isinstance(value, dict):
                items = [(v, None if where is None else f"{where}.{k}") for k, v in value.items()]
            else:
                continue
            for item, at in items:
                found += _walk(nested, item, at)
                if found and where is None:
                    return found
    return found
