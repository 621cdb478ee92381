"""Every view this code keeps, in one place: the projector, a rebuild and the queries use it."""

from __future__ import annotations

from projections import agents, nodes, sessions, usage, vfolders
from projections.base import View

VIEWS: tuple[View, ...] = (sessions.VIEW, nodes.VIEW, agents.VIEW, vfolders.VIEW, usage.VIEW)
