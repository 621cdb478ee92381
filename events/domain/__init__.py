"""Every domain event of Jetyard, by aggregate. Importing this package fills the catalogue."""

from events.domain import agent, node, quota, session, tenancy

__all__ = ["agent", "node", "quota", "session", "tenancy"]
