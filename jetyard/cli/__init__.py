"""The ``jetyard`` command line, one module per command group (``main`` holds the parser and
``main``; ``python -m jetyard.cli`` runs it). Users' commands go through the SDK
(``jetyard.sdk``); operators' act on NATS or run the stack (``jetyard.runtime``)."""
