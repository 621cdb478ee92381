"""Domain errors: a command broke a rule. Handlers turn them into rejected outcomes."""

from __future__ import annotations

from enum import StrEnum


class DomainError(Exception):
    """A rule refused the command. Nothing was decided, so no event is pending."""


class IllegalTransition(DomainError):
    """A status change the transition table does not allow."""

    def __init__(self, what: str, current: StrEnum | str, target: StrEnum | str) -> None:
        self.what = what
        self.current = current
        self.target = target
        super().__init__(f"{what} cannot go from {current} to {target}")
