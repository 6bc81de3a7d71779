"""Experiment trackers beside TensorBoard: MLflow's local store read back with MlflowClient,
W&B in offline mode, and a missing extra as one line."""

import subprocess
import sys
from pathlib import Path

import pytest

from rlf.utils.tensorboard_reader import read_scalar_tags

REPO = Path(__file__).resolve().parents[2]
CONF = str(REPO / "confs" / "ppo_cartpole.gin")
SHORT = ["TrainerConfig.num_env_steps=0", "TrainerConfig.evaluate=False",
         "TrainerConfig.summary_interval=1", "TrainerConfig.checkpoint_interval=2"]


def _train(cwd, root, iterations, tracker, env=None, extra=()):
    bindings = SHORT + [f"TrainerConfig.num_iterations={iterations}",
                        f"TrainerConfig.tracker='{tracker}'", *extra]
    cmd = [sys.executable, "-m", "rlf.bin.train", "--conf", CONF, "--root_dir", str(root),
           "--noprogress"] + [a for b in bindings for a in ("--conf_param", b)]
    return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600,
                          env=env)


def test_mlflow_mirrors_the_scalars_and_a_resumed_run_continues_the_same_tracked_run(
        tmp_path, monkeypatch):
    mlflow = pytest.importorskip("mlflow")
    root = tmp_path / "run"
    r = _train(tmp_path, root, 4, "mlflow")
    assert r.returncode == 0, r.stderr[-2000:]
    r = _train(tmp_path, root, 6, "mlflow")  # resumed for two more iterations
    assert r.returncode == 0, r.stderr[-2000:]
    monkeypatch.chdir(tmp_path)  # MLflow's default local store, where the runs made it
    client = mlflow.MlflowClient()
    experiment = client.get_experiment_by_name("rlf")
    runs = client.search_runs([experiment.experiment_id])
    assert len(runs) == 1  # the resumed run went on with the same tracked run
    run = runs[0]
    assert run.info.status == "FINISHED" and run.info.run_name == "run"
    assert run.data.params["TrainerConfig.tracker"] == "'mlflow'"
    assert run.data.params["Adam.lr"] == "0.001"  # gin's shortest unique names
    tensorboard = read_scalar_tags(root / "train")
    assert "loss/PPOAlgorithm/pg_loss" in tensorboard
    assert set(run.data.metrics) == set(tensorboard)  # every scalar, by its tag
    for tag, (steps, values, _) in tensorboard.items():
        history = sorted((m.step, m.value) for m in client.get_metric_history(run.info.run_id,
                                                                               tag))
        assert history == sorted(zip(steps, [pytest.approx(v) for v in values])), tag
    assert max(tensorboard["Metrics/AverageReturn"][0]) == 6


def test_wandb_offline_writes_its_run_under_the_run_directory(tmp_path):
    pytest.importorskip("wandb")
    import os
    env = dict(os.environ, WANDB_MODE="offline", WANDB_SILENT="true")
    r = _train(tmp_path, tmp_path / "run", 2, "wandb", env=env)
    assert r.returncode == 0, r.stderr[-2000:]
    runs = list((tmp_path / "run" / "wandb").glob("offline-run-*"))
    assert len(runs) == 1 and list(runs[0].glob("run-*.wandb"))


def test_a_tracker_whose_package_is_missing_is_one_line_and_status_2(tmp_path):
    code = ("import sys; sys.modules['mlflow'] = None; sys.argv = ['train', '--conf', "
            f"{CONF!r}, '--root_dir', {str(tmp_path / 'run')!r}, '--conf_param', "
            "\"TrainerConfig.tracker='mlflow'\"]; from rlf.bin.train import run; run()")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "error: TrainerConfig.tracker = 'mlflow' needs mlflow, which is not installed: "
        "pip install -e '.[mlflow]' (from rlf's checkout)"]
    assert not (tmp_path / "run").exists()
