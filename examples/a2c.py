"""A2C with GAE in about 100 lines: a research variant written as a subclass of ``RLAlgorithm``.

Mnih et al. 2016 (A3C, synchronous variant) with generalised advantage estimation (Schulman
et al. 2016, eq. 16). On-policy by default (trains on each unroll's own forward pass); with
``A2C.is_on_policy = False`` the same class trains from the replay buffer and ``train_step``
recomputes the forward pass. Run: ``python -m rlf.bin.train --conf examples/a2c_cartpole.gin``.
"""

from typing import NamedTuple

import gin
import torch
from torch import nn

from rlf.algorithms import RLAlgorithm, check_unit_interval
from rlf.algorithms import value_ops
from rlf.data_structures import AlgStep, LossInfo
from rlf.utils.deprecation import renamed


class A2CInfo(NamedTuple):
    """Per-step information, ``[B]`` in steps and ``[T, B]`` in ``calc_loss``."""
    reward: torch.Tensor = ()
    step_type: torch.Tensor = ()
    discount: torch.Tensor = ()
    action: torch.Tensor = ()
    log_prob: torch.Tensor = ()
    entropy: torch.Tensor = ()
    value: torch.Tensor = ()


@gin.configurable
class A2C(RLAlgorithm):
    """Advantage actor-critic for a flat observation and a Discrete action.

    Args:
        hidden: sizes of the hidden layers of the actor and the critic.
        gamma: discount; td_lambda: GAE's lambda; td_loss_weight, entropy_regularization:
        loss weights (``gae_lambda``, ``value_weight``, ``entropy_weight``: deprecated names).
        Others: see ``RLAlgorithm``.
    """

    def __init__(self, observation_spec, action_spec, hidden: tuple = (64, 64), gamma=0.99,
                 td_lambda=0.95, td_loss_weight=0.5, entropy_regularization=0.01,
                 is_on_policy=True, name="A2C", gae_lambda=None, value_weight=None,
                 entropy_weight=None, **kwargs):
        super().__init__(observation_spec, action_spec, is_on_policy=is_on_policy, name=name,
                         **kwargs)
        n_in, n_act = observation_spec.numel, int(action_spec.maximum) + 1

        def mlp(n_out):
            layers, n = [], n_in
            for h in hidden:
                layers += [nn.Linear(n, h), nn.Tanh()]
                n = h
            return nn.Sequential(*layers, nn.Linear(n, n_out))

        self._actor, self._critic = mlp(n_act), mlp(1)
        self._gamma = gamma
        self._lambda = renamed("A2C", "td_lambda", td_lambda, "gae_lambda", gae_lambda, 0.95)
        check_unit_interval(name, gamma=gamma, td_lambda=self._lambda)
        self._value_weight = renamed("A2C", "td_loss_weight", td_loss_weight, "value_weight",
                                     value_weight, 0.5)
        self._entropy_weight = renamed("A2C", "entropy_regularization", entropy_regularization,
                                       "entropy_weight", entropy_weight, 0.01)

    def _forward(self, time_step, action=None):
        obs = time_step.observation.flatten(1).float()
        dist = torch.distributions.Categorical(logits=self._actor(obs))
        if action is None:
            action = dist.sample()
        return action, A2CInfo(
            reward=self.weighted_reward(time_step.reward), step_type=time_step.step_type,
            discount=time_step.discount, action=action, log_prob=dist.log_prob(action),
            entropy=dist.entropy(), value=self._critic(obs).squeeze(-1))

    def rollout_step(self, time_step, state):
        action, info = self._forward(time_step)
        if not self.on_policy:  # replay stores only what train_step needs
            info = A2CInfo(action=action)
        return AlgStep(output=action, state=(), info=info)

    def train_step(self, time_step, state, rollout_info):
        return AlgStep(output=rollout_info.action, state=(),
                       info=self._forward(time_step, rollout_info.action)[1])

    def calc_loss(self, info: A2CInfo) -> LossInfo:
        # GAE over the T-1 transitions t -> t+1 (0 where a step starts none: a LAST or a
        # cut); the loss is [T-1, B], which the base class masks with the same steps.
        value = info.value.detach()
        adv = value_ops.generalized_advantage_estimation(
            info.reward, value, info.step_type, self._gamma * info.discount, self._lambda)
        returns = adv + value[:-1]
        pg_loss = -adv * info.log_prob[:-1]
        value_loss = 0.5 * (returns - info.value[:-1]) ** 2
        entropy = info.entropy[:-1]
        loss = pg_loss + self._value_weight * value_loss - self._entropy_weight * entropy
        return LossInfo(loss=loss, extra={"pg_loss": pg_loss, "value_loss": value_loss,
                                          "entropy": entropy})
