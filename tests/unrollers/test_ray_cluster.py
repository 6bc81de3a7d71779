"""Actors on a real multi-node Ray cluster (``ray.cluster_utils.Cluster``: a head node and two
worker nodes, each its own raylet): the actors are placed on the worker nodes by a custom
resource, unrolls arrive from every actor with bounded policy lag, CartPole is learned, and a
worker node whose raylet is killed mid-run has its actor restarted elsewhere. No Ray process
outlives the test. Without an address a run starts a Ray of its own beside a running cluster;
with no cluster left, the address ``'auto'`` is one line."""

import os
import subprocess
import sys
import time
from pathlib import Path

import gin
import pytest

ray = pytest.importorskip("ray")
from ray.cluster_utils import Cluster  # noqa: E402

from rlf.trainers.gin_config import parse_config  # noqa: E402
from rlf.trainers import Trainer  # noqa: E402
from rlf.algorithms import loop_of  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


def _ray_processes():
    """Pids of this machine's Ray daemons (raylet, GCS)."""
    pids = set()
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and any(
                    name in (d / "cmdline").read_bytes() for name in (b"raylet", b"gcs_server")):
                pids.add(int(d.name))
        except OSError:
            pass
    return pids


def test_actors_on_worker_nodes_train_and_survive_a_dead_node(tmp_path):
    before = _ray_processes()
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        # one actor's resource on the first worker, two on the second (room for a restart)
        first = cluster.add_node(num_cpus=1, resources={"rlf_actor": 1})
        second = cluster.add_node(num_cpus=2, resources={"rlf_actor": 2})
        cluster.wait_for_nodes()
        parse_config(str(REPO / "confs" / "impala_cartpole.gin"), [
            "TrainerConfig.async_unroll = True", "TrainerConfig.use_ray = True",
            f"TrainerConfig.ray_address = '{cluster.address}'",
            "TrainerConfig.ray_actor_resources = {'rlf_actor': 1}",
            "TrainerConfig.num_actors = 2", "load.num_envs = 8",
            "TrainerConfig.restart_failed_actors = True", "TrainerConfig.evaluate = False"])
        from rlf.algorithms import TrainerConfig
        trainer = Trainer(TrainerConfig(), tmp_path, progress=False)
        algorithm = trainer.build()
        unroller = loop_of(algorithm).unroller
        try:
            workers = {first.node_id, second.node_id}
            nodes = unroller.actor_nodes()
            assert set(nodes) <= workers and len(nodes) == 2  # none on the driver's node
            lags = []
            for _ in range(20):  # (bench/impala_cartpole.py measures the learning)
                algorithm.train_iter()
                lags.append(unroller.policy_lag)
            assert algorithm.num_updates > 0
            assert max(lags) <= 3  # parameter updates reach the actors
            # unrolls come from both actors: environment ids 0-7 and 8-15
            experience = loop_of(algorithm).unroll(16)
            env_ids = set(experience.time_step.env_id.flatten().tolist())
            assert env_ids == set(range(16))

            on_first = nodes.index(first.node_id)
            cluster.remove_node(first, allow_graceful=False)  # its raylet and actor die
            t0 = time.time()
            for _ in range(5):
                algorithm.train_iter()
            assert time.time() - t0 < 120  # no hang
            assert unroller.restarts == 1
            assert unroller.actor_nodes()[on_first] == second.node_id  # restarted elsewhere
        finally:
            trainer.close()
    finally:
        gin.clear_config()
        cluster.shutdown()
    time.sleep(2)
    assert not (_ray_processes() - before)  # no Ray process outlives the test


def test_no_address_starts_a_ray_of_its_own_beside_a_running_cluster(tmp_path):
    # Ray's ray.init() joins the cluster whose address `ray start` (and Cluster) wrote down,
    # where the run's num_cpus stopped it with a ValueError.
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1})
    try:
        r = subprocess.run(
            [sys.executable, "-m", "rlf.bin.train", "--conf", "confs/impala_cartpole.gin",
             "--root_dir", str(tmp_path / "run"), "--noprogress",
             "--conf_param", "TrainerConfig.async_unroll=True",
             "--conf_param", "TrainerConfig.use_ray=True",
             "--conf_param", "TrainerConfig.num_iterations=2",
             "--conf_param", "TrainerConfig.evaluate=False"],
            cwd=REPO, capture_output=True, text=True, timeout=180,
            env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
        assert r.returncode == 0, r.stderr[-2000:]
        assert "Connecting to existing Ray cluster" not in r.stderr
        assert "Started a local Ray instance" in r.stderr, r.stderr[-2000:]
    finally:
        cluster.shutdown()


def test_auto_without_a_running_cluster_is_one_line(tmp_path):
    """After the cluster above is gone (``ray.init(address='auto')`` joins any cluster that
    runs on the machine, the in-process one of ``test_ray_unroller`` included)."""
    if _ray_processes():
        pytest.skip("a Ray cluster runs on this machine, and 'auto' would join it")
    r = subprocess.run(
        [sys.executable, "-m", "rlf.bin.train", "--conf", "confs/impala_cartpole.gin",
         "--root_dir", str(tmp_path / "run"), "--noprogress",
         "--conf_param", "TrainerConfig.async_unroll=True",
         "--conf_param", "TrainerConfig.use_ray=True",
         "--conf_param", "TrainerConfig.ray_address='auto'"],
        cwd=REPO, capture_output=True, text=True, timeout=120,
        env={k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"})
    if r.returncode == 0 and "Connecting to existing Ray cluster" in r.stderr:
        pytest.skip("a Ray cluster started on this machine meanwhile, and 'auto' joined it")
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines()[-1].startswith(
        "error: Ray cluster address 'auto': "), r.stderr[-2000:]
    assert not (tmp_path / "run").exists()
