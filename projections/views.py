"""Every view this code keeps, in one place: the projector, a rebuild and the queries use it."""

from __future__ import annotations

from projections import agents, nodes
from projections.base import View
from projections.endpoints import view as endpoints
from projections.folders import view as vfolders
from projections.sessions import view as sessions
from projections.usage import view as usage

VIEWS: tuple[View, ...] = (
    sessions.VIEW, nodes.VIEW, agents.VIEW, vfolders.VIEW, usage.VIEW, endpoints.VIEW,
)  # fmt: skip
