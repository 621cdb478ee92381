"""The usage feature: resources x time reports, as the ``usage`` query and ``GET /usage.csv``."""
