"""RayUnroller on a local Ray (ray.init(num_cpus=2)): same experience as SyncUnroller, a
failing actor surfaces, and training runs end to end through the trainer."""

import functools
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

ray = pytest.importorskip("ray")

from rlf.environments import load  # noqa: E402
from rlf.unrollers import ActorError, SyncUnroller  # noqa: E402
from rlf.unrollers.ray_unroller import RayUnroller  # noqa: E402
from tests.unrollers.test_async_unroller import Deterministic, IndexRecorder  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
# The first unroll waits for the actors to start and import torch: on a loaded 2-core machine
# that can take a minute. A failing actor is reported at once, whatever the timeout.
TIMEOUT = 300


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def _ray_unroller(alg, **kw):
    return RayUnroller(alg, algorithm_ctor=functools.partial(Deterministic, **kw),
                       env_ctor=functools.partial(load, "CartPole-v1"), num_actors=2,
                       num_envs_per_actor=2, unroll_length=6, seed=5, timeout=TIMEOUT)


def test_each_ray_actor_knows_its_index(local_ray):
    unroller = RayUnroller(IndexRecorder(), algorithm_ctor=IndexRecorder,
                           env_ctor=functools.partial(load, "CartPole-v1"), num_actors=2,
                           num_envs_per_actor=2, unroll_length=6, seed=5, timeout=TIMEOUT)
    try:
        info = unroller.unroll(6).rollout_info
    finally:
        unroller.close()
    assert info["actor"].tolist() == [[0, 0, 1, 1]] * 6
    assert info["num_actors"].eq(2).all()


def test_ray_experience_equals_sync_and_parameters_broadcast(local_ray):
    alg = Deterministic()
    sync_env = load("CartPole-v1", 4, seed=5)
    expected = [SyncUnroller(sync_env, alg).unroll(6)]
    unroller = _ray_unroller(alg)
    try:
        got = unroller.unroll(6)
        torch.testing.assert_close(got.time_step.observation, expected[0].time_step.observation)
        torch.testing.assert_close(got.action, expected[0].action)
        with torch.no_grad():
            alg.w.fill_(-2.0)
        unroller.update_parameters()
        for _ in range(3):
            w = unroller.unroll(6).rollout_info["w"]
        assert w.eq(-2).all() and unroller.policy_lag == 0
    finally:
        unroller.close()
        sync_env.close()


def test_ray_actor_failure_raises(local_ray):
    unroller = _ray_unroller(Deterministic(), fail_after=8)
    with pytest.raises(ActorError, match="boom in rollout_step"):
        for _ in range(5):
            unroller.unroll(6)


def test_ray_training_end_to_end_on_cartpole(tmp_path):
    r = subprocess.run(
        [sys.executable, "-m", "rlf.bin.train", "--conf", "confs/impala_cartpole.gin",
         "--root_dir", str(tmp_path), "--noprogress",
         "--conf_param", "TrainerConfig.async_unroll=True",
         "--conf_param", "TrainerConfig.use_ray=True",
         "--conf_param", "TrainerConfig.num_actors=2",
         "--conf_param", "load.num_envs=4",
         "--conf_param", "TrainerConfig.num_env_steps=0",
         "--conf_param", "TrainerConfig.num_iterations=8",
         "--conf_param", "TrainerConfig.evaluate=False"],
        cwd=REPO, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "finished: 8 iterations" in r.stdout


def test_a_cluster_address_where_nothing_answers_is_one_line_at_once(tmp_path):
    # ray.init retried a dead address for minutes, printing only Ray's own warnings.
    import socket
    with socket.socket() as s:  # a port nothing listens on once this socket is closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for address, message in [
            (f"127.0.0.1:{port}", f"error: no Ray cluster answers at 127.0.0.1:{port} ("),
            ("nohost", "error: Ray cluster address 'nohost' is not host:port")]:
        r = subprocess.run(
            [sys.executable, "-m", "rlf.bin.train", "--conf", "confs/impala_cartpole.gin",
             "--root_dir", str(tmp_path / "run"), "--noprogress",
             "--conf_param", "TrainerConfig.async_unroll=True",
             "--conf_param", "TrainerConfig.use_ray=True",
             "--conf_param", f"TrainerConfig.ray_address='{address}'"],
            cwd=REPO, capture_output=True, text=True, timeout=120,
            env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
        assert r.returncode == 2, r.stderr[-2000:]
        assert r.stderr.strip().splitlines()[-1].startswith(message), r.stderr[-2000:]
        assert not (tmp_path / "run").exists()
