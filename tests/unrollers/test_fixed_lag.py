"""The reproducible actor-learner mode: with a fixed lag ``L`` actor unroll ``k`` is acted with
parameter version ``k - L`` (process and Ray actors), and two runs of the async CartPole conf
with the same seed write the same scalars (``time/*`` aside), with 1 or 2 actors, processes or
Ray actors; another seed differs."""

import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rlf.unrollers.actor_unroller import actor_torch_seed
from rlf.utils.tensorboard_reader import read_scalar_tags
from tests.unrollers.test_async_unroller import Deterministic, _unroller

REPO = Path(__file__).resolve().parents[2]


def _versions_seen(unroller, alg, unrolls: int):
    """Unrolls ``unrolls`` times, publishing version ``v`` (``w = 1 + v``) after each, with a
    pause in which free actors would run ahead; returns the version each unroll acted with."""
    seen = []
    for k in range(unrolls):
        info = unroller.unroll(6).rollout_info
        assert bool((info["w"] == info["w"][0, 0]).all())  # one version per unroll
        seen.append(int(info["w"][0, 0]) - 1)
        with torch.no_grad():
            alg.w.fill_(2.0 + k)
        unroller.update_parameters()
        time.sleep(0.3)
    return seen


@pytest.mark.parametrize("lag", [0, 1, 2])
def test_process_actors_act_unroll_k_with_version_k_minus_lag(lag):
    alg = Deterministic()
    unroller = _unroller(alg, fixed_lag=lag, queue_size=3)
    try:
        seen = _versions_seen(unroller, alg, 6)
    finally:
        unroller.close()
    assert seen == [max(0, k - lag) for k in range(6)]
    assert unroller.policy_lag == lag


def test_actor_generators_are_seeded_per_actor_and_incarnation():
    seeds = {actor_torch_seed(3, i, n) for i in range(4) for n in (1, 2)}
    assert len(seeds) == 8 and actor_torch_seed(3, 1, 1) == actor_torch_seed(3, 1, 1)
    assert actor_torch_seed(None, 0) is None


def _scalars(root: Path) -> dict:
    return {t: list(zip(steps, values))
            for t, (steps, values, _) in read_scalar_tags(root / "train").items()
            if not t.startswith("time/")}


def _run(root: Path, seed: int = 0, *params: str) -> dict:
    cmd = [sys.executable, "-m", "rlf.bin.train", "--conf", "confs/impala_cartpole.gin",
           "--root_dir", str(root), "--noprogress",
           "--conf_param", "TrainerConfig.async_unroll=True",
           "--conf_param", "TrainerConfig.deterministic=True",
           "--conf_param", "TrainerConfig.num_env_steps=4000",
           "--conf_param", "TrainerConfig.summary_interval=4",  # (16 iterations: 4 summaries)
           "--conf_param", f"TrainerConfig.random_seed={seed}"]
    for p in params:
        cmd += ["--conf_param", p]
    done = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stderr
    return _scalars(root)


def test_the_same_seed_writes_the_same_scalars_and_another_seed_does_not(tmp_path):
    a, b = _run(tmp_path / "a"), _run(tmp_path / "b")
    assert len(a) > 30 and "Metrics/AverageReturn" in a and "async_unroll/policy_lag" in a
    assert a == b
    other = _run(tmp_path / "c", 1)
    assert other["Metrics/AverageReturn"] != a["Metrics/AverageReturn"]


def test_two_actors_give_the_same_scalars_as_processes_and_as_ray_actors(tmp_path):
    pytest.importorskip("ray")
    # (two processes against two Ray actors: a difference between two runs of either, the
    # same-seed test's subject, would show too)
    two = ("TrainerConfig.num_actors=2", "load.num_envs=8")
    a = _run(tmp_path / "a", 0, *two)
    ray = _run(tmp_path / "ray", 0, *two, "TrainerConfig.use_ray=True")
    assert ray == a


@pytest.mark.parametrize("settings, message", [
    (dict(async_unroll=True, unroll_parameter_update_period=2),
     "set unroll_parameter_update_period = 1 .*, or deterministic = False"),
    (dict(async_unroll=True, deterministic=False, policy_lag=2),
     "policy_lag = 2 takes effect only with deterministic = True"),
    (dict(deterministic=True, torch_num_threads=1, async_unroll=True, policy_lag=-1),
     "policy_lag must be an integer >= 0"),
])
def test_settings_the_reproducible_mode_cannot_honour_are_refused(settings, message):
    from rlf.algorithms import TrainerConfig
    with pytest.raises(ValueError, match=message):
        TrainerConfig(**settings)


def test_the_reproducible_mode_is_the_default_and_free_running_actors_the_opt_out():
    from rlf.algorithms import TrainerConfig
    assert TrainerConfig().deterministic  # torch's thread count, on the same machine
    free = TrainerConfig(async_unroll=True, deterministic=False,
                         unroll_parameter_update_period=4)
    assert not free.actors.deterministic


def test_configure_process_deterministic_sets_torch_and_cublas(monkeypatch):
    from rlf.runtime import configure_process
    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    try:
        configure_process(deterministic=True)
        assert torch.are_deterministic_algorithms_enabled()
        import os
        assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    finally:
        torch.use_deterministic_algorithms(False)
