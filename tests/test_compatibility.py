"""Run directories written by an earlier rlf still play and resume: an IMPALA run whose
config.gin uses parameter names that are now deprecated aliases and whose checkpoint predates
the list of companion files; SAC and TD3 runs that checkpointed their own update counter."""

import contextlib
import shutil
import subprocess
import sys
from pathlib import Path

import gin
import pytest
import torch

from rlf.trainers.gin_config import parse_config
from rlf.trainers import Trainer
from rlf.utils.checkpoint import load_checkpoint_file
from tests.algorithms._learners import learner_of

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
    assert trainer.loop.replay_buffer.state_dict()["_current_pos"].tolist() == [96] * 4


@contextlib.contextmanager
def _two_learners(env_name):
    """Two IMPALA learners with their metrics, on one environment: each as the trainer
    checkpoints it (``RunCheckpoint``)."""
    from rlf.algorithms import ImpalaAlgorithm, TrainerConfig, build_training
    from rlf.algorithms.training_loop import RunCheckpoint
    from rlf.environments import load
    from rlf.unrollers import SyncUnroller
    env = load(env_name, 2)
    try:
        algs = []
        for _ in range(2):
            alg = ImpalaAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                                  config=TrainerConfig(mini_batch_size=4, mini_batch_length=2),
                                  optimizer=torch.optim.Adam)
            algs.append(RunCheckpoint(alg, build_training(alg, SyncUnroller(env, alg))))
        yield algs
    finally:
        env.close()


def test_a_checkpoint_without_the_episode_score_metric_loads(caplog):
    # Atari checkpoints written before AverageEpisodeScore existed lack its state.
    with _two_learners("ALE/Pong-v5") as algs:
        old = {k: v for k, v in algs[0].state_dict().items() if not k.startswith("_metrics.8.")}
        assert len(old) < len(algs[0].state_dict())
        algs[1].load_state_dict(old)
        assert "AverageEpisodeScoreMetric" in caplog.text and "start fresh" in caplog.text
        with pytest.raises(ValueError, match="missing"):  # other keys are still checked
            algs[1].load_state_dict({k: v for k, v in old.items()
                                     if not k.startswith("_network.")})


def test_a_checkpoint_without_a_metrics_new_counters_loads_silently(caplog):
    # Checkpoints written before the new-episode summaries lack AverageReturn's counters;
    # the rest of the metric's state is restored and the counters start at 0.
    with _two_learners("CartPole-v1") as algs:
        state = algs[0].state_dict()
        state["_metrics.2._num_episodes"] = torch.tensor(7)
        old = {k: v for k, v in state.items() if "._new_" not in k}
        assert len(old) == len(state) - 2
        algs[1].load_state_dict(old)
        assert "start fresh" not in caplog.text
        assert int(algs[1].loop.metrics[2]._num_episodes) == 7
        assert int(algs[1].loop.metrics[2]._new_count) == 0


@pytest.mark.parametrize("name", ["sac", "td3"])
def test_an_old_sac_or_td3_run_with_its_own_update_counter_resumes(name, tmp_path, capsys):
    # rlf 0.1 checkpointed TD3's and SAC's own update counter (a `_num_updates` buffer); it is
    # dropped at loading and `num_updates` (the extra state's) goes on from the same count.
    run = tmp_path / "run"
    shutil.copytree(REPO / "tests" / "data" / f"{name}_pendulum_run_v0", run)
    old = load_checkpoint_file(run / "ckpt" / "ckpt-8.pt")["algorithm"]
    assert int(old["_num_updates"]) == old["_extra_state"]["num_updates"] == 5
    parse_config(str(run / "config.gin"), ["TrainerConfig.num_iterations = 10"])
    try:
        from rlf.algorithms import TrainerConfig
        trainer = Trainer(TrainerConfig(), run, progress=False)
        trainer.train()
    finally:
        gin.clear_config()
    out, err = capsys.readouterr()
    assert "Resuming from iteration 8" in out and "WARNING" not in err
    assert trainer.algorithm.num_updates == 5 + 2  # one update in each of 2 more iterations
    assert "_num_updates" not in trainer.algorithm.state_dict()
    assert sum(learner_of(trainer.algorithm).optimizer_steps.values()) > 0
