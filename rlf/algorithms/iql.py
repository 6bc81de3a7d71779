"""IQLAlgorithm: implicit Q-learning for offline RL (Kostrikov et al. 2021, "Offline
Reinforcement Learning with Implicit Q-Learning", algorithm 1).

The value ``V(x)`` is fitted by expectile regression to the target critics' ``Q(x, a)`` on
the dataset's actions only (eq. 5), the twin critics to ``r + gamma V(x')`` (eq. 6), and the
policy by advantage-weighted regression ``exp(beta (Q - V)) log pi(a|x)`` (eq. 7): no action
outside the dataset is ever evaluated. Each of the three terms trains its own optimizer
(``"value"``, ``"critic"``, ``"actor"``); all are computed from the same parameters in one
update. Trains on sampled transitions (``mini_batch_length = 2``), purely offline with
``TrainerConfig.unroll_length = 0`` and ``offline_buffer_dir``; the recorded action reaches
``train_step`` as ``rollout_info.action`` (``RLAlgorithm.offline_layout``).
"""

from __future__ import annotations

import math
from typing import Any

import gin
import torch
from torch import nn

from rlf.algorithms.data_needs import TRANSITIONS
from rlf.algorithms.action_bounds import ActionBounds, check_continuous
from rlf.algorithms.optimization import check_required_optimizers
from rlf.algorithms.rl_algorithm import RLAlgorithm, check_unit_interval
from rlf.algorithms.target_network import TargetUpdater
from rlf.algorithms.transitions import (TransitionInfo, transition_observations,
                                        transition_train_step, twin_critics)
from rlf.data_structures import AlgStep, LossInfo
from rlf.nest.utils import batch_apply
from rlf.networks import CriticNetwork, DeterministicActorNetwork, ValueNetwork
from rlf.utils import distributed
from rlf.utils.common import read_only

__all__ = ["IQLAlgorithm", "IQLInfo", "expectile_loss", "awr_weights"]


#: IQL's training info: the shared ``TransitionInfo`` (the name is kept for user code).
IQLInfo = TransitionInfo


def expectile_loss(diff: torch.Tensor, expectile: float) -> torch.Tensor:
    r"""The asymmetric squared loss of expectile regression (Kostrikov et al. 2021, eq. 5):
    $L_2^\tau(u) = |\tau - \mathbb{1}(u < 0)|\, u^2$ with $u = Q(x, a) - V(x)$.

    Args:
        diff: ``[...]`` ``u``.
        expectile: ``tau`` in ``(0, 1)``; 0.5 is the squared error's half.

    Returns:
        ``[...]`` losses.
    """
    weight = torch.where(diff < 0, 1.0 - expectile, expectile)
    return weight * diff ** 2


def awr_weights(advantage: torch.Tensor, temperature: float,
                max_weight: float = 100.0) -> torch.Tensor:
    r"""Advantage-weighted regression's weights (Kostrikov et al. 2021, eq. 7):
    $\min(\exp(\beta A), w_{max})$, without gradient.

    Args:
        advantage: ``[...]`` ``A = Q(x, a) - V(x)``.
        temperature: ``beta`` (the inverse temperature; 0: behaviour cloning).
        max_weight: the clip of the weights (the paper's code: 100).

    Returns:
        ``[...]`` weights.
    """
    return torch.exp(advantage.detach() * temperature).clamp(max=max_weight)


@gin.configurable
class IQLAlgorithm(RLAlgorithm):
    """IQL with twin critics and their Polyak-averaged targets, a value network, and a
    Gaussian policy (mean ``mu(x)`` squashed into the bounds, learned state-independent
    log standard deviation) trained by advantage-weighted regression.

    Args:
        observation_spec, action_spec, reward_spec, env, config: see ``RLAlgorithm`` (the last
            three as keywords); the action is a Box with finite bounds.
        actor_network_ctor: ``ctor(observation_spec, action_spec)`` -> the policy's mean
            ``mu(x)`` inside the bounds.
        critic_network_ctor: ``ctor(observation_spec, action_spec)`` -> ``Q(x, a)``, built
            twice.
        value_network_ctor: ``ctor(observation_spec)`` -> ``V(x)``.
        gamma: discount ``gamma``.
        expectile: ``tau`` of the value's expectile loss (0.7 for MuJoCo in the paper).
        temperature: ``beta`` of the policy's weights (3.0 for MuJoCo in the paper).
        max_weight: clip of ``exp(beta A)``.
        target_update_tau: Polyak rate of the target critics.
        actor_optimizer, critic_optimizer, value_optimizer: one each (gin scopes as SAC's);
            all are needed.
        name, gradient_clipping, ...: see ``Algorithm``.

    Raises:
        ValueError: if an optimizer is missing or cannot be called, the action spec is not
            a bounded Box, ``gamma`` is outside ``[0, 1]``, ``expectile`` outside
            ``(0, 1)``, or ``temperature`` or ``max_weight`` is negative.
    """

    def __init__(self,
                 observation_spec,
                 action_spec,
                 actor_network_ctor=DeterministicActorNetwork,
                 critic_network_ctor=CriticNetwork,
                 value_network_ctor=ValueNetwork,
                 gamma: float = 0.99,
                 expectile: float = 0.7,
                 temperature: float = 3.0,
                 max_weight: float = 100.0,
                 target_update_tau: float = 0.005,
                 actor_optimizer: Any = None,
                 critic_optimizer: Any = None,
                 value_optimizer: Any = None,
                 name: str = "IQLAlgorithm",
                 **kwargs):
        check_unit_interval(name, gamma=gamma)
        check_required_optimizers(name, "IQLAlgorithm",
                                  actor_optimizer=actor_optimizer,
                                  critic_optimizer=critic_optimizer,
                                  value_optimizer=value_optimizer)
        if not 0.0 < expectile < 1.0:
            raise ValueError(f"{name}: expectile must be in (0, 1), got {expectile}")
        if not (temperature >= 0 and max_weight >= 0):
            raise ValueError(f"{name}: temperature and max_weight must be >= 0, got "
                             f"{temperature} and {max_weight}")
        check_continuous(name, action_spec)
        super().__init__(observation_spec, action_spec, is_on_policy=False, name=name,
                         metric_discount=gamma, data_needs=TRANSITIONS, **kwargs)
        self._actor = actor_network_ctor(observation_spec, action_spec)
        self._log_std = nn.Parameter(torch.zeros(int(action_spec.numel)))
        self._critics, self._target_critics = twin_critics(critic_network_ctor,
                                                           observation_spec, action_spec)
        self._target_updater = TargetUpdater([self._critics], [self._target_critics],
                                             target_update_tau, 1)
        self._value = value_network_ctor(observation_spec)
        self._gamma, self._expectile = gamma, expectile
        self._temperature, self._max_weight = temperature, max_weight
        self._bounds = ActionBounds(action_spec)
        self.add_optimizer(actor_optimizer, [self._actor, self._log_std], name="actor")
        self.add_optimizer(critic_optimizer, self._critics, name="critic")
        self.add_optimizer(value_optimizer, self._value, name="value")

    critics = read_only("_critics", "The two critics (an nn.ModuleList).")
    target_critics = read_only("_target_critics", "The target critics (an nn.ModuleList).")
    value = read_only("_value", "The value network V.")

    def _scale(self) -> torch.Tensor:
        return self._log_std.clamp(-5.0, 2.0).exp()

    def log_prob(self, observation, action) -> torch.Tensor:
        """``log pi(a|x)`` of ``[B, ...]`` inputs, ``[B]`` float32: the diagonal Normal
        ``N(mu(x), sigma^2)`` summed over the action's elements."""
        mu = self._actor(observation).float()
        a = action.reshape(mu.shape).float()
        var = self._scale() ** 2
        log_p = -0.5 * (a - mu) ** 2 / var - self._scale().log() - 0.5 * math.log(2 * math.pi)
        return log_p.reshape(mu.shape[0], -1).sum(-1)

    def predict_step(self, time_step, state) -> AlgStep:
        """The mean ``mu(x)``."""
        return AlgStep(output=self._actor(time_step.observation), state=state)

    def rollout_step(self, time_step, state) -> AlgStep:
        """``a ~ N(mu(x), sigma^2)`` clipped to the bounds; records it."""
        mu = self._actor(time_step.observation)
        noise = distributed.randn_like(mu) * self._scale().view(mu.shape[1:])
        action = self._bounds.clip(mu + noise)
        return AlgStep(output=action, state=state, info=IQLInfo(action=action))

    def train_step(self, time_step, state, rollout_info: IQLInfo) -> AlgStep:
        """The step's observation, reward, discount and recorded action, for
        ``calc_loss`` (``transition_train_step``)."""
        return transition_train_step(self, time_step, state, rollout_info)

    def calc_loss(self, info: IQLInfo) -> LossInfo:
        """The three terms over the ``[T-1, B]`` transitions ``t -> t+1``:
        ``"value"``: ``L_2^tau(min_i Q'_i(x_t, a_t) - V(x_t))``; ``"critic"``:
        ``sum_i (r + gamma d V(x_{t+1}) - Q_i(x_t, a_t))^2``; ``"actor"``:
        ``-min(exp(beta (min_i Q'_i - V)), w_max) log pi(a_t|x_t)``."""
        (x, x_next), a = transition_observations(info.observation), info.action[:-1]
        with torch.no_grad():
            q_target = torch.minimum(*[batch_apply(c, x, a) for c in self._target_critics])
            v_next = batch_apply(self._value, x_next)
            target = info.reward[1:].float() + self._gamma * info.discount[1:].float() * v_next
        v = batch_apply(self._value, x)
        value_loss = expectile_loss(q_target - v, self._expectile)
        critic_loss = sum((batch_apply(c, x, a) - target) ** 2 for c in self._critics)
        weights = awr_weights(q_target - v, self._temperature, self._max_weight)
        actor_loss = -weights * batch_apply(self.log_prob, x, a)
        return LossInfo(loss={"value": value_loss, "critic": critic_loss, "actor": actor_loss},
                        extra={"value_loss": value_loss, "critic_loss": critic_loss,
                               "actor_loss": actor_loss, "advantage": (q_target - v).detach(),
                               "v": v.detach()})

    def after_update(self, root_inputs, info) -> None:
        """Moves the target critics towards the critics."""
        self._target_updater()
