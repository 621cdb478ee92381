"""Every domain event of Jetyard, by aggregate. Importing this package fills the catalogue."""

from events.domain import agent, node, session

__all__ = ["agent", "node", "session"]
