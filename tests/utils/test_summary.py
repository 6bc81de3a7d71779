"""rlf.utils.summary's global counter as the module tells its callers to use it."""

import functools

import torch

from examples.a2c import A2C
from rlf.algorithms import TrainerConfig
from rlf.environments import load
from rlf.utils import summary


def test_train_iter_advances_the_counter_once_so_the_documented_loop_adds_nothing():
    # The module's example incremented the counter around train_iter, which already does:
    # each iteration counted twice.
    env = load("CartPole-v1", 2, seed=0)
    alg = A2C(env.observation_spec(), env.action_spec(), hidden=(8,), env=env,
              config=TrainerConfig(unroll_length=4),
              optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    summary.set_global_counter(0)
    try:
        for _ in range(3):
            alg.train_iter()
        assert summary.get_global_counter() == 3
    finally:
        summary.set_global_counter(0)
        env.close()
    example = summary.__doc__.split("Typical use")[1].split("\n\n")[1]
    assert "train_iter()" in example and "increment_global_counter" not in example
