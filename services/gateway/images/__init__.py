"""Images and registries: the gateway's feature package (rescan, registry admin)."""
