"""rlf.train from Python: a run, its resume, its policy; environments of a user's own (a
class with Dict observations and Discrete actions, one with Box observations and actions, a
function), in this process and with actor processes; from the command line too; mistakes."""

import os
import re
import subprocess
import sys
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import rlf
from rlf.utils.errors import UserError
from tests.api._envs import Corridor, Target, short_corridor

REPO = Path(__file__).resolve().parents[2]
PPO = str(REPO / "confs" / "ppo_cartpole.gin")
QUIET = ["TrainerConfig.evaluate = False"]


def test_a_run_resumes_and_hands_its_policy(tmp_path):
    run = rlf.train(PPO, root_dir=tmp_path / "run", steps=512, seed=1, bindings=QUIET,
                    progress=False)
    assert run.root_dir == tmp_path / "run" and run.env_steps >= 512 and run.iterations >= 2
    assert run.metrics["EnvironmentSteps"] == run.env_steps and run.evaluation is None
    config = (tmp_path / "run" / "config.gin").read_text().splitlines()
    assert "TrainerConfig.random_seed = 1" in config
    assert "TrainerConfig.num_env_steps = 512" in config
    # the same root_dir resumes, as the command line does
    more = rlf.train(PPO, root_dir=tmp_path / "run", steps=1024, seed=1, bindings=QUIET,
                     progress=False)
    assert more.iterations > run.iterations and more.env_steps >= 1024
    policy = more.policy()
    assert policy.checkpoint == tmp_path / "run" / "ckpt" / f"ckpt-{more.iterations}.pt"
    action, state = policy.predict(np.zeros(4, np.float32))
    assert state is None and np.ndim(action) == 0 and action in (0, 1)
    actions, _ = policy.predict(np.zeros((5, 4), np.float32))
    assert actions.shape == (5,) and actions.dtype == np.int64


@pytest.mark.parametrize("conf, env, bindings", [
    ("ppo_cartpole.gin", Corridor, []),
    ("ppo_cartpole.gin", short_corridor, []),
    ("sac_pendulum.gin", Target, ["TrainerConfig.initial_collect_steps = 64",
                                  "TrainerConfig.mini_batch_size = 32"]),
    # with actor processes, which import the class by its module
    ("impala_cartpole.gin", Corridor, ["TrainerConfig.async_unroll = True",
                                       "load.num_envs = 4"]),
], ids=["dict_discrete", "function", "box_box", "dict_discrete_actors"])
def test_an_environment_of_ones_own_trains(tmp_path, conf, env, bindings):
    run = rlf.train(str(REPO / "confs" / conf), root_dir=tmp_path / "run", env=env,
                    steps=256, bindings=QUIET + bindings, progress=False)
    assert run.env_steps >= 256
    name = f"tests.api._envs:{env.__name__}"
    assert f"load.env_name = '{name}'" in (tmp_path / "run" / "config.gin").read_text()
    policy = run.policy()
    space = env().observation_space
    observation = gym.spaces.flatten(space, space.sample()) if isinstance(
        space, gym.spaces.Dict) else space.sample()
    action, _ = policy.predict(observation)
    assert env().action_space.contains(np.asarray(action, dtype=env().action_space.dtype))
    # the environment's own observations too: the training's preprocessing is applied
    raw = [env().observation_space.sample() for _ in range(3)]
    flat = np.stack([gym.spaces.flatten(env().observation_space, o) for o in raw])
    assert np.array_equal(policy.predict(raw[0])[0], policy.predict(flat[0])[0])
    assert np.array_equal(policy.predict(raw)[0], policy.predict(flat)[0])


@pytest.mark.parametrize("env", ["tests.api._envs:Corridor", "tests.api._envs:Corridor-v0"],
                         ids=["class", "registered_id"])
def test_the_command_line_takes_the_same_environment(tmp_path, env):
    r = subprocess.run([sys.executable, "-m", "rlf.bin.train", "--conf", PPO, "--noprogress",
                        "--env", env, "--steps", "256",
                        "--conf_param", "TrainerConfig.evaluate=False", "--root_dir",
                        str(tmp_path / "run")], cwd=REPO, capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"^finished: \d+ iterations, \d+ environment steps", r.stdout, re.M)


def test_an_environment_of_this_process_alone_trains_here_and_is_refused_with_actors(tmp_path):
    class Local(Corridor):
        pass

    run = rlf.train(PPO, root_dir=tmp_path / "here", env=Local, steps=256, bindings=QUIET,
                    progress=False)
    assert run.env_steps >= 256
    assert "load.env_name = 'rlf-python/Local-v0'" in (
        tmp_path / "here" / "config.gin").read_text()
    with pytest.raises(UserError, match=r"^env=test_an_environment.*Local is defined in "
                                        r"__main__ or inside a function, so the actor processes "
                                        r"\(TrainerConfig.async_unroll\) of this run cannot "
                                        r"import it; define it at the top of a module"):
        rlf.train(str(REPO / "confs" / "impala_cartpole.gin"), root_dir=tmp_path / "actors",
                  env=Local, steps=256, bindings=QUIET + ["TrainerConfig.async_unroll = True"],
                  progress=False)
    assert not (tmp_path / "actors").exists()


@pytest.mark.parametrize("kwargs, message", [
    (dict(env=Corridor()), r"env=Corridor\(...\) is an environment instance: rlf makes one per "
                           r"environment"),
    (dict(env=""), r"env='': give a gymnasium id"),
    (dict(env=42), r"env=42: give a gymnasium id"),
    (dict(seed=1, bindings=["TrainerConfig.random_seed = 2"]),
     r"seed=1 and the binding 'TrainerConfig.random_seed = 2' both set "
     r"TrainerConfig.random_seed: give one of them"),
    (dict(bindings="TrainerConfig.random_seed = 2"), r"bindings='TrainerConfig.random_seed = 2'"
                                                     r": give a list of bindings"),
    (dict(env="MyRobot-v0"), r"Unknown environment id 'MyRobot-v0'.*an environment of your "
                             r"own: gymnasium.register\('MyEnv-v0', "
                             r"entry_point='my_pkg.envs:MyEnv'\)"),
    (dict(root_dir="$RLF_UNSET_VARIABLE/run"), r"root_dir \$RLF_UNSET_VARIABLE/run: the "
                                               r"environment variable RLF_UNSET_VARIABLE"),
])
def test_a_mistake_is_one_line_and_writes_nothing(tmp_path, monkeypatch, kwargs, message):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(UserError, match=message) as raised:
        rlf.train(PPO, **{"root_dir": "run", **kwargs}, progress=False)
    assert "\n" not in str(raised.value)
    assert list(tmp_path.iterdir()) == []


def test_a_conf_given_as_text(tmp_path):
    text = f"include '{PPO}'\nTrainerConfig.unroll_length = 16\n"
    run = rlf.train(text, root_dir=tmp_path / "run", steps=128, bindings=QUIET,
                    progress=False)
    assert run.iterations >= 1 and run.env_steps >= 128
    assert "TrainerConfig.unroll_length = 16" in (tmp_path / "run" / "config.gin").read_text()


def test_the_example_script_runs_as_written(tmp_path):
    # from a checkout's root, as its docstring says (the confs beside it, runs/ made there)
    (tmp_path / "confs").symlink_to(REPO / "confs")
    r = subprocess.run([sys.executable, str(REPO / "examples" / "python_api.py")],
                       cwd=tmp_path, capture_output=True, text=True, timeout=600,
                       env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert "AverageReturn 500.0" in r.stdout and "one greedy episode: return 500" in r.stdout
    assert (tmp_path / "runs" / "api_cartpole" / "policy.pt2").is_file()
    assert re.search(r"Corridor: AverageReturn 0\.9\d", r.stdout), r.stdout


def test_the_getting_started_python_example_runs_as_written(tmp_path):
    page = (REPO / "docs" / "getting-started.md").read_text()
    code = re.search(r"## From Python\n\n```python\n(.*?)```", page, re.S).group(1)
    (tmp_path / "confs").symlink_to(REPO / "confs")
    r = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True,
                       text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(REPO)})
    assert r.returncode == 0, r.stderr[-3000:]
    assert re.search(r"^\d+ \d+ 500\.0$", r.stdout, re.M), r.stdout[-2000:]  # solved
    assert re.search(r"^[01] None$", r.stdout, re.M)
    assert (tmp_path / "policy.pt2").is_file()


@pytest.mark.one_worker
def test_two_learners_train_through_the_python_api_too(tmp_path):
    # rlf.train launches them as rlf.bin.train does; an importable class reaches them
    run = rlf.train(str(REPO / "confs" / "impala_cartpole.gin"), root_dir=tmp_path / "run",
                    env=Corridor, steps=256, progress=False,
                    bindings=QUIET + ["TrainerConfig.num_learners = 2", "load.num_envs = 4"])
    assert run.env_steps >= 256 and run.iterations >= 1
    assert (tmp_path / "run" / "ckpt" / "learner-1").is_dir()
    assert run.metrics["EnvironmentSteps"] == run.env_steps
    action, _ = run.policy().predict(np.zeros(3, np.float32))
    assert action in (0, 1)
