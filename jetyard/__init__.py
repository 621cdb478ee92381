"""Jetyard's client side and composition root: the Python SDK (``jetyard.sdk``), the
``jetyard`` command line (``jetyard.cli``), the runtime that runs a stack (``jetyard.runtime``:
``jetyard up``, ``jetyard serve``), and the registry of running stacks they share
(``jetyard.stacks``). docs/architecture.md says what each may import."""
