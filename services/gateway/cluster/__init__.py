"""The cluster feature: the operator's picture of nodes, devices, holdings and waiting sessions."""
