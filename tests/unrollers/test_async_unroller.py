"""AsyncUnroller: same experience as SyncUnroller, parameter updates, failures, clean exit."""

import functools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from torch import nn

from rlf.algorithms.training_loop import TrainingLoop
from rlf.algorithms import RLAlgorithm, TrainerConfig
from rlf.data_structures import AlgStep
from rlf.environments import load
from rlf.trainers.actor_setup import ActorSetup
from rlf.unrollers import ActorError, AsyncUnroller, SyncUnroller, Unroller
from rlf.unrollers.actor_unroller import build_actor, copy_parameters

REPO = Path(__file__).resolve().parents[2]
OBS = load("CartPole-v1", 1).observation_spec()
ACT = load("CartPole-v1", 1).action_spec()


class Deterministic(RLAlgorithm):
    """Pushes right iff ``w * pole_angle > 0`` (deterministic, so experience is comparable);
    ``fail_after`` makes rollout_step raise ``error`` ("boom in rollout_step")."""

    def __init__(self, fail_after=None, error=RuntimeError, **kw):
        super().__init__(OBS, ACT, is_on_policy=False, **kw)
        self.w = nn.Parameter(torch.ones(()))
        self._calls, self._fail_after, self._error = 0, fail_after, error

    def rollout_step(self, time_step, state):
        self._calls += 1
        if self._fail_after is not None and self._calls > self._fail_after:
            raise self._error("boom in rollout_step")
        action = (self.w * time_step.observation[:, 2] > 0).long()
        return AlgStep(output=action, state=(), info={"w": self.w.detach().expand(
            action.shape[0]).clone()})


class IndexRecorder(Deterministic):
    """Records which actor acted (``actor_identity``; -1 for the learner's own unroll)."""

    def rollout_step(self, time_step, state):
        step = super().rollout_step(time_step, state)
        index, num_actors = self.actor_identity or (-1, 0)
        return step._replace(info=dict(step.info, actor=torch.full_like(step.output, index),
                                       num_actors=torch.full_like(step.output, num_actors)))


def _unroller(alg, **kw):
    args = dict(algorithm_ctor=functools.partial(Deterministic, **kw.pop("actor_kw", {})),
                env_ctor=functools.partial(load, "CartPole-v1"), num_actors=2,
                num_envs_per_actor=2, unroll_length=6, seed=5, poll_seconds=0.2)
    args.update(kw)
    return AsyncUnroller(alg, **args)


def _alive(procs):
    return [p for p in procs if p.is_alive()]


def test_each_actor_knows_its_index_and_the_number_of_actors():
    alg = IndexRecorder()
    unroller = _unroller(alg, algorithm_ctor=IndexRecorder)
    try:
        info = unroller.unroll(6).rollout_info  # [T, 2 actors x 2 environments]
    finally:
        unroller.close()
    assert info["actor"].tolist() == [[0, 0, 1, 1]] * 6
    assert info["num_actors"].eq(2).all()
    assert alg.actor_identity is None  # the learner


def test_async_experience_equals_sync_up_to_batch_order():
    sync_env = load("CartPole-v1", 4, seed=5)
    alg = Deterministic()
    sync = SyncUnroller(sync_env, alg)
    expected = [sync.unroll(6) for _ in range(3)]
    unroller = _unroller(alg)
    try:
        got = [unroller.unroll(6) for _ in range(3)]
    finally:
        procs = unroller.processes
        unroller.close()
    assert not _alive(procs)
    for e, g in zip(expected, got):
        for name in ("step_type", "reward", "discount", "observation", "env_id"):
            torch.testing.assert_close(getattr(g.time_step, name), getattr(e.time_step, name))
        torch.testing.assert_close(g.action, e.action)
    sync_env.close()


def test_parameter_updates_reach_the_actors():
    alg = Deterministic()
    unroller = _unroller(alg, queue_size=2)
    try:
        assert unroller.unroll(6).rollout_info["w"].eq(1).all()
        with torch.no_grad():
            alg.w.fill_(-3.0)
        unroller.update_parameters()
        seen = []
        deadline = time.time() + 60
        while time.time() < deadline:
            seen.append(unroller.unroll(6).rollout_info["w"])
            if seen[-1].eq(-3).all():
                break
        assert seen[-1].eq(-3).all()
        assert unroller.policy_lag == 0
        # stale: queue_size queued + one blocked in put + one being acted, then fresh ones
        assert len(seen) <= 2 + 2 + 1
    finally:
        unroller.close()


class Noop(RLAlgorithm):
    """Always takes action 0."""

    def __init__(self, observation_spec, action_spec, **kw):
        super().__init__(observation_spec, action_spec, is_on_policy=False, **kw)

    def rollout_step(self, time_step, state):
        return AlgStep(output=torch.zeros(time_step.step_type.shape[0], dtype=torch.int64),
                       state=(), info=())


def _niceness(tid: int) -> int:
    return os.getpriority(os.PRIO_PROCESS, tid)


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux's per-thread nice")
def test_actors_and_their_threads_run_below_the_learner():
    # Atari's environment steps on its own native threads; they must inherit the priority.
    env_ctor = functools.partial(load, "ALE/Pong-v5")
    env = env_ctor(num_envs=1)
    ctor = functools.partial(Noop, env.observation_spec(), env.action_spec())
    env.close()
    learner = _niceness(0)
    unroller = AsyncUnroller(ctor(), ctor, env_ctor, num_actors=1, num_envs_per_actor=2,
                             unroll_length=2, setup=ActorSetup(niceness=3), poll_seconds=0.2)
    try:
        assert unroller.unroll(2) is not None  # the actor's environment is running
        proc = unroller.processes[0]
        threads = [int(t) for t in os.listdir(f"/proc/{proc.pid}/task")]
        assert len(threads) > 1
        expected = min(learner + 3, 19)
        assert {tid: _niceness(tid) for tid in threads} == {tid: expected for tid in threads}
        assert _niceness(0) == learner  # the learner keeps its own
    finally:
        unroller.close()


def test_unrolls_are_copied_out_of_the_reused_slots():
    # One slot per actor, reused for every unroll: a returned unroll that still viewed its
    # slot would change under the caller when the actor writes the next one into it.
    unroller = _unroller(Deterministic(), queue_size=1)
    try:
        first = unroller.unroll(6)
        kept = first.time_step.observation.clone()
        later = [unroller.unroll(6).time_step.observation for _ in range(3)]
    finally:
        unroller.close()
    torch.testing.assert_close(first.time_step.observation, kept)
    assert not torch.equal(later[-1], kept)  # the episodes moved on: the check can fail


class WithConv(Deterministic):
    """Deterministic plus a convolution built in channels-last format, as NatureCNN's, and
    a linear layer."""

    def __init__(self, **kw):
        super().__init__(**kw)
        self.conv = nn.Conv2d(4, 8, 3).to(memory_format=torch.channels_last)
        self.fc = nn.Linear(12, 5)

    def actor_modules(self):
        return ["conv", "fc"]  # declared: rollout_step does not call them


def test_actor_copy_acts_in_the_contiguous_layout():
    _, alg, params = build_actor(WithConv, functools.partial(load, "CartPole-v1"), 1, seed=0)
    w = alg.conv.weight
    assert w.is_contiguous() and not w.is_contiguous(memory_format=torch.channels_last)
    assert params["conv.weight"] is w  # the tensor the learner's parameters are copied into
    learner = WithConv()
    copy_parameters({"conv.weight": w}, {"conv.weight": learner.conv.weight})
    assert torch.equal(w, learner.conv.weight) and w.is_contiguous()
    # Linear weights are stored transposed; the copy keeps that layout and the values.
    fc = alg.fc.weight
    assert fc.shape == (5, 12) and fc.t().is_contiguous() and not fc.is_contiguous()
    assert params["fc.weight"] is fc
    copy_parameters({"fc.weight": fc}, {"fc.weight": learner.fc.weight})
    assert torch.equal(fc, learner.fc.weight) and fc.t().is_contiguous()
    x = torch.randn(3, 12)
    torch.testing.assert_close(nn.functional.linear(x, fc, learner.fc.bias),
                               learner.fc(x))


def test_actor_exception_surfaces_with_traceback():
    unroller = _unroller(Deterministic(), actor_kw={"fail_after": 10})
    procs = unroller.processes
    # The actors fail in their second unroll; the clock starts after the first, so that
    # spawning them (slow on a loaded machine) does not count.
    unroller.unroll(6)
    t0 = time.time()
    with pytest.raises(ActorError, match=r"(?s)actor \d failed.*boom in rollout_step"):
        for _ in range(10):
            unroller.unroll(6)
    assert time.time() - t0 < 30
    assert not _alive(procs)  # the failure closed every actor


def test_killed_actor_is_noticed_and_can_be_restarted():
    unroller = _unroller(Deterministic())
    unroller.unroll(6)
    os.kill(unroller.processes[1].pid, signal.SIGKILL)
    t0 = time.time()
    with pytest.raises(ActorError, match=r"actor 1 failed: its process \(pid \d+\) was killed by "
                                         r"signal SIGKILL"):
        for _ in range(20):
            unroller.unroll(6)
    assert time.time() - t0 < 15

    unroller = _unroller(Deterministic(), restart_failed_actors=True)
    try:
        unroller.unroll(6)
        os.kill(unroller.processes[0].pid, signal.SIGKILL)
        for _ in range(4):
            assert unroller.unroll(6).time_step.step_type.shape == (6, 4)
        assert unroller.restarts == 1
    finally:
        unroller.close()


def _spawned_children(parent):
    """The pids of the ``multiprocessing`` spawn children of process ``parent`` (its
    actors): counting only those, the test ignores processes other tests start meanwhile."""
    pids = set()
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat = (d / "stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
                if ppid == parent and b"multiprocessing.spawn" in (d / "cmdline").read_bytes():
                    pids.add(int(d.name))
            except (OSError, ValueError, IndexError):
                pass
    return pids


def test_training_with_async_actors_learns_and_sigint_leaves_no_processes(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "rlf.bin.train", "--conf", "confs/impala_cartpole.gin",
         "--root_dir", str(tmp_path), "--noprogress",
         "--conf_param", "TrainerConfig.async_unroll=True",
         "--conf_param", "TrainerConfig.num_actors=2",
         "--conf_param", "load.num_envs=8",
         "--conf_param", "TrainerConfig.evaluate=False"],
        cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and not list((tmp_path / "train").glob("events*")):
        time.sleep(0.5)
    time.sleep(2)
    actors = _spawned_children(proc.pid)
    assert len(actors) == 2  # the two actors are running
    proc.send_signal(signal.SIGINT)
    out, _ = proc.communicate(timeout=60)
    assert proc.returncode == 0, out
    time.sleep(1)
    assert not [pid for pid in actors if Path(f"/proc/{pid}").exists()]  # none left behind
    assert list((tmp_path / "ckpt").glob("ckpt-*.pt"))


def test_async_config_errors():
    env = load("CartPole-v1", 2)
    config = TrainerConfig(async_unroll=True, num_actors=3, mini_batch_size=4,
                           mini_batch_length=2)
    alg = Deterministic(env=env, config=config)

    class SixEnvironments(Unroller):  # as 3 actors of 2 environments
        batch_size = 6

        def unroll(self, unroll_length):
            return None

    loop = TrainingLoop(alg, SixEnvironments())
    assert loop.metrics[2]._accumulator.shape == (1, 6)  # metrics sized by the unroller
    with pytest.raises(ValueError, match="sized for 6 environments, the new unroller has 2"):
        loop.set_unroller(SyncUnroller(env, alg))
    with pytest.raises(ValueError, match="num_actors"):
        AsyncUnroller(alg, Deterministic, load, num_actors=0, num_envs_per_actor=2,
                      unroll_length=4)
    with pytest.raises(ValueError, match=r"queue_size \(0\)"):
        AsyncUnroller(alg, Deterministic, load, num_actors=1, num_envs_per_actor=2,
                      unroll_length=4, queue_size=0)
    with pytest.raises(ValueError, match="unroll_queue_size must be >= 1"):
        TrainerConfig(unroll_queue_size=0)
    with pytest.raises(ValueError, match="actor_niceness must be an integer >= 0"):
        TrainerConfig(actor_niceness=-1)
    env.close()


def test_read_parameters_copies_new_versions_and_gives_up_on_a_dead_writer():
    import multiprocessing

    from rlf.unrollers.async_unroller import read_parameters
    shared = {"w": torch.full((3,), 2.0)}
    params = {"w": torch.zeros(3)}
    sequence = multiprocessing.Value("l", 2, lock=False)  # one version published
    assert read_parameters(params, shared, sequence, -1) == 2 and params["w"].eq(2).all()
    shared["w"].fill_(5.0)
    assert read_parameters(params, shared, sequence, 2) == 2  # no new version: no copy
    assert params["w"].eq(2).all()
    sequence.value = 3  # a writer that died mid-write
    assert read_parameters(params, shared, sequence, 2, stopped=lambda: True) == 2
    assert params["w"].eq(2).all()
