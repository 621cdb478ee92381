"""Models built from values that are valid already, without validating them again.

A decision pass builds several models per session from values it computed out of validated
ones: sums of resource slots, the envelope of an event it just decided, a node's allocation
from the event's own fields. Validating those again proves nothing new, and pydantic's own
``model_construct`` (which also resolves aliases, defaults and factories, field by field, in
Python) costs about twice a full validation. ``trusted`` does the one thing such a caller
needs: the instance ``model_construct`` would give for every field passed by name, at a
quarter of its cost. Anything else (a field left out, a name that is not a field, a model
with private attributes or a post-init hook) goes to ``model_construct`` itself.
"""

from __future__ import annotations

import functools
from typing import Any, TypeVar

from pydantic import BaseModel

M = TypeVar("M", bound=BaseModel)

_set = object.__setattr__
_new = object.__new__  # pydantic's models keep object's (looked up on the class, it costs more)


@functools.cache
def _plain_fields(cls: type[BaseModel]) -> frozenset[str] | None:
    """The field names of a model that ``trusted`` can build directly, or None."""
    if cls.__pydantic_root_model__ or cls.__pydantic_post_init__ or cls.__private_attributes__:
        return None
    if cls.model_config.get("extra") == "allow":
        return None
    return frozenset(cls.__pydantic_fields__)


def trusted(cls: type[M], values: dict[str, Any]) -> M:
    """``cls`` holding ``values`` (valid already, every field by name), not validated. The
    dict becomes the instance's own: the caller hands it over."""
    fields = _plain_fields(cls)
    if fields is None or values.keys() != fields:
        return cls.model_construct(**values)
    model = _new(cls)
    _set(model, "__dict__", values)
    _set(model, "__pydantic_fields_set__", set(fields))
    _set(model, "__pydantic_extra__", None)
    _set(model, "__pydantic_private__", None)
    return model
