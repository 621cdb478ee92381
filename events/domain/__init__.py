"""Every domain event of Jetyard, by aggregate. Importing this package fills the catalogue."""

from events.domain import agent, correction, node, quota, session, tenancy, vfolder

__all__ = ["agent", "correction", "node", "quota", "session", "tenancy", "vfolder"]
