"""The log's invariants, replayed: what the system promises (no device or slot allocated twice,
no quota exceeded, only legal status transitions, one decision per cause, every ended
session's resources given back), checked over the whole log, each violation with its
position. ``check`` folds decoded events; ``replay_log`` reads ``JY_EVENTS`` into it."""

from events.audit.invariants.check import Checker, check
from events.audit.invariants.placements import ENDED
from events.audit.invariants.replay import replay_log
from events.audit.invariants.report import InvariantReport, Violation

__all__ = ["ENDED", "Checker", "InvariantReport", "Violation", "check", "replay_log"]
