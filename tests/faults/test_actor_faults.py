"""Actor failures on real actor processes: a killed actor stops the run within seconds with a
checkpoint of the learner and one line naming the actor, the signal and its log; an actor
that raises leaves its traceback in its log; restarts are logged, summarised and bounded."""

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from rlf.unrollers import ActorError
from rlf.unrollers.actor_failures import RestartPolicy
from rlf.utils.errors import UserError
from rlf.utils.tensorboard_reader import read_scalar_tags
from tests.faults._cli import CARTPOLE, REPO, lines, run_cli
from tests.unrollers.test_async_unroller import Deterministic, _unroller

ASYNC = [*CARTPOLE, "--conf_param", "TrainerConfig.async_unroll=True",
         "--conf_param", "TrainerConfig.num_actors=1", "--conf_param", "load.num_envs=4",
         "--conf_param", "TrainerConfig.num_iterations=1000000",
         "--conf_param", "TrainerConfig.checkpoint_interval=1000000",
         "--conf_param", "TrainerConfig.summary_interval=1"]


STEPS = "Metrics/EnvironmentSteps"


def _actors(parent: int):
    """Pids of the actor processes (multiprocessing spawn children) of ``parent``."""
    pids = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            ppid = int((d / "stat").read_text().rsplit(")", 1)[1].split()[1])
            cmdline = (d / "cmdline").read_bytes()
        except (OSError, IndexError, ValueError):
            continue
        if ppid == parent and b"multiprocessing.spawn" in cmdline:
            pids.append(int(d.name))
    return pids


def _wait_for(condition, seconds=120.0, proc=None):
    """Polls ``condition`` until it is truthy; fails at once if ``proc`` has exited."""
    deadline = time.time() + seconds
    while time.time() < deadline:
        value = condition()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the run exited ({proc.returncode}): {proc.stderr.read()}")
        time.sleep(0.2)
    raise AssertionError("timed out")


def _start(root, *params):
    args = [a for p in params for a in ("--conf_param", p)]
    return subprocess.Popen([sys.executable, "-m", "rlf.bin.train", *ASYNC, "--root_dir",
                             str(root), *args], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _kill_actor_mid_run(proc, root, find_actor, timeout):
    """Waits for the actor and some iterations, kills the actor (SIGKILL) and waits for the
    run to end.

    Returns:
        ``(actor pid, stderr, seconds from the kill to the end)``.
    """
    try:
        actor = _wait_for(find_actor, 180, proc)
        # Some iterations done (their summaries written), however slow the machine is.
        _wait_for(lambda: read_scalar_tags(root / "train", [STEPS])[STEPS][0], 180, proc)
        time.sleep(1)
        os.kill(actor, signal.SIGKILL)
        t0 = time.time()
        _, err = proc.communicate(timeout=timeout)
        return actor, err, time.time() - t0
    finally:
        proc.kill()


def _error_lines(err):
    return [line for line in lines(err) if line.startswith("error:")]


def test_a_killed_actor_stops_the_run_with_a_checkpoint_and_one_line(tmp_path):
    proc = _start(tmp_path)
    actor, err, seconds = _kill_actor_mid_run(
        proc, tmp_path, lambda: (_actors(proc.pid) or [None])[0], timeout=60)
    assert seconds < 15
    assert proc.returncode == 1, err
    assert "Traceback" not in err and _error_lines(err) == lines(err)[-1:], err
    line = lines(err)[-1]
    log = tmp_path / "actors" / "actor-0.log"
    assert line.startswith(f"error: actor 0 failed: its process (pid {actor}) was killed by "
                           f"signal SIGKILL (its output and traceback: {log})"), line
    ckpts = list((tmp_path / "ckpt").glob("ckpt-*.pt"))
    assert len(ckpts) == 1 and f"checkpoint written: {ckpts[0]}" in line, err
    state = torch.load(ckpts[0], weights_only=True)
    assert state["trainer"]["iter_num"] == int(ckpts[0].stem.split("-")[1]) > 0
    assert state["algorithm"]["_extra_state"]["train_iter_num"] == state["trainer"]["iter_num"]
    assert "killed by signal SIGKILL" in log.read_text()
    assert not _actors(proc.pid)


def _restart_counts(root):
    """The ``async_unroll/actor_restarts`` values written so far."""
    counts = []
    for f in sorted((root / "train").glob("events.out.tfevents.*")):
        acc = EventAccumulator(str(f), size_guidance={"scalars": 0})
        acc.Reload()
        if "async_unroll/actor_restarts" in acc.Tags()["scalars"]:
            counts += [e.value for e in acc.Scalars("async_unroll/actor_restarts")]
    return counts


def test_restarts_are_logged_summarised_and_bounded(tmp_path):
    proc = _start(tmp_path, "TrainerConfig.restart_failed_actors=True",
                  "TrainerConfig.max_actor_restarts=1", "TrainerConfig.summaries_flush_secs=1")
    log = tmp_path / "actors" / "actor-0.log"
    try:
        first = _wait_for(lambda: _actors(proc.pid), proc=proc)[0]
        _wait_for(lambda: 0.0 in _restart_counts(tmp_path), proc=proc)  # unrolls arrive
        os.kill(first, signal.SIGKILL)
        second = _wait_for(lambda: [p for p in _actors(proc.pid) if p != first], proc=proc)[0]
        _wait_for(lambda: 1.0 in _restart_counts(tmp_path), proc=proc)  # and again
        os.kill(second, signal.SIGKILL)
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 1, err
    restart_lines = [line for line in lines(err) if "restarting it" in line]
    assert len(restart_lines) == 1 and "restart 1;" in restart_lines[0], err
    assert f"(pid {first}) was killed by signal SIGKILL" in restart_lines[0]
    line = lines(err)[-1]
    assert line.startswith(f"error: actor 0 failed: its process (pid {second}) was killed"), line
    assert "not restarted: 1 restarts within the last 600 s reached max_actor_restarts=1" in line
    assert "checkpoint written" in line and list((tmp_path / "ckpt").glob("ckpt-*.pt"))
    text = log.read_text()
    assert f"[actor 0 start 2, pid {second}" in text
    assert "restarting it (restart 1;" in text and "not restarted" in text
    counts = _restart_counts(tmp_path)
    assert counts[0] == 0 and counts[-1] == 1 and counts == sorted(counts)


def test_an_actor_that_raises_leaves_its_traceback_in_its_log(tmp_path):
    unroller = _unroller(Deterministic(), actor_kw={"fail_after": 10}, log_dir=str(tmp_path))
    with pytest.raises(ActorError) as info:
        for _ in range(10):
            unroller.unroll(6)
    message = str(info.value)
    assert "\n" not in message
    assert message.startswith("actor ") and "failed: raised RuntimeError: boom in rollout_step" \
        in message and str(tmp_path / "actor-") in message
    index = message.split()[1]
    text = (tmp_path / f"actor-{index}.log").read_text()
    assert "Traceback (most recent call last)" in text and 'raise self._error("boom' in text


_FAIL_IN_EVERY_UNROLL = """
from rlf.unrollers import ActorError
from tests.unrollers.test_async_unroller import Deterministic, _unroller
unroller = _unroller(Deterministic(), actor_kw={"fail_after": 3}, restart_failed_actors=True,
                     max_restarts=3, log_dir=%r)
try:
    for _ in range(10):
        unroller.unroll(6)
except ActorError as e:
    print(e)
"""


def test_an_actor_failing_in_every_unroll_is_restarted_up_to_the_limit(tmp_path):
    """Each restart terminates the failed actor while it waits to be stopped: that must leave
    no shared lock held (the stop flag, the message queue), or the next restart or the final
    ``close`` waits for ever. A subprocess, so that a hang fails the test."""
    run = subprocess.run([sys.executable, "-c", _FAIL_IN_EVERY_UNROLL % str(tmp_path)],
                         cwd=REPO, capture_output=True, text=True, timeout=240)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("actor ") and "failed: raised RuntimeError: boom in " \
        "rollout_step" in run.stdout and "3 restarts within the last 600 s reached " \
        "max_actor_restarts=3" in run.stdout, (run.stdout, run.stderr)
    logs = "".join(p.read_text() for p in tmp_path.glob("actor-*.log"))
    assert logs.count("restarting it (restart") == 3


def test_an_actor_that_meets_bad_input_is_not_restarted(tmp_path):
    """A UserError in an actor (a NaN reward, a bad setting) would meet the same input after
    a restart: the run stops at once, without suggesting restarts."""
    unroller = _unroller(Deterministic(), actor_kw={"fail_after": 3, "error": UserError},
                         restart_failed_actors=True, max_restarts=5, log_dir=str(tmp_path))
    with pytest.raises(ActorError) as info:
        for _ in range(10):
            unroller.unroll(6)
    message = str(info.value)
    assert info.value.caused_by_input and "\n" not in message
    assert re.fullmatch(r"actor \d failed: boom in rollout_step \(its output and traceback: "
                        r".*actor-\d\.log\)", message), message
    assert "restart" not in "".join(p.read_text() for p in tmp_path.glob("actor-*.log"))
    with pytest.raises(ActorError) as info:
        RestartPolicy(False).restart_or_raise(0, "bad", None, lambda: None, caused_by_input=True)
    assert str(info.value) == "actor 0 failed: bad" and info.value.caused_by_input


def test_bad_input_in_an_actor_exits_2_with_one_line(tmp_path):
    """A NaN reward met by an actor process is the same mistake as without actors: one line
    naming the environment, and exit status 2."""
    conf = tmp_path / "nan.gin"
    conf.write_text(f'import tests.faults._nan_env\ninclude "{REPO}/confs/impala_cartpole.gin"\n'
                    'load.env_name = "NanRewardCartPole-v0"\n')
    args = [a if a != "confs/impala_cartpole.gin" else str(conf) for a in ASYNC]
    run = run_cli("train", *args, "--root_dir", str(tmp_path / "run"),
                  "--conf_param", "TrainerConfig.restart_failed_actors=True")
    assert run.returncode == 2, run.stderr
    err = lines(run.stderr)
    assert len(err) == 1 and err[0].startswith("error: actor 0 failed: environment "
                                               "NanRewardCartPole-v0 returned the reward nan")
    assert "restart" not in err[0], err
    # It failed in the first iteration: no checkpoint of the untrained learner.
    assert err[0].endswith("training stopped; no checkpoint was written yet"), err
    assert not list((tmp_path / "run" / "ckpt").glob("ckpt-*"))


def test_restart_policy_counts_within_its_window():
    now = [0.0]
    policy = RestartPolicy(True, max_restarts=2, window_seconds=600, clock=lambda: now[0])
    closed = []
    for t in (0.0, 100.0, 601.0):  # the first restart has left the window by 601 s
        now[0] = t
        policy.restart_or_raise(0, "died", None, lambda: closed.append(1))
    now[0] = 650.0
    with pytest.raises(ActorError, match="2 restarts within the last 600 s reached "
                                         "max_actor_restarts=2"):
        policy.restart_or_raise(1, "died", None, lambda: closed.append(1))
    assert policy.total == 3 and closed == [1]
    with pytest.raises(ActorError, match="restart_failed_actors = True"):
        RestartPolicy(False).restart_or_raise(0, "died", None, lambda: None)


@pytest.mark.one_worker  # starts Ray; looks for its actor among all processes
def test_a_killed_ray_actor_stops_the_run_with_a_checkpoint(tmp_path):
    pytest.importorskip("ray")
    proc = _start(tmp_path, "TrainerConfig.use_ray=True")

    def ray_actor():
        for d in Path("/proc").iterdir():
            try:
                if d.name.isdigit() and (d / "cmdline").read_bytes().startswith(
                        b"ray::_RayActor"):
                    return int(d.name)
            except OSError:
                pass
        return None

    _, err, seconds = _kill_actor_mid_run(proc, tmp_path, ray_actor, timeout=120)
    assert seconds < 60
    assert proc.returncode == 1, err
    line = _error_lines(err)[-1]
    assert line == lines(err)[-1] and "Traceback" not in err
    assert line.startswith("error: Ray actor 0 failed: ActorDiedError: The actor died "
                           "unexpectedly") and "checkpoint written" in line, line
    assert f"(its output and traceback: {tmp_path / 'actors' / 'actor-0.log'})" in line
    assert list((tmp_path / "ckpt").glob("ckpt-*.pt"))
    assert ray_actor() is None  # no Ray actor outlives the run
