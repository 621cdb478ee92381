"""Deciders for the operator's corrections of a quarantined aggregate (``cmd.correction.*``
into ``ev.correction.<id>``). Only a cluster administrator corrects: a correction changes
what every consumer folds."""

from __future__ import annotations

from datetime import datetime

from commands.admin import corrections as c
from commands.correction import Correction, correction_id_for
from commands.directory import Directory
from commands.unit_of_work import working_copy
from services.tenancy.common import Change, Decision, Who, cluster_admin, said


def skip_quarantined_event(
    cmd: c.SkipQuarantinedEvent, d: Directory, who: Who, now: datetime
) -> Decision:
    if refused := cluster_admin(who, "skip quarantined events"):
        return refused
    known = working_copy(d.corrections.get(correction_id_for(cmd.target)))
    what = f"event {cmd.seq} of {cmd.target}"
    if known is None:
        return Change((Correction.skip(cmd.target, cmd.seq, cmd.reason, now),), f"{what} skipped")
    changed = known.skip_more(cmd.seq, cmd.reason, now)
    return Change((known,), f"{what} " + said(changed, "skipped", "was skipped already"))


def void_aggregate(cmd: c.VoidAggregate, d: Directory, who: Who, now: datetime) -> Decision:
    if refused := cluster_admin(who, "void aggregates"):
        return refused
    known = working_copy(d.corrections.get(correction_id_for(cmd.target)))
    if known is None:
        return Change((Correction.void(cmd.target, cmd.reason, now),), f"{cmd.target} voided")
    changed = known.void_too(cmd.reason, now)
    return Change((known,), f"{cmd.target} " + said(changed, "voided", "was voided already"))
