"""A resource group's scheduling settings in GraphQL, made from ``GroupScheduling``'s fields:
the arguments of ``createResourceGroup`` and ``modifyResourceGroup``, the fields of
``ResourceGroupInfo``, and the arguments read back into the model. Pure; no subjects.

Spelling: a setting's GraphQL name is its field's name in camelCase, ``_s`` (seconds) spelled
``Seconds`` (``starvation_after_s``: ``starvationAfterSeconds``). A field that is itself a model
(``sandbox``) is not a setting: each of its fields is one, named by its own field's name
(``sandbox.pids_limit``: ``pidsLimit``; ``fair_share.gpu_usage_weight``: ``gpuUsageWeight``).
A float is GraphQL's Float (an Int given for it is taken). An enumeration travels as a
string (its value); a setting that may be unset takes 0 as an argument to unset it (null, or
left out, is "not given": the new group's default, or the group's value on a change). Bounds
are the model's: a value out of them is refused with a sentence naming the argument.
"""

from __future__ import annotations

import inspect
import types
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Annotated, Any, TypeVar, get_args

import strawberry
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from schemas.tenancy import GroupScheduling
from services.gateway.admin_api.inputs import choice
from services.gateway.core.inputs import InputError

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T", bound=type)


@dataclass(frozen=True)
class Setting:
    """One field of ``GroupScheduling`` as GraphQL shows it."""

    name: str
    """The model's field (and the event's key in ``scheduling``), dotted where it is nested
    (``sandbox.pids_limit``)."""
    argument: str
    """The resolver's parameter and type attribute; strawberry camelCases it."""
    graphql: str
    kind: type
    """bool, int, float (GraphQL's Float) or a StrEnum."""
    unsettable: bool
    """None is a value of the setting (e.g. no timeout)."""
    description: str
    field: FieldInfo
    """Its type, default and bounds."""

    @property
    def path(self) -> tuple[str, ...]:
        return tuple(self.name.split("."))

    @property
    def shown(self) -> Any:
        """The GraphQL type of its value: an enumeration is its value, a string."""
        kind = str if issubclass(self.kind, StrEnum) else self.kind
        return kind | None if self.unsettable else kind

    @property
    def choices(self) -> tuple[str, ...]:
        return tuple(m.value for m in self.kind) if issubclass(self.kind, StrEnum) else ()

    def show(self, scheduling: GroupScheduling) -> Any:
        value: Any = scheduling
        for part in self.path:
            value = getattr(value, part)
        return value.value if isinstance(value, StrEnum) else value


def _settings(model: type[BaseModel], within: str = "") -> list[Setting]:
    found = []
    for name, field in model.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel):
            found += _settings(field.annotation, f"{within}{name}.")
        else:
            found.append(_setting(f"{within}{name}", name, field))
    return found


def _setting(dotted: str, name: str, field: FieldInfo) -> Setting:
    kinds = [k for k in get_args(field.annotation) if k is not types.NoneType]
    kind: object = kinds[0] if kinds else field.annotation
    if not isinstance(kind, type) or not (kind in (bool, int, float) or issubclass(kind, StrEnum)):
        # Decimal, lists...: say how GraphQL shows them here first.
        raise TypeError(
            f"GroupScheduling.{dotted}: GraphQL settings are bool, int, float or StrEnum"
        )
    words = name.removesuffix("_s") + "_seconds" if name.endswith("_s") else name
    head, *rest = words.split("_")
    return Setting(
        name=dotted,
        argument=words,
        graphql=head + "".join(w.capitalize() for w in rest),
        kind=kind,
        unsettable=len(kinds) < len(get_args(field.annotation)),
        description=field.description or "",
        field=field,
    )


def _one_name_each(settings: list[Setting]) -> tuple[Setting, ...]:
    counted = Counter(s.graphql for s in settings)
    twice = sorted(name for name, times in counted.items() if times > 1)
    if twice:
        # A nested model's field is named without its model: two of one name would collide.
        raise TypeError(f"GroupScheduling: two settings would be GraphQL's {', '.join(twice)}")
    return tuple(settings)


SETTINGS = _one_name_each(_settings(GroupScheduling))
_BY_NAME = {s.name: s for s in SETTINGS}


def _field_description(setting: Setting) -> str:
    if setting.choices:
        return f"{setting.description}: {' | '.join(setting.choices)}"
    return setting.description


def _argument_description(setting: Setting) -> str:
    unset = "; 0 unsets it" if setting.unsettable else ""
    return f"{_field_description(setting)}{unset}"


# ---- GraphQL arguments and fields ---------------------------------------------------------


def with_setting_arguments(resolver: F) -> F:
    """Give a resolver one optional argument per setting, in place of its ``**settings``."""
    # Strawberry reads a resolver's arguments from its signature (which ``__signature__``
    # replaces) and passes them by keyword: they arrive in ``**settings``.
    signature = inspect.signature(resolver)
    kept = [p for p in signature.parameters.values() if p.kind is not p.VAR_KEYWORD]
    added = [
        inspect.Parameter(
            s.argument,
            inspect.Parameter.KEYWORD_ONLY,
            default=None,
            annotation=Annotated[
                (str if s.choices else s.kind) | None,
                strawberry.argument(description=_argument_description(s)),
            ],
        )
        for s in SETTINGS
    ]
    resolver.__signature__ = signature.replace(parameters=[*kept, *added])  # type: ignore[attr-defined]
    return resolver


def with_setting_fields(cls: T) -> T:
    """Give a GraphQL type one field per setting, read from its private ``scheduling``."""
    for setting in SETTINGS:
        field = strawberry.field(
            resolver=_resolver(setting), description=_field_description(setting)
        )
        setattr(cls, setting.argument, field)
    return cls


def _resolver(setting: Setting) -> Callable[..., Any]:
    def resolve(root: Any) -> Any:
        return setting.show(root.scheduling)

    resolve.__annotations__ = {"return": setting.shown}
    resolve.__name__ = setting.argument
    return resolve


# ---- arguments into the model -------------------------------------------------------------


def group_scheduling(base: GroupScheduling, **given: Any) -> GroupScheduling:
    """``base`` with the settings given by argument (None: keep ``base``'s), each checked by
    the model and a mistake named by its argument."""
    update: dict[str, Any] = {}
    for setting in SETTINGS:
        value = given.get(setting.argument)
        if value is None:
            continue
        if setting.choices:
            value = choice(setting.graphql, str(value), setting.kind)
        elif setting.kind is float:
            value = float(value)
        elif setting.unsettable and setting.kind is int:
            if value < 0:
                raise InputError(f"{setting.graphql} must not be negative, got {value}")
            value = value or None  # 0 unsets it
        update[setting.name] = value
    merged = base.model_dump()
    for name, value in update.items():
        *within, last = name.split(".")
        place = merged
        for part in within:
            place = place[part]
        place[last] = value
    try:
        return GroupScheduling.model_validate(merged)
    except ValidationError as exc:
        raise InputError(_sentence(exc)) from None


def _sentence(exc: ValidationError) -> str:
    error = exc.errors()[0]
    name = ".".join(str(part) for part in error["loc"])
    field = _BY_NAME[name].graphql if name in _BY_NAME else "scheduling"
    got, bounds = error.get("input"), error.get("ctx", {})
    if error["type"] == "greater_than_equal":
        least = bounds["ge"]
        return (
            f"{field} must not be {'negative' if least == 0 else f'less than {least}'}, got {got}"
        )
    if error["type"] == "less_than_equal":
        return f"{field} must be at most {bounds['le']}, got {got}"
    return f"{field}: {error['msg']}, got {got!r}"
