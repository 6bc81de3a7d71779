"""examples/a2c.py: GAE (Schulman et al. 2016, eq. 16) against a direct float64 sum, across
a termination, a truncation and an episode cut by a restarted environment."""

import numpy as np
import torch

from examples.a2c import A2C, A2CInfo
from rlf.data_structures import StepType
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST


def _gae_reference(step_type, discount, reward, value, gamma, lam):
    """A_t = sum_k (gamma lambda)^k prod_{j<k} d_{t+j+1} delta_{t+k}, over the steps
    t, t+1, ... that each start a transition (not LAST, not followed by FIRST)."""
    t_len = len(step_type)
    starts = [step_type[t] != L and step_type[t + 1] != F for t in range(t_len - 1)]
    adv = np.zeros(t_len)
    for t in range(t_len - 1):
        weight = 1.0
        for u in range(t, t_len - 1):
            if not starts[u]:
                break
            delta = reward[u + 1] + gamma * discount[u + 1] * value[u + 1] - value[u]
            adv[t] += weight * delta
            weight *= gamma * lam * discount[u + 1]
    return adv


def test_gae_matches_a_direct_sum_at_episode_ends_and_cuts():
    gamma, lam = 0.9, 0.8
    alg = A2C(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1), gamma=gamma,
              td_lambda=lam)
    #           terminated       truncated        cut (restart without LAST)
    step_type = [F, M, L, F, M, M, L, F, M, M, F, M, M]
    discount = [1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1]
    rng = np.random.default_rng(0)
    reward, value = rng.normal(size=13), rng.normal(size=13)
    info = A2CInfo(reward=torch.tensor(reward, dtype=torch.float64)[:, None],
                   step_type=torch.tensor(step_type, dtype=torch.int32)[:, None],
                   discount=torch.tensor(discount, dtype=torch.float64)[:, None],
                   action=torch.zeros(13, 1, dtype=torch.int64),
                   log_prob=torch.ones(13, 1, dtype=torch.float64),
                   entropy=torch.zeros(13, 1, dtype=torch.float64),
                   value=torch.tensor(value)[:, None])
    loss = alg.calc_loss(info)
    expected = _gae_reference(step_type, discount, reward, value, gamma, lam)
    # pg_loss = -A_t * log_prob with log_prob 1, over the 12 transitions (the last step has
    # no successor in the sequence)
    assert loss.loss.shape == (12, 1)
    np.testing.assert_allclose(-loss.extra["pg_loss"][:, 0].numpy(), expected[:-1],
                               rtol=1e-12)
    assert expected[9] == 0 and expected[2] == 0 and expected[6] == 0  # no transition
    assert expected[8] != 0  # the step before the cut still bootstraps from the cut state
