"""Property-based (hypothesis) tests against the real system: hostile GraphQL inputs, HTTP
bodies and events. CI runs a short, fixed form (``JETYARD_FUZZ_EXAMPLES``, default 25, the
same examples every run); set it higher to search longer, e.g. ``JETYARD_FUZZ_EXAMPLES=2000``.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile(
    "jetyard-fuzz",
    max_examples=int(os.environ.get("JETYARD_FUZZ_EXAMPLES", "25")),
    derandomize=os.environ.get("JETYARD_FUZZ_RANDOM", "") == "",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
settings.load_profile("jetyard-fuzz")
