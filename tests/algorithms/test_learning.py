"""The on-policy and off-policy loops learn CartPole-v1 with the A2C example."""

import functools

import pytest
import torch

from examples.a2c import A2C
from rlf.algorithms import TrainerConfig
from rlf.environments import load
from rlf.unrollers import SyncUnroller


def _train(on_policy: bool, max_iterations: int) -> float:
    torch.manual_seed(0)
    env = load("CartPole-v1", 8, seed=0)
    extra = {} if on_policy else dict(whole_replay_buffer_training=True,
                                      clear_replay_buffer=True)
    config = TrainerConfig(unroll_length=16, num_iterations=max_iterations, **extra)
    alg = A2C(env.observation_spec(), env.action_spec(), env=env, config=config,
              is_on_policy=on_policy, gradient_clipping=0.5,
              optimizer=functools.partial(torch.optim.Adam, lr=2e-3))
    alg.set_unroller(SyncUnroller(env, alg))
    best = 0.0
    try:
        for i in range(1, max_iterations + 1):
            alg.train_iter()
            if i % 25 == 0:
                best = max(best, float(alg.get_metrics()[2].result()))
                if best >= 195:
                    break
    finally:
        env.close()
    return best


@pytest.mark.parametrize("on_policy", [True, False], ids=["on_policy", "off_policy"])
def test_a2c_learns_cartpole(on_policy, one_torch_thread):
    # A random policy averages ~22; 195 is the classic CartPole-v0 "solved" level.
    assert _train(on_policy, 600) >= 195
