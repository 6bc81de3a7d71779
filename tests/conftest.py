"""The test session ends with the tests' exit status: once pytest is done, the process exits
without Python's finalization, where the destructors of native objects left to the garbage
collector (ALE's vector environments, Ray's core worker, torch's thread pools) run in an order
none of them controls; a full run once segfaulted there after every test had passed."""

import os
import sys

import pytest

_status = {}


def pytest_sessionfinish(session, exitstatus):
    """Keeps the session's exit status for ``pytest_unconfigure``."""
    _status["code"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config):
    """Exits with the tests' status after every other plugin has finished (the terminal
    summary is written by then)."""
    if "code" in _status:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_status["code"])
