"""The virtual folders feature: folder queries and mutations, sharing, and data-plane tokens."""
