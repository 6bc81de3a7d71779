"""evaluate_episodes on a real CartPole: returns, lengths and the per-episode callback."""

import logging

import torch

from rlf.data_structures import AlgStep
from rlf.environments import load
from rlf.trainers import evaluate_episodes
from rlf.trainers import evaluator


class AlwaysLeft(torch.nn.Module):
    """Pushes the cart left at every step: CartPole episodes of ~9-11 steps."""

    def get_initial_predict_state(self, batch_size):
        return ()

    def predict_step(self, time_step, state):
        return AlgStep(output=torch.zeros(time_step.reward.shape[0], dtype=torch.int64))


def test_on_episode_reports_each_episode_as_it_ends_and_no_more():
    env = load("CartPole-v1", 3, seed=0)
    seen = []
    try:
        result = evaluate_episodes(AlwaysLeft(), env, 4,
                                   on_episode=lambda i, r, n, s: seen.append((i, r, n)))
    finally:
        env.close()
    # Environments 0, 1, 2 contribute 1, 1 and 2 episodes; later ones are dropped from both
    # the result and the callback.
    assert [i for i, _, _ in seen] == [0, 1, 2, 3]
    assert [r for _, r, _ in seen] == result["returns"]
    assert [n for _, _, n in seen] == result["lengths"]
    # CartPole pays 1 per step, so an episode's return equals its length.
    assert all(r == n and 5 <= n <= 15 for _, r, n in seen)


class LeftHereBalanceThere(torch.nn.Module):
    """Environment 0 pushes left (episodes of ~10 steps); environment 1 balances the pole
    (episodes last until the 50-step time limit)."""

    def get_initial_predict_state(self, batch_size):
        return ()

    def predict_step(self, time_step, state):
        angle, angular_velocity = time_step.observation[:, 2], time_step.observation[:, 3]
        balance = (angle + angular_velocity > 0).long()
        return AlgStep(output=torch.stack([torch.zeros_like(balance[0]), balance[1]]))


def test_each_environment_contributes_a_fixed_share_so_short_episodes_are_not_favoured():
    # Counting the first 4 episodes to end over both environments took environment 0's four
    # short episodes and none of environment 1's long ones.
    env = load("CartPole-v1", 2, seed=0, max_episode_steps=50)
    try:
        result = evaluate_episodes(LeftHereBalanceThere(), env, 4)
    finally:
        env.close()
    assert sorted(result["lengths"])[2:] == [50, 50]
    assert all(n < 20 for n in sorted(result["lengths"])[:2])


class Still(torch.nn.Module):
    """No torque on Pendulum (episodes of 200 steps)."""

    def get_initial_predict_state(self, batch_size):
        return ()

    def predict_step(self, time_step, state):
        return AlgStep(output=torch.zeros(time_step.reward.shape[0], 1))


def test_a_long_stretch_without_an_episode_ending_is_warned_about(monkeypatch, caplog):
    # Before, an environment without a time limit kept evaluation running without a word.
    monkeypatch.setattr(evaluator, "STEPS_WITHOUT_AN_EPISODE_WARNING", 30)
    for env_name, algorithm, warned in (("Pendulum-v1", Still(), True),
                                        ("CartPole-v1", AlwaysLeft(), False)):
        env = load(env_name, 2, seed=0)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger=evaluator.__name__):
            evaluate_episodes(algorithm, env, 2, max_steps=40)
        env.close()
        messages = [r.getMessage() for r in caplog.records]
        assert messages == ([f"evaluation on {env_name}: no episode has ended in 30 steps; an "
                             f"environment that never ends its episodes keeps evaluation "
                             f"running forever: give it a time limit (load.max_episode_steps) "
                             f"or set TrainerConfig.evaluate = False"] if warned else [])
