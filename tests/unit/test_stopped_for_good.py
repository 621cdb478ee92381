"""The exit status that tells ``jetyard up`` not to start a service again is one no other
failure of a service exits with: uvicorn exits ``STARTUP_FAILURE`` when its server cannot
start (a port taken), which a restart may well change."""

from __future__ import annotations

from uvicorn.config import STARTUP_FAILURE

from jetyard.runtime.serve import STOPPED_FOR_GOOD


def test_stopped_for_good_is_not_an_exit_status_of_other_failures() -> None:
    assert STOPPED_FOR_GOOD not in (0, 1, 2, STARTUP_FAILURE)  # clean, error, usage, uvicorn
    assert STOPPED_FOR_GOOD < 128  # not a death by signal as a shell reports it
