"""The shipped gin files parse (from any working directory), and includes resolve."""

import math
from pathlib import Path

import gin
import pytest

from rlf.trainers.gin_config import ConfigError, parse_config

CONFS = Path(__file__).resolve().parents[1] / "confs"


@pytest.fixture(autouse=True)
def clear_gin():
    yield
    gin.clear_config()


@pytest.mark.parametrize("name", sorted(p.name for p in CONFS.glob("*.gin")))
def test_every_conf_parses(name, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # not the repository root
    parse_config(str(CONFS / name))
    assert gin.query_parameter("TrainerConfig.algorithm_ctor") is not None


def test_the_main_atari_conf_plays_v5_as_defined(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parse_config(str(CONFS / "impala_atari.gin"), ["TrainerConfig.num_env_steps = 1000"])
    with pytest.raises(ValueError):  # v5's own sticky actions: no shipped conf overrides them
        gin.query_parameter("load_atari.repeat_action_probability")
    assert gin.query_parameter("load.env_name") == "ALE/Pong-v5"
    assert gin.query_parameter("TrainerConfig.async_unroll") is True
    assert gin.query_parameter("TrainerConfig.deterministic") is True  # same seed, same run
    assert gin.query_parameter("TrainerConfig.num_env_steps") == 1000  # bindings win
    assert gin.query_parameter("ImpalaAlgorithm.importance_ratio_clipping") == 0.3


def test_no_conf_switches_sticky_actions_off():
    for conf in CONFS.glob("*.gin"):
        assert "repeat_action_probability" not in conf.read_text(), conf.name


def test_the_sync_conf_is_the_main_recipe_in_one_process(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parse_config(str(CONFS / "impala_atari_sync.gin"))
    q = gin.query_parameter
    assert q("TrainerConfig.async_unroll") is False
    assert q("TrainerConfig.torch_num_threads") == 2 and q("load_atari.num_threads") == 2
    assert q("ImpalaAlgorithm.td_lambda") == 0.95  # from the included main conf
    assert q("ImpalaAlgorithm.entropy_regularization") == [(0, 0.01), (2500000, 0.0)]


def test_the_replay_conf_is_the_main_recipe_with_experience_replay(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    parse_config(str(CONFS / "impala_atari_replay.gin"))
    q = gin.query_parameter
    assert q("TrainerConfig.async_unroll") is True and q("TrainerConfig.deterministic") is True
    assert q("ImpalaAlgorithm.td_lambda") == 0.95  # from the included main conf
    assert q("ImpalaAlgorithm.experience_replay_fraction") == 0.5
    # the memory: 160k agent steps, one stored frame per step
    assert q("ImpalaAlgorithm.experience_replay_length") * q("load.num_envs") == 160000
    assert q("ImpalaAlgorithm.experience_replay_stacked_frames") == {"time_step.observation": 4}


def test_atari_conf_halves_the_rate_at_6m_and_8m_of_its_10m_frames(tmp_path, monkeypatch):
    # MultiStepLR counts gradient updates; the milestones must follow the updates per run.
    monkeypatch.chdir(tmp_path)
    parse_config(str(CONFS / "impala_atari.gin"))
    q = gin.query_parameter
    num_envs = q("load.num_envs")
    unrolls = q("TrainerConfig.num_env_steps") / (q("TrainerConfig.unroll_length") * num_envs)
    updates = (unrolls * num_envs / q("TrainerConfig.mini_batch_size")
               * q("TrainerConfig.num_updates_per_train_iter"))
    assert updates == 93750
    milestones = q("torch.optim.lr_scheduler.MultiStepLR.milestones")
    assert [m / updates for m in milestones] == pytest.approx([0.6, 0.8])
    assert q("torch.optim.lr_scheduler.MultiStepLR.gamma") == 0.5


@pytest.mark.parametrize("name", ["ppo_atari.gin", "ppo_cartpole.gin", "ppo_mujoco.gin"])
def test_ppo_confs_decay_the_rate_to_zero_at_the_last_update(name, tmp_path, monkeypatch):
    # LinearLR counts gradient updates: one per mini-batch of each epoch. The transitions of
    # an iteration are num_envs * unroll_length at most (the carried step of the previous
    # unroll replaces each environment's final step, which has no successor).
    monkeypatch.chdir(tmp_path)
    parse_config(str(CONFS / name))
    q = gin.query_parameter
    per_iter = q("load.num_envs") * q("TrainerConfig.unroll_length")
    iterations = math.ceil(q("TrainerConfig.num_env_steps") / per_iter)
    updates = (iterations * q("TrainerConfig.num_updates_per_train_iter")
               * math.ceil(per_iter / q("TrainerConfig.mini_batch_size")))
    assert q("TrainerConfig.mini_batch_length") == 1
    assert q("torch.optim.lr_scheduler.LinearLR.end_factor") == 0.0
    assert q("torch.optim.lr_scheduler.LinearLR.total_iters") == updates


def test_missing_include_is_a_one_line_config_error(tmp_path):
    conf = tmp_path / "bad.gin"
    conf.write_text("include 'nope.gin'\n")
    with pytest.raises(ConfigError, match=r"nope\.gin.*relative to the conf file's folder") as e:
        parse_config(str(conf))
    assert "\n" not in str(e.value)


def test_a_whole_float_for_an_int_parameter_is_bound_as_the_int(tmp_path, monkeypatch):
    # 2.0 passed the type check and reached gymnasium, which refused a float count of copies.
    monkeypatch.chdir(tmp_path)
    parse_config(str(CONFS / "dqn_cartpole.gin"),
                 ["load.num_envs = 2.0", "TrainerConfig.num_env_steps = 1e3",
                  "TrainerConfig.mini_batch_size = 4.0", "torch.optim.Adam.lr = 1.0"])
    q = gin.query_parameter
    for name, value in (("load.num_envs", 2), ("TrainerConfig.num_env_steps", 1000),
                        ("TrainerConfig.mini_batch_size", 4)):
        assert q(name) == value and type(q(name)) is int, name
    assert type(q("torch.optim.Adam.lr")) is float  # a float parameter keeps its float
    assert "load.num_envs = 2\n" in gin.config_str()  # what actor processes re-parse


def test_the_gpu_conf_trains_with_the_learner_on_cpu(tmp_path):
    # The GPU recipe as shipped but for the device and the actor count (this machine has
    # neither a GPU nor 16 cores): two iterations, then a checkpoint.
    import subprocess
    import sys
    root = tmp_path / "run"
    done = subprocess.run(
        [sys.executable, "-m", "rlf.bin.train", "--conf", str(CONFS / "impala_atari_gpu.gin"),
         "--root_dir", str(root), "--noprogress",
         "--conf_param", "TrainerConfig.device='cpu'",
         "--conf_param", "TrainerConfig.num_actors=2",
         "--conf_param", "TrainerConfig.num_iterations=2"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (root / "ckpt" / "ckpt-2.pt").exists()
    parse_config(str(CONFS / "impala_atari_gpu.gin"))
    q = gin.query_parameter
    assert q("TrainerConfig.device") == "cuda" and q("TrainerConfig.num_actors") == 14
    assert q("ImpalaAlgorithm.td_lambda") == 0.95  # the main recipe, included
    # The rate halves at 60 % and 80 % of the run's updates.
    per_iteration = q("load.num_envs") * q("TrainerConfig.num_actors")
    updates = (q("TrainerConfig.num_env_steps") / (q("TrainerConfig.unroll_length")
                                                   * per_iteration)
               * per_iteration / q("TrainerConfig.mini_batch_size")
               * q("TrainerConfig.num_updates_per_train_iter"))
    milestones = q("torch.optim.lr_scheduler.MultiStepLR.milestones")
    assert [m / updates for m in milestones] == pytest.approx([0.6, 0.8])
