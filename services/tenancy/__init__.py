"""Tenancy: the one writer of domains, projects, users, keypairs, policies, resource groups
and images."""
