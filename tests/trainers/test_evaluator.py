"""evaluate_episodes on a real CartPole: returns, lengths and the per-episode callback."""

import torch

from rlf.data_structures import AlgStep
from rlf.environments import load
from rlf.trainers import evaluate_episodes


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
    # With these seeds the 4th and 5th episodes end at the same step (two environments at
    # once): the 5th is dropped from both the result and the callback.
    assert [i for i, _, _ in seen] == [0, 1, 2, 3]
    assert [r for _, r, _ in seen] == result["returns"]
    assert [n for _, _, n in seen] == result["lengths"]
    # CartPole pays 1 per step, so an episode's return equals its length.
    assert all(r == n and 5 <= n <= 15 for _, r, n in seen)
