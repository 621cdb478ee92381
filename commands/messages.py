"""Command models (imperative names), each published on ``cmd.<aggregate>.<verb>``, and the
registry a runner uses to parse what arrives there."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from events.envelope import Cause
from schemas.bounds import CEILING, CEILINGS, BoundsError, control_character_in_text
from schemas.ids import TOKEN_PATTERN, Token, derived_id, new_id
from schemas.principal import Actor, Tenant
from schemas.session import SessionSpec, check_request
from schemas.strict import unknown_fields
from schemas.subjects import COMMANDS_PREFIX, AggregateType, command_subject
from schemas.tenancy import SessionOwner

COMMAND_NAME_HEADER = "Jy-Command"


class UnknownCommandError(LookupError):
    """Nothing is registered for a command subject."""


class Command(BaseModel):
    """Base of every command: frozen, and unknown fields anywhere in the input are an error
    (typos fail at the edge).

    ``actor`` and ``tenant`` are the principal the gateway authenticated, never one the client
    claims. ``command_id`` is the idempotency key: it is the ``Nats-Msg-Id`` of the message and
    the subject token of its outcome, and ids created by the command derive from it.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    aggregate_type: ClassVar[AggregateType]
    verb: ClassVar[str]

    command_id: Token = Field(default_factory=new_id)
    actor: Actor
    tenant: Tenant
    correlation_id: Token | None = None
    """The conversation this command belongs to (e.g. an event that made a service send it);
    None starts a new one, named by the command id."""

    @model_validator(mode="before")
    @classmethod
    def _bounded_values(cls, data: Any) -> Any:
        # Whatever sent it, no command carries a control character (other than a tab or a
        # newline, which descriptions and scripts may hold), a NaN or infinity, or an integer
        # past the ceiling that keeps every stored value inside a signed 64-bit column.
        problem = out_of_bounds(data)
        if problem is not None:
            raise PydanticCustomError("out_of_bounds", "{why}", {"why": problem})
        return data

    @model_validator(mode="before")
    @classmethod
    def _no_unknown_fields(cls, data: Any) -> Any:
        # Embedded value objects (SessionSpec, ResourceSlots...) ignore unknown fields so old
        # code reads new events; input must not (a typo like `gpus` would ask for nothing).
        unknown = unknown_fields(cls, data)
        if unknown:
            plural = "s" if len(unknown) > 1 else ""
            names = ", ".join(f"'{name}'" for name in unknown)
            # Names go in the context, not the template: a key may contain braces.
            context = {"plural": plural, "names": names}
            raise PydanticCustomError("extra_forbidden", "unknown field{plural} {names}", context)
        return data

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        _register(cls)

    @classmethod
    def subject(cls) -> str:
        return command_subject(cls.aggregate_type, cls.verb)

    @classmethod
    def command_name(cls) -> str:
        return cls.__name__

    def cause(self) -> Cause:
        """What the events decided from this command carry (event ids derive from it)."""
        return Cause(
            causation_id=self.command_id,
            correlation_id=self.correlation_id or self.command_id,
            actor=self.actor,
            tenant=self.tenant,
        )


REGISTRY: dict[tuple[AggregateType, str], type[Command]] = {}


def _register(cls: type[Command]) -> None:
    if "verb" not in cls.__dict__ or "aggregate_type" not in cls.__dict__:
        return  # an intermediate base class, not a command one can send
    key = (cls.aggregate_type, cls.verb)
    known = REGISTRY.get(key)
    if known is not None and _where(known) != _where(cls):
        raise ValueError(f"{cls.subject()} is already the subject of {known.__name__}")
    REGISTRY[key] = cls


def _where(cls: type[Command]) -> tuple[str, str]:
    # A module reloaded (tests, notebooks) defines the same class again: not a clash.
    return cls.__module__, cls.__qualname__


def command_class(subject: str) -> type[Command]:
    """The command class for ``cmd.<aggregate>.<verb>``."""
    parts = subject.split(".")
    try:
        if len(parts) != 3 or parts[0] != COMMANDS_PREFIX:
            raise ValueError
        return REGISTRY[(AggregateType(parts[1]), parts[2])]
    except (ValueError, KeyError):
        raise UnknownCommandError(f"no command is known on subject {subject!r}") from None


def parse_command(subject: str, data: bytes) -> Command:
    """Parse a command message; raises UnknownCommandError or pydantic's ValidationError."""
    return command_class(subject).model_validate_json(data)


def out_of_bounds(data: Any, where: str = "", depth: int = 0) -> str | None:
    """The first value in raw command input that no command may carry, said in a sentence.
    Clean input (the common case) is walked once without naming the places on the way; only
    input with a problem is walked again to name it."""
    if _walk(data, None, depth) is None:
        return None
    return _walk(data, where, depth)


def _walk(data: Any, where: str | None, depth: int) -> str | None:
    """``out_of_bounds``'s rules. With ``where`` None nothing is named: a problem is ``""``."""
    problem: str | None = None
    if depth > 32:
        problem = "is nested too deep"
        where = None if where is None else where or "the command"
    elif isinstance(data, str):
        bad = control_character_in_text(data)
        if bad is not None:
            problem = f"contains a control character ({bad})"
            where = None if where is None else where or "a value"
    elif isinstance(data, bool):
        return None
    elif isinstance(data, int):
        if abs(data) >= CEILING:
            problem = f"is out of range: {str(data)[:24]}..."
            where = None if where is None else where or "a number"
    elif isinstance(data, float):
        if data != data or abs(data) >= CEILING:  # NaN, infinities, past the ceiling
            problem = "is not a finite number in range"
            where = None if where is None else where or "a number"
    elif type(data) is dict or isinstance(data, Mapping):  # the ABC's check costs more
        for key, value in data.items():
            key_at = None if where is None else f"a key of {where or 'the command'}"
            found = _walk(key, key_at, depth + 1)
            if found is None:
                name = None if where is None else f"{where}.{key}" if where else str(key)
                found = _walk(value, name, depth + 1)
            if found is not None:
                return found
    elif isinstance(data, list | tuple):
        for index, value in enumerate(data):
            found = _walk(value, None if where is None else f"{where}[{index}]", depth + 1)
            if found is not None:
                return found
    if problem is None:
        return None
    return "" if where is None else f"{where} {problem}"


def explain(exc: UnknownCommandError | ValidationError) -> str:
    """Why a command does not parse, in one sentence naming each wrong field."""
    if isinstance(exc, UnknownCommandError):
        return str(exc)
    problems = []
    for error in exc.errors():
        where = ".".join(str(part) for part in error["loc"])
        msg = _in_words(error)
        problems.append(f"field '{where}': {msg[:1].lower()}{msg[1:]}" if where else msg)
    return f"{exc.title} is not valid: " + "; ".join(problems)


_PATTERNS_IN_WORDS = {
    r"^[A-Za-z0-9][A-Za-z0-9._/:@-]*$": (
        "letters A-Z or a-z and digits 0-9 first, then also '.', '_', '/', ':', '@' or '-'"
    ),
    r"^[A-Za-z0-9_-]{1,64}$": "1 to 64 of the letters A-Z, a-z, digits 0-9, '_' or '-'",
    r"^[A-Za-z0-9_.-]+$": "the letters A-Z, a-z, digits 0-9, '.', '_' or '-'",
    r"^[0-9a-f]{64}$": "64 hexadecimal digits 0-9, a-f",
}


def _in_words(error: Any) -> str:
    """Pydantic's message, with a regular expression said as the characters it allows."""
    if error.get("type") == "string_pattern_mismatch":
        pattern = (error.get("ctx") or {}).get("pattern", "")
        allowed = _PATTERNS_IN_WORDS.get(pattern)
        if allowed is not None:
            return f"use only {allowed}"
    return str(error["msg"])


def command_id_of(data: bytes, headers: Mapping[str, str] | None) -> str:
    """A command's id even when it does not parse: the body's, else ``Nats-Msg-Id``, else one
    derived from the bytes, so an answer can always be written under it and found again."""
    with contextlib.suppress(ValueError, AttributeError):
        value = json.loads(data).get("command_id")
        if isinstance(value, str) and TOKEN_PATTERN.match(value):
            return value
    value = (headers or {}).get("Nats-Msg-Id", "")
    if TOKEN_PATTERN.match(value):
        return value
    return derived_id("unreadable-command", data.hex())


# ---- session ------------------------------------------------------------------------------


class CreateSession(Command):
    """Ask for a compute session. Its id is ``session_id_for(command_id)``, so a re-sent
    command maps to the same session."""

    aggregate_type = AggregateType.SESSION
    verb = "create"

    spec: SessionSpec
    owner: SessionOwner | None = None
    """Whose it is, resolved by the gateway from the authenticated principal. The scheduler
    refuses a create without one."""

    @model_validator(mode="after")
    def _bounded(self) -> CreateSession:
        # The minimums, control characters and hard ceilings hold for every writer, not
        # only the gateway: a create sent straight to JY_COMMANDS is refused the same way.
        # (The configured maximums are the scheduler's create rule's.)
        try:
            check_request(self.spec, CEILINGS)
        except BoundsError as exc:
            raise PydanticCustomError("out_of_bounds", "{why}", {"why": str(exc)}) from None
        return self


class TerminateSession(Command):
    aggregate_type = AggregateType.SESSION
    verb = "terminate"

    session_id: Token
    reason: str = Field(default="user request", min_length=1, max_length=512)
