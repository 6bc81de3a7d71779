"""The test session: which tests are ``slow``, and its exit status.

``slow`` tests (``pytest -m "not slow"`` leaves them out) are those of ``SLOW_FILES`` (they
start processes, learners, Ray or whole runs) and those marked ``@pytest.mark.slow`` one by
one. The tests that start Ray or several learners (those of ``ONE_WORKER_FILES`` and those marked
``@pytest.mark.one_worker``) run on one pytest-xdist worker.

The session ends with the tests' exit status: once pytest is done, the process exits
without Python's finalization, where the destructors of native objects left to the garbage
collector (ALE's vector environments, Ray's core worker, torch's thread pools) run in an order
none of them controls; a full run once segfaulted there after every test had passed."""

import os
import sys
from pathlib import Path

import pytest

#: Test files whose tests start processes, learners, Ray or whole runs (relative to tests/).
SLOW_FILES = {
    "experiments/test_tune.py", "experiments/test_cluster.py", "test_suite.py",
    "test_aggregates.py", "test_compare_runs.py", "test_device_checks.py", "test_confs.py",
    "test_minimal_dqn_example.py", "test_docs_site.py", "matrix/test_matrix.py",
    "faults/test_cli_errors.py", "faults/test_checkpoint_faults.py",
    "faults/test_actor_faults.py", "faults/test_offline_faults.py",
    "faults/test_missing_extras.py", "faults/test_summary_faults.py",
    "trainers/test_learners.py", "trainers/test_trainer.py", "trainers/test_tracker.py",
    "unrollers/test_fixed_lag.py", "unrollers/test_ray_cluster.py",
    "unrollers/test_ray_unroller.py", "unrollers/test_async_unroller.py",
    "unrollers/test_actor_counters.py", "runtime/test_process.py", "runtime/test_malloc.py",
    "api/test_train.py", "api/test_export.py",
}
#: Test files whose tests start Ray (in the test or in a tool they run) or several learners:
#: with pytest-xdist (``-n 2 --dist loadgroup``, the README's command) they run one after
#: another on one worker, as without it, so that no two Ray instances or clusters meet
#: (``ray.init()`` without an address joins a running one), and no two launches of learners
#: pick their free ports at the same time. A file with a few such tests marks them
#: ``@pytest.mark.one_worker`` instead, and its other tests run on either worker.
ONE_WORKER_FILES = {
    "experiments/test_tune.py", "experiments/test_cluster.py", "experiments/test_space.py",
    "matrix/test_matrix.py", "faults/test_missing_extras.py",
    "unrollers/test_fixed_lag.py",
    "unrollers/test_ray_cluster.py", "unrollers/test_ray_unroller.py",
    "unrollers/test_actor_counters.py", "trainers/test_learners.py",
}
_TESTS = Path(__file__).resolve().parent

_status = {}


@pytest.fixture(autouse=True)
def _each_test_sees_first_deprecation_warnings():
    """Each test starts with rlf's warn-once record empty: a deprecated name a test uses
    warns there whichever test ran before it, so pytest.ini's ``error`` filter fails a test
    that uses one without ``pytest.warns``."""
    from rlf.utils import deprecation
    deprecation._warned.clear()
    yield


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups into the test ids
def pytest_collection_modifyitems(config, items):
    """Marks the tests of ``SLOW_FILES`` ``slow``; puts each file's tests in an
    ``xdist_group`` of their own, and those of ``ONE_WORKER_FILES`` and those marked
    ``one_worker`` in one."""
    for item in items:
        path = Path(str(item.fspath)).resolve()
        name = path.relative_to(_TESTS).as_posix() if path.is_relative_to(_TESTS) else ""
        if name in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
        # A file's tests stay together (a module fixture is made once), and the files of
        # ONE_WORKER_FILES and the tests marked one_worker together.
        one = name in ONE_WORKER_FILES or item.get_closest_marker("one_worker") is not None
        item.add_marker(pytest.mark.xdist_group("one_worker" if one else name or path.name))


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
