"""Value objects shared by every layer: ids, subjects, resources, statuses, principals, settings."""
