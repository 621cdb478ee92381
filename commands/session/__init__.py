"""The ``session`` aggregate (``ev.session.<id>``), decided by the scheduler: what it decides
(``aggregate``), its attributes and queries (``state``), how each event evolves it
(``events``), and its transition table, errors and value types (``rules``)."""
