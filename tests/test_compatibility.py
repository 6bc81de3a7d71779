"""A run directory written by an earlier rlf still plays and resumes: its config.gin uses
parameter names that are now deprecated aliases, and its checkpoint predates the list of
companion files."""

import shutil
import subprocess
import sys
from pathlib import Path

import gin
import pytest
import torch

from rlf.bin.gin_utils import parse_config
from rlf.trainers import Trainer

REPO = Path(__file__).resolve().parents[1]
OLD_RUN = REPO / "tests" / "data" / "impala_cartpole_run_v0"


@pytest.fixture
def old_run(tmp_path):
    run = tmp_path / "run"
    shutil.copytree(OLD_RUN, run)
    return run


def test_play_reads_the_old_config_and_checkpoint(old_run):
    r = subprocess.run([sys.executable, "-m", "rlf.bin.play", "--root_dir", str(old_run),
                        "--num_episodes", "1"], cwd=REPO, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert "ckpt-4.pt" in r.stdout and "episode 0: return" in r.stdout
    assert "ImpalaAlgorithm.discount is deprecated" in r.stderr  # the alias, named


def test_training_resumes_from_the_old_checkpoint_and_replay_buffer(old_run, capsys):
    parse_config(str(REPO / "confs" / "impala_cartpole.gin"),
                 ["load.num_envs = 4", "TrainerConfig.num_iterations = 6",
                  "TrainerConfig.num_env_steps = 0", "TrainerConfig.evaluate = False",
                  "TrainerConfig.save_replay_buffer = True"])
    try:
        from rlf.algorithms import TrainerConfig
        trainer = Trainer(TrainerConfig(), old_run, progress=False)
        result = trainer.train()
    finally:
        gin.clear_config()
    out, err = capsys.readouterr()
    assert "Resuming from iteration 4" in out and "WARNING" not in err
    assert result["iterations"] == 6
    # the old replay file was restored: 64 steps per environment written before, 2 x 16 now
    # (a fresh buffer would count 32)
    assert trainer.algorithm.replay_buffer.state_dict()["_current_pos"].tolist() == [96] * 4


def test_a_checkpoint_without_the_episode_score_metric_loads(caplog):
    # Atari checkpoints written before AverageEpisodeScore existed lack its state.
    from rlf.algorithms import ImpalaAlgorithm, TrainerConfig
    from rlf.environments import load
    from rlf.unrollers import SyncUnroller
    env = load("ALE/Pong-v5", 2)
    try:
        algs = []
        for _ in range(2):
            alg = ImpalaAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                                  config=TrainerConfig(), optimizer=torch.optim.Adam)
            alg.set_unroller(SyncUnroller(env, alg))
            algs.append(alg)
        old = {k: v for k, v in algs[0].state_dict().items() if not k.startswith("_metrics.8.")}
        assert len(old) < len(algs[0].state_dict())
        algs[1].load_state_dict(old)
        assert "AverageEpisodeScoreMetric" in caplog.text and "start fresh" in caplog.text
        with pytest.raises(ValueError, match="missing"):  # other keys are still checked
            algs[1].load_state_dict({k: v for k, v in old.items()
                                     if not k.startswith("_network.")})
    finally:
        env.close()
