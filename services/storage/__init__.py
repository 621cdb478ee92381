"""Storage: virtual folders, transfers, quotas, backends."""
