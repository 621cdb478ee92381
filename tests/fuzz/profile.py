"""The fuzz suite's hypothesis settings: property-based tests against the real system (hostile
GraphQL inputs, HTTP bodies and events). CI runs a short, fixed form: ``JETYARD_FUZZ_EXAMPLES``
examples (default 25), the same ones every run. Search longer and wider with, e.g.,
``JETYARD_FUZZ_EXAMPLES=2000 JETYARD_FUZZ_RANDOM=1``.

Use as ``@fuzz_settings`` on a ``@given`` test; the unit suite's property tests keep their own.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

fuzz_settings = settings(
    max_examples=int(os.environ.get("JETYARD_FUZZ_EXAMPLES", "25")),
    derandomize=os.environ.get("JETYARD_FUZZ_RANDOM", "") == "",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    database=None,
)
