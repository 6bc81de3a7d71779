"""An experiment on a running Ray cluster (``ray start --head``, a separate process, its
address in ``RAY_ADDRESS`` as ``ray job submit`` gives it); no Ray process of it outlives the
test. A cluster address that nothing answers at is one line."""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("ray.tune")

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_an_experiment_runs_its_trials_on_the_cluster_at_ray_address(tmp_path):
    port = _free_port()
    env = dict(os.environ, RAY_AUTH_MODE="disabled")  # Ray's token auth, off on both sides
    head = subprocess.Popen(
        [sys.executable, "-m", "ray.scripts.scripts", "start", "--head", f"--port={port}",
         "--num-cpus=2", "--include-dashboard=false", "--disable-usage-stats", "--block"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env,
        start_new_session=True)
    try:
        time.sleep(8)
        assert head.poll() is None
        r = subprocess.run(
            [sys.executable, "-m", "rlf.bin.tune", "--conf", "confs/ppo_cartpole.gin",
             "--root_dir", str(tmp_path / "exp"), "--seeds", "0,1", "--step_iterations", "2",
             "--conf_param", "TrainerConfig.num_env_steps=0",
             "--conf_param", "TrainerConfig.num_iterations=4",
             "--conf_param", "TrainerConfig.evaluate=False"],
            cwd=REPO, capture_output=True, text=True, timeout=300,
            env=dict(env, RAY_ADDRESS=f"127.0.0.1:{port}"))
        out = r.stdout + r.stderr
        assert r.returncode == 0, out[-3000:]
        assert "Connected to Ray cluster" in out and "Started a local Ray" not in out
        rows = (tmp_path / "exp" / "trials.csv").read_text().splitlines()
        assert len(rows) == 3 and all(",FINISHED," in row for row in rows[1:])
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        try:
            head.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pass
        time.sleep(2)
        try:
            os.killpg(head.pid, signal.SIGKILL)  # the daemons it started, if any is left
        except ProcessLookupError:
            pass
        # `ray start` notes its address for later drivers: gone with the cluster
        current = Path("/tmp/ray/ray_current_cluster")
        if current.is_file() and current.read_text().strip().endswith(f":{port}"):
            current.unlink()


def test_a_cluster_address_nothing_answers_at_is_one_line_before_anything_is_written(tmp_path):
    # ray.init would retry it for minutes, printing only its own connection warnings
    port = _free_port()
    r = subprocess.run(
        [sys.executable, "-m", "rlf.bin.tune", "--conf", "confs/ppo_cartpole.gin",
         "--root_dir", str(tmp_path / "exp"), "--seeds", "0",
         "--address", f"127.0.0.1:{port}"],
        cwd=REPO, capture_output=True, text=True, timeout=120)
    assert r.returncode == 2, r.stderr[-2000:]
    assert r.stderr.strip().splitlines() == [
        f"error: no Ray cluster answers at 127.0.0.1:{port} ([Errno 111] Connection refused); "
        f"start one there (`ray start --head --port={port}` on 127.0.0.1) or correct the "
        f"address"], r.stderr[-2000:]
    assert not (tmp_path / "exp").exists()
