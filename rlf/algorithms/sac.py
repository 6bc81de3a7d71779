"""SACAlgorithm: soft actor-critic with a learned temperature (Haarnoja et al. 2018, "Soft
Actor-Critic Algorithms and Applications", algorithm 1).

Trains from the replay buffer on sampled sequences (``mini_batch_length = 2``: single
transitions): the critics' loss is over the ``[T-1, B]`` transitions, the actor's and the
temperature's over the steps that start one. ``train_step`` samples the policy at every step;
``calc_loss`` evaluates the critics only where a transition needs them (the online critics at
its first step, the target critics at its second), as CleanRL's ``sac_continuous_action``
does. Experience layout: see ``value_ops``.
"""

from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional, Union

import gin
import torch
from torch import nn

from rlf.algorithms.data_needs import TRANSITIONS
from rlf.algorithms.action_bounds import ActionBounds, uniform_start_action
from rlf.algorithms.optimization import check_required_optimizers
from rlf.algorithms.rl_algorithm import RLAlgorithm, check_unit_interval
from rlf.algorithms.target_network import TargetUpdater
from rlf.algorithms.transitions import transition_observations, twin_critics
from rlf.data_structures import AlgStep, LossInfo
from rlf.nest.utils import batch_apply
from rlf.networks import ActorNetwork, CriticNetwork
from rlf.tensor_specs import BoundedTensorSpec
from rlf.utils import summary
from rlf.utils.common import read_only

__all__ = ["SACAlgorithm", "SACInfo", "SACTransitions", "sac_losses", "soft_q_target"]


class SACInfo(NamedTuple):
    """Per step: the action (all ``rollout_step`` records); in training, ``[T, B]``:

    Attributes:
        action: the replayed action ``a_t``, ``[T, B, ...]``.
        reward, discount: ``[T, B]``, of the step.
        observation: ``x_t``, ``[T, B, ...]``.
        new_action: ``[T, B, ...]`` ``a' ~ pi(.|x_t)``, the reparameterised sample (gradient
            into the actor).
        log_pi: ``[T, B]`` ``log pi(a'|x_t)`` (gradient into the actor).
    """

    action: Any = ()
    reward: Any = ()
    discount: Any = ()
    observation: Any = ()
    new_action: Any = ()
    log_pi: Any = ()


class SACTransitions(NamedTuple):
    """What SAC's losses need of the ``[T-1, B]`` transitions ``t -> t+1``.

    Attributes:
        reward: ``[T-1, B]`` ``r_{t+1}``.
        discount: ``[T-1, B]`` ``gamma * d_{t+1}`` (0 after a termination).
        critics: ``[T-1, B, 2]`` ``Q_i(x_t, a_t)`` of the twin critics (with gradient).
        next_q: ``[T-1, B]`` ``min_i Q'_i(x_{t+1}, a'_{t+1})`` of the target critics (no
            gradient).
        next_log_pi: ``[T-1, B]`` ``log pi(a'_{t+1}|x_{t+1})``.
        q_new: ``[T-1, B]`` ``min_i Q_i(x_t, a'_t)`` (gradient into the actor only).
        log_pi: ``[T-1, B]`` ``log pi(a'_t|x_t)`` (gradient into the actor).
    """

    reward: torch.Tensor
    discount: torch.Tensor
    critics: torch.Tensor
    next_q: torch.Tensor
    next_log_pi: torch.Tensor
    q_new: torch.Tensor
    log_pi: torch.Tensor


def soft_q_target(reward: torch.Tensor, discount: torch.Tensor, next_q: torch.Tensor,
                  next_log_pi: torch.Tensor, alpha: Union[float, torch.Tensor]) -> torch.Tensor:
    r"""The soft Bellman target (Haarnoja et al. 2018, eqs. 3 and 5):

    $$
    y = r + \gamma_{t+1} \big(\min_i Q'_i(x', a') - \alpha \log\pi(a'|x')\big)
    $$

    Args:
        reward: ``[...]`` ``r`` of the transition.
        discount: ``[...]`` ``gamma * d`` (0 after a termination).
        next_q: ``[...]`` ``min_i Q'_i(x', a')`` of the target critics, ``a' ~ pi(.|x')``.
        next_log_pi: ``[...]`` ``log pi(a'|x')``.
        alpha: the temperature.

    Returns:
        ``[...]`` targets.
    """
    return reward + discount * (next_q - alpha * next_log_pi)


def sac_losses(transitions: SACTransitions, log_alpha: torch.Tensor,
               target_entropy: float) -> LossInfo:
    r"""SAC's three losses over transitions (Haarnoja et al. 2018, eqs. 5, 7 and 18), each
    ``[T-1, B]`` float32:

    - the critics' ``0.5 sum_i (Q_i(x_t, a_t) - y_t)^2`` with the soft target ``y_t``
      (``soft_q_target``, no gradient);
    - the actor's ``alpha log pi(a'_t|x_t) - min_i Q_i(x_t, a'_t)``;
    - the temperature's ``-log alpha (log pi(a'_t|x_t) + target_entropy)``.

    Args:
        transitions: the ``[T-1, B]`` quantities.
        log_alpha: scalar ``log alpha`` (the temperature's parameter; only the temperature's
            loss takes its gradient).
        target_entropy: the entropy the temperature steers towards.

    Returns:
        ``LossInfo`` whose ``loss`` is the dict ``{"critic", "actor", "alpha"}`` of the three
        terms, each training its own optimizer (``add_optimizer(name=...)``), and ``extra``
        each of them (``critic_loss``, ``actor_loss``, ``alpha_loss``).
    """
    t = transitions
    alpha = log_alpha.detach().exp()
    with torch.no_grad():
        target = soft_q_target(t.reward.float(), t.discount.float(), t.next_q, t.next_log_pi,
                               alpha)
    critic_loss = 0.5 * ((t.critics - target.unsqueeze(-1)) ** 2).sum(-1)
    actor_loss = alpha * t.log_pi - t.q_new
    alpha_loss = -log_alpha * (t.log_pi.detach() + target_entropy)
    return LossInfo(loss={"critic": critic_loss, "actor": actor_loss, "alpha": alpha_loss},
                    extra={"critic_loss": critic_loss, "actor_loss": actor_loss,
                           "alpha_loss": alpha_loss})


@gin.configurable
class SACAlgorithm(RLAlgorithm):
    """SAC with twin Q critics, Polyak-averaged target critics, a tanh-squashed Gaussian
    actor and a learned temperature ``alpha`` (target entropy ``-|A|`` by default), each with
    its own optimizer (``add_optimizer``, named ``"actor"``, ``"critic"`` and ``"alpha"``):
    each loss term trains its own optimizer's parameters only, so the actor's loss, which
    passes through the critics, leaves the critics' gradients alone.

    Until the first gradient update (``TrainerConfig.initial_collect_steps``) actions are
    drawn uniformly within the bounds, as SB3's and CleanRL's ``learning_starts``.

    Args:
        observation_spec, action_spec, reward_spec, env, config: see ``RLAlgorithm`` (the last
            three as keywords); the action is a Box with finite bounds.
        actor_network_ctor: ``ctor(observation_spec, action_spec)`` -> module returning the
            ``(loc, scale)`` of a ``TanhNormalHead`` (its ``policy_head``).
        critic_network_ctor: ``ctor(observation_spec, action_spec)`` -> ``Q(x, a)`` module,
            built twice.
        gamma: discount ``gamma``.
        initial_alpha: the temperature's initial value.
        target_entropy: the temperature's target entropy; None for ``-|A|`` (the number of
            action elements).
        target_update_tau: Polyak rate of the target critics (``tau``, 0.005 in the paper).
        target_update_period: gradient updates between target updates.
        actor_optimizer, critic_optimizer, alpha_optimizer: optimizer classes or factories
            for the actor, the two critics and ``log alpha`` (gin: ``@actor/torch.optim.Adam``
            with ``actor/torch.optim.Adam.lr = 3e-4``); all three are needed.
        random_actions_before_training: act uniformly at random until the first update.
        name, gradient_clipping, ...: see ``Algorithm``.

    Raises:
        ValueError: if one of the three optimizers is missing or cannot be called, the action
            spec is not bounded and continuous, ``gamma`` is outside ``[0, 1]``, or
            ``initial_alpha <= 0``.
    """

    def __init__(self,
                 observation_spec,
                 action_spec,
                 actor_network_ctor=ActorNetwork,
                 critic_network_ctor=CriticNetwork,
                 gamma: float = 0.99,
                 initial_alpha: float = 1.0,
                 target_entropy: Optional[float] = None,
                 target_update_tau: float = 0.005,
                 target_update_period: int = 1,
                 actor_optimizer: Any = None,
                 critic_optimizer: Any = None,
                 alpha_optimizer: Any = None,
                 random_actions_before_training: bool = True,
                 name: str = "SACAlgorithm",
                 **kwargs):
        check_unit_interval(name, gamma=gamma)
        check_required_optimizers(name, "SACAlgorithm",
                                  actor_optimizer=actor_optimizer,
                                  critic_optimizer=critic_optimizer,
                                  alpha_optimizer=alpha_optimizer)
        if not initial_alpha > 0:
            raise ValueError(f"{name}: initial_alpha (the temperature, learned as its log) "
                             f"must be > 0, got {initial_alpha}")
        if not action_spec.is_continuous:
            raise ValueError(f"{name} needs a continuous action space (a Box), got "
                             f"{action_spec}")
        if not isinstance(action_spec, BoundedTensorSpec):
            raise ValueError(f"{name} squashes actions into the Box's bounds and needs finite "
                             f"ones; the action space has none ({action_spec}): give the "
                             f"environment's Box finite bounds")
        super().__init__(observation_spec, action_spec, is_on_policy=False, name=name,
                         metric_discount=gamma, data_needs=TRANSITIONS, **kwargs)
        self._actor = actor_network_ctor(observation_spec, action_spec)
        self._critics, self._target_critics = twin_critics(critic_network_ctor,
                                                           observation_spec, action_spec)
        self._target_updater = TargetUpdater([self._critics], [self._target_critics],
                                             target_update_tau, target_update_period)
        self._log_alpha = nn.Parameter(torch.tensor(math.log(initial_alpha)))
        self._target_entropy = (-float(action_spec.numel) if target_entropy is None
                                else float(target_entropy))
        self._gamma = gamma
        self._random_actions = random_actions_before_training
        self._bounds = ActionBounds(action_spec)
        self.add_optimizer(actor_optimizer, self._actor, name="actor")
        self.add_optimizer(critic_optimizer, self._critics, name="critic")
        self.add_optimizer(alpha_optimizer, self._log_alpha, name="alpha")

    @property
    def alpha(self) -> torch.Tensor:
        """The temperature ``exp(log alpha)``, a scalar tensor (with gradient)."""
        return self._log_alpha.exp()

    actor = read_only("_actor", "The actor network.")
    critics = read_only("_critics", "The two critics (an nn.ModuleList).")
    target_critics = read_only("_target_critics", "The target critics (an nn.ModuleList).")

    def predict_step(self, time_step, state) -> AlgStep:
        """The squashed mean action."""
        params = self._actor(time_step.observation)
        return AlgStep(output=self._actor.policy_head.sample(params, greedy=True), state=state)

    def rollout_step(self, time_step, state) -> AlgStep:
        """``a ~ pi(.|x)``, or uniform within the bounds before the first update."""
        params = self._actor(time_step.observation)
        action = self._actor.policy_head.sample(params)
        if self._random_actions:
            action = uniform_start_action(action, self._bounds, self.num_updates)
        return AlgStep(output=action, state=state, info=SACInfo(action=action))

    @staticmethod
    def _critic_values(critics, observation, action) -> torch.Tensor:
        """``[T', B, ...]`` inputs -> ``[T', B, 2]`` values of the twin ``critics``."""
        return batch_apply(lambda x, a: torch.stack([c(x, a) for c in critics], -1),
                           observation, action)

    def train_step(self, time_step, state, rollout_info: SACInfo) -> AlgStep:
        """A reparameterised action ``a' ~ pi(.|x_t)`` with its ``log pi``; the step's
        observation and replayed action pass through for ``calc_loss``."""
        obs = time_step.observation
        new_action, log_pi = self._actor.policy_head.rsample_with_log_prob(self._actor(obs))
        return AlgStep(output=rollout_info.action, state=state, info=SACInfo(
            action=rollout_info.action, reward=self.weighted_reward(time_step.reward),
            discount=time_step.discount, observation=obs, new_action=new_action,
            log_pi=log_pi))

    def calc_loss(self, info: SACInfo) -> LossInfo:
        """``sac_losses`` over the ``[T-1, B]`` transitions ``t -> t+1``: the critics at
        ``(x_t, a_t)`` and at ``(x_t, a'_t)`` (the actor's term, which trains the actor
        only); the target critics at ``(x_{t+1}, a'_{t+1})``."""
        head, tail = transition_observations(info.observation)
        q_new = self._critic_values(self._critics, head, info.new_action[:-1])
        with torch.no_grad():
            next_q = self._critic_values(self._target_critics, tail, info.new_action[1:])
        transitions = SACTransitions(
            reward=info.reward[1:], discount=self._gamma * info.discount[1:].float(),
            critics=self._critic_values(self._critics, head, info.action[:-1]),
            next_q=next_q.min(-1).values, next_log_pi=info.log_pi[1:],
            q_new=q_new.min(-1).values, log_pi=info.log_pi[:-1])
        if summary.should_record_summaries():
            summary.scalar(f"{self._name}/alpha", self.alpha.detach())
            summary.scalar(f"{self._name}/entropy", -info.log_pi.detach().mean())
        return sac_losses(transitions, self._log_alpha, self._target_entropy)

    def after_update(self, root_inputs, info) -> None:
        """Moves the target critics towards the critics."""
        self._target_updater()
