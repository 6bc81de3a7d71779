"""gymnasium's MuJoCo tasks through rlf.environments.load (the ``[mujoco]`` extra):
float32 observations, bounded float32 actions, and a SAC learner stepping them."""

import functools

import pytest
import torch

pytest.importorskip("mujoco", reason="the [mujoco] extra is not installed")

from rlf.algorithms import SACAlgorithm, TrainerConfig  # noqa: E402
from rlf.environments import load  # noqa: E402
from rlf.algorithms import loop_of


def test_halfcheetah_loads_with_float32_observations_and_bounded_actions():
    env = load("HalfCheetah-v5", 2, seed=0)
    assert env.observation_spec().dtype == torch.float32
    assert env.observation_spec().shape == (17,)
    action_spec = env.action_spec()
    assert action_spec.dtype == torch.float32 and action_spec.shape == (6,)
    time_step = env.reset()
    assert time_step.observation.dtype == torch.float32
    time_step = env.step(torch.full((2, 6), 1.0))
    assert time_step.observation.dtype == torch.float32 and time_step.reward.shape == (2,)
    env.close()


@pytest.mark.slow  # (actors or a long run)
def test_sac_trains_on_halfcheetah_with_actions_inside_the_bounds():
    env = load("HalfCheetah-v5", 1, seed=0)
    adam = functools.partial(torch.optim.Adam, lr=3e-4)
    config = TrainerConfig(unroll_length=1, mini_batch_size=16, mini_batch_length=2,
                           initial_collect_steps=20, num_iterations=40)
    alg = SACAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       actor_optimizer=adam, critic_optimizer=adam, alpha_optimizer=adam)
    for _ in range(40):
        alg.train_iter()
    actions = loop_of(alg).replay_buffer.gather_all().action
    assert float(actions.abs().max()) <= 1.0
    assert alg.num_updates > 0
    env.close()


def test_model_compile_warnings_go_to_the_log_not_to_stderr(capfd, caplog):
    # gymnasium's half_cheetah.xml uses `settotalmass`, which MuJoCo 4 warns about through
    # its C library (fd 2): a line before every run's output, and before one-line errors.
    import mujoco
    caplog.set_level("DEBUG", logger="rlf.environments.gym_env")
    env = load("HalfCheetah-v5", 1, seed=0)
    env.close()
    assert capfd.readouterr().err == ""
    assert any("settotalmass" in r.getMessage() for r in caplog.records)
    assert mujoco.get_mju_user_warning() is None  # MuJoCo's own handler is back
