"""placeholder: filled by the domain-events work."""
