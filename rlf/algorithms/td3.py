"""TD3Algorithm: twin delayed deep deterministic policy gradient (Fujimoto et al. 2018,
"Addressing Function Approximation Error in Actor-Critic Methods", algorithm 1).

Twin critics with the clipped double-Q target, target policy smoothing, and an actor and
target networks updated every ``policy_delay`` critic updates. The delay is the actor
optimizer's ``every`` (``add_optimizer``): ``calc_loss`` computes the actor's term only when
that optimizer is due, and each term trains its own optimizer's parameters only. Trains from
the replay buffer on single transitions (``mini_batch_length = 2``); experience layout: see
``value_ops``.
"""

from __future__ import annotations

from typing import Any

import gin
import torch

from rlf.algorithms.data_needs import TRANSITIONS
from rlf.algorithms.action_bounds import (ActionBounds, check_continuous,
                                          uniform_start_action)
from rlf.algorithms.optimization import check_required_optimizers
from rlf.algorithms.rl_algorithm import RLAlgorithm, check_unit_interval
from rlf.algorithms.target_network import TargetUpdater, make_target_network
from rlf.algorithms.transitions import (TransitionInfo, transition_observations,
                                        transition_train_step, twin_critics)
from rlf.data_structures import AlgStep, LossInfo
from rlf.nest.utils import batch_apply
from rlf.networks import CriticNetwork, DeterministicActorNetwork
from rlf.utils import distributed
from rlf.utils.common import read_only

__all__ = ["TD3Algorithm", "TD3Info", "smoothed_target_action", "clipped_double_q_target"]


#: TD3's training info: the shared ``TransitionInfo`` (the name is kept for user code).
TD3Info = TransitionInfo


def smoothed_target_action(target_action: torch.Tensor, noise: torch.Tensor,
                           noise_clip: torch.Tensor, low: torch.Tensor,
                           high: torch.Tensor) -> torch.Tensor:
    r"""Target policy smoothing (Fujimoto et al. 2018, eq. 15):

    $$
    a' = \mathrm{clip}\big(\mu'(x') + \mathrm{clip}(\epsilon, -c, c), a_{low}, a_{high}\big)
    $$

    Args:
        target_action: ``[..., d]`` ``mu'(x')`` of the target actor.
        noise: ``[..., d]`` ``epsilon ~ N(0, sigma^2)``.
        noise_clip: ``c``, broadcastable to ``[..., d]`` (>= 0).
        low, high: the action bounds, broadcastable to ``[..., d]``.

    Returns:
        ``[..., d]`` smoothed target actions.
    """
    noise = torch.maximum(torch.minimum(noise, noise_clip), -noise_clip)
    return torch.maximum(torch.minimum(target_action + noise, high), low)


def clipped_double_q_target(reward: torch.Tensor, discount: torch.Tensor,
                            next_q1: torch.Tensor, next_q2: torch.Tensor) -> torch.Tensor:
    r"""The clipped double-Q target (Fujimoto et al. 2018, eq. 10):
    $y = r + \gamma_{t+1} \min(Q'_1(x', a'), Q'_2(x', a'))$.

    Args:
        reward: ``[...]`` ``r`` of the transition.
        discount: ``[...]`` ``gamma * d`` (0 after a termination).
        next_q1, next_q2: ``[...]`` the target critics at the smoothed target action.

    Returns:
        ``[...]`` targets.
    """
    return reward + discount * torch.minimum(next_q1, next_q2)


@gin.configurable
class TD3Algorithm(RLAlgorithm):
    """TD3 with a deterministic actor, twin critics and Polyak-averaged targets of both,
    each trained by its own optimizer (``add_optimizer`` named ``"actor"`` and
    ``"critic"``; the actor's with ``every = policy_delay``).

    Exploration adds ``N(0, (exploration_noise * s)^2)`` to ``mu(x)`` and clips to the
    bounds, with ``s`` half the action range; the target smoothing noise and its clip are in
    the same units (the paper's 0.1, 0.2 and 0.5 for actions in ``[-1, 1]``). Until the
    first gradient update (``TrainerConfig.initial_collect_steps``) actions are uniform
    within the bounds (the paper's start steps).

    Args:
        observation_spec, action_spec, reward_spec, env, config: see ``RLAlgorithm`` (the last
            three as keywords); the action is a Box with finite bounds.
        actor_network_ctor: ``ctor(observation_spec, action_spec)`` -> ``mu(x)`` module
            returning actions inside the bounds.
        critic_network_ctor: ``ctor(observation_spec, action_spec)`` -> ``Q(x, a)`` module,
            built twice.
        gamma: discount ``gamma``.
        exploration_noise: the behaviour noise's standard deviation ``sigma``.
        target_policy_noise: the smoothing noise's standard deviation ``sigma~``.
        target_noise_clip: the smoothing noise's clip ``c``.
        policy_delay: critic updates per actor and target update (``d``).
        target_update_tau: Polyak rate of the target networks (``tau``).
        actor_optimizer, critic_optimizer: optimizer classes or factories for the actor
            and the two critics (gin: ``@actor/torch.optim.Adam``); both are needed.
        name, gradient_clipping, ...: see ``Algorithm``.

    Raises:
        ValueError: if an optimizer is missing or cannot be called, the action spec is not
            bounded and continuous, ``gamma`` is outside ``[0, 1]``, a noise setting is
            negative, or ``policy_delay < 1``.
    """

    # Registered buffers.
    _exploration_std: torch.Tensor
    _target_noise_std: torch.Tensor
    _target_noise_clip: torch.Tensor

    def __init__(self,
                 observation_spec,
                 action_spec,
                 actor_network_ctor=DeterministicActorNetwork,
                 critic_network_ctor=CriticNetwork,
                 gamma: float = 0.99,
                 exploration_noise: float = 0.1,
                 target_policy_noise: float = 0.2,
                 target_noise_clip: float = 0.5,
                 policy_delay: int = 2,
                 target_update_tau: float = 0.005,
                 actor_optimizer: Any = None,
                 critic_optimizer: Any = None,
                 name: str = "TD3Algorithm",
                 **kwargs):
        check_unit_interval(name, gamma=gamma)
        check_required_optimizers(name, "TD3Algorithm",
                                  actor_optimizer=actor_optimizer,
                                  critic_optimizer=critic_optimizer)
        for key, value in (("exploration_noise", exploration_noise),
                           ("target_policy_noise", target_policy_noise),
                           ("target_noise_clip", target_noise_clip)):
            if not value >= 0:
                raise ValueError(f"{name}: {key} must be >= 0, got {value}")
        if not (isinstance(policy_delay, int) and policy_delay >= 1):
            raise ValueError(f"{name}: policy_delay must be an int >= 1, got {policy_delay!r}")
        check_continuous(name, action_spec)
        super().__init__(observation_spec, action_spec, is_on_policy=False, name=name,
                         metric_discount=gamma, data_needs=TRANSITIONS, **kwargs)
        self._actor = actor_network_ctor(observation_spec, action_spec)
        self._critics, target_critics = twin_critics(critic_network_ctor, observation_spec,
                                                     action_spec)
        self._target_actor = make_target_network(self._actor)
        self._target_critics = target_critics
        self._target_updater = TargetUpdater([self._actor, self._critics],
                                             [self._target_actor, self._target_critics],
                                             target_update_tau, policy_delay)
        self._gamma = gamma
        self._policy_delay = policy_delay
        self._bounds = ActionBounds(action_spec)
        scale = self._bounds.half_range
        self.register_buffer("_exploration_std", exploration_noise * scale, persistent=False)
        self.register_buffer("_target_noise_std", target_policy_noise * scale,
                             persistent=False)
        self.register_buffer("_target_noise_clip", target_noise_clip * scale,
                             persistent=False)
        self.add_optimizer(actor_optimizer, self._actor, name="actor", every=policy_delay)
        self.add_optimizer(critic_optimizer, self._critics, name="critic")

    actor = read_only("_actor", "The actor mu.")
    critics = read_only("_critics", "The two critics (an nn.ModuleList).")
    target_actor = read_only("_target_actor", "The target actor mu'.")
    target_critics = read_only("_target_critics", "The target critics (an nn.ModuleList).")

    def predict_step(self, time_step, state) -> AlgStep:
        """``mu(x)``, without noise."""
        return AlgStep(output=self._actor(time_step.observation), state=state)

    def rollout_step(self, time_step, state) -> AlgStep:
        """``clip(mu(x) + N(0, sigma^2))``, or uniform within the bounds before the first
        update."""
        mu = self._actor(time_step.observation)
        action = self._bounds.clip(mu + distributed.randn_like(mu) * self._exploration_std)
        action = uniform_start_action(action, self._bounds, self.num_updates)
        return AlgStep(output=action, state=state, info=TD3Info(action=action))

    def train_step(self, time_step, state, rollout_info: TD3Info) -> AlgStep:
        """The step's observation, reward, discount and replayed action, for
        ``calc_loss`` (``transition_train_step``)."""
        return transition_train_step(self, time_step, state, rollout_info)

    def calc_loss(self, info: TD3Info) -> LossInfo:
        """Over the ``[T-1, B]`` transitions ``t -> t+1``: the critics' term
        ``sum_i (Q_i(x_t, a_t) - y_t)^2`` with ``y_t`` the clipped double-Q target at the
        smoothed target action; when the actor's optimizer is due, the actor's term
        ``-Q_1(x_t, mu(x_t))`` (eq. 6's deterministic policy gradient)."""
        head, tail = transition_observations(info.observation)
        with torch.no_grad():
            target_mu = batch_apply(self._target_actor, tail)
            # A batch draw over the [B, T-1] rows (batch-major): N learners draw as one.
            noise = distributed.randn_like(target_mu.transpose(0, 1), batch_dim=0
                                           ).transpose(0, 1)
            next_action = smoothed_target_action(
                target_mu, noise * self._target_noise_std,
                self._target_noise_clip, self._bounds.low, self._bounds.high)
            target = clipped_double_q_target(
                info.reward[1:].float(), self._gamma * info.discount[1:].float(),
                batch_apply(self._target_critics[0], tail, next_action),
                batch_apply(self._target_critics[1], tail, next_action))
        q = [batch_apply(c, head, info.action[:-1]) for c in self._critics]
        critic_loss = sum((qi - target) ** 2 for qi in q)
        loss, extra = {"critic": critic_loss}, {"critic_loss": critic_loss,
                                                "q": q[0].detach()}
        if self.is_due("actor"):
            actor_loss = -batch_apply(self._critics[0], head, batch_apply(self._actor, head))
            loss["actor"] = extra["actor_loss"] = actor_loss
        return LossInfo(loss=loss, extra=extra)

    def after_update(self, root_inputs, info) -> None:
        """Every ``policy_delay`` updates (with the actor's step) moves the target actor and
        critics towards theirs."""
        self._target_updater()
