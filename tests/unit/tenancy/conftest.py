"""Each tenancy decider test gets an organisation of its own (see ``support.Org``)."""

from __future__ import annotations

import pytest

from tests.unit.tenancy.support import Org, organisation


@pytest.fixture
async def org() -> Org:
    return await organisation()
