"""The GraphQL admin surface: tenancy administration and quota visibility."""
