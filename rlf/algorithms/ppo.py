"""PPOAlgorithm: proximal policy optimisation with the clipped surrogate (Schulman et al. 2017).

Each iteration unrolls ``unroll_length`` steps of every environment without gradients,
computes GAE advantages and returns once on the whole unroll (``preprocess_experience``), then
trains ``num_updates_per_train_iter`` epochs over shuffled mini-batches (``MiniBatches``;
``mini_batch_length = 1`` gives mini-batches of single transitions, as in the paper and
CleanRL). Experience layout: see ``value_ops`` (step ``t`` holds the reward and discount of the
transition into it).
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import gin
import torch

from rlf.algorithms import value_ops
from rlf.algorithms.data_needs import DataNeeds
from rlf.algorithms.rl_algorithm import RLAlgorithm, check_unit_interval
from rlf.algorithms.schedules import Schedule, StepSchedule
from rlf.data_structures import AlgStep, LossInfo, valid_step_mask
from rlf.networks import ActorCriticNetwork, ClipToBounds
from rlf.networks.actor_critic import greedy_action
from rlf.utils import summary

__all__ = ["PPOAlgorithm", "PPOInfo", "ppo_clipped_surrogate"]


class PPOInfo(NamedTuple):
    """Per step: recorded at rollout (``action``, ``log_prob``, ``value``), added by
    ``preprocess_experience`` (``advantage``, ``returns``, ``valid``) and recomputed by
    ``train_step`` (``params``, ``new_value``). ``[B]`` in steps, ``[T, B]`` in
    ``calc_loss``."""

    action: Any = ()
    log_prob: Any = ()
    value: Any = ()
    advantage: Any = ()
    returns: Any = ()
    valid: Any = ()
    params: Any = ()
    new_value: Any = ()


def ppo_clipped_surrogate(log_prob: torch.Tensor, old_log_prob: torch.Tensor,
                          advantage: torch.Tensor, epsilon: float) -> torch.Tensor:
    r"""PPO's clipped surrogate loss (Schulman et al. 2017, eq. 7), negated to minimise:

    $$
    -\min(r A, \mathrm{clip}(r, 1 - \epsilon, 1 + \epsilon) A), \quad
    r = \exp(\log\pi - \log\pi_{old})
    $$

    Args:
        log_prob: ``[...]`` ``log pi(a|x)`` with gradient.
        old_log_prob: ``[...]`` the behaviour policy's, no gradient.
        advantage: ``[...]`` advantages, no gradient.
        epsilon: the clip range.

    Returns:
        ``[...]`` per-sample loss.
    """
    ratio = torch.exp(log_prob - old_log_prob)
    return -torch.min(ratio * advantage, ratio.clamp(1 - epsilon, 1 + epsilon) * advantage)


@gin.configurable
class PPOAlgorithm(RLAlgorithm):
    """PPO (Schulman et al. 2017) with GAE (Schulman et al. 2016), in the form of CleanRL's
    and rl-baselines3-zoo's implementations.

    The loss per step is ``pg_loss + td_loss_weight * td_loss - entropy_regularization *
    entropy``, with the clipped surrogate ``pg_loss`` (``ppo_clipped_surrogate``) on
    advantages normalised per mini-batch (over its valid steps), ``td_loss = 0.5 (R - V)^2``
    (optionally ``max`` with the clipped value's, PPO2's ``cliprange_vf``) and the policy's
    entropy. Policies: Categorical (Discrete), independent Categoricals (MultiDiscrete,
    MultiBinary), and for a Box a Normal whose samples are clipped to the bounds before they
    reach the environment (the unclipped sample is what is trained on; the paper's and SB3's
    choice) or, with ``ActorCriticNetwork.tanh_squash = True``, a tanh-squashed Normal. A Box
    without finite bounds gets an unclipped Normal.

    Args:
        observation_spec, action_spec, reward_spec, env, config: see ``RLAlgorithm`` (the last
            three as keywords).
        network_ctor: ``network_ctor(observation_spec, action_spec)`` ->
            ``ActorCriticNetwork``-like (returns ``(params, value, state)``). A recurrent
            one (``ActorCriticNetwork.lstm_size``) trains on whole sequences of
            ``mini_batch_length`` steps, each from the state stored with its first step
            (``TrainerConfig.use_rollout_state = True``, which it needs; recurrent PPO as
            sb3-contrib's ``RecurrentPPO``).
        gamma: discount ``gamma``.
        td_lambda: GAE's ``lambda``.
        importance_ratio_clipping: ``epsilon`` of the clipped surrogate (the paper's 0.2;
            CleanRL's Atari 0.1): a float, or ``(environment_steps, epsilon)`` pairs
            interpolated linearly (SB3's linear decay to 0 over 100k steps:
            ``[(0, 0.2), (100000, 0.0)]``).
        value_clipping: clip the new value to ``old value +- value_clipping`` and take the
            larger of the clipped and unclipped squared errors (PPO2); None for none.
        td_loss_weight: weight of the value loss ``0.5 (R - V)^2`` (``c1 = 1`` on the
            un-halved loss in the paper, CleanRL's ``vf_coef = 0.5`` on the halved one).
        entropy_regularization: weight ``c2`` of the entropy bonus.
        normalize_advantages: normalise advantages to zero mean and unit standard deviation
            per mini-batch.
        name, optimizer, gradient_clipping, lr_scheduler, ...: see ``Algorithm``.

    Raises:
        ValueError: if the network has a recurrent state without
            ``TrainerConfig.use_rollout_state``, ``importance_ratio_clipping`` is not
            positive (a schedule's values may reach 0, none may be negative),
            ``value_clipping`` is not positive, ``td_loss_weight`` is negative, or ``gamma``
            or ``td_lambda`` is outside ``[0, 1]``.
    """

    def __init__(self,
                 observation_spec,
                 action_spec,
                 network_ctor=ActorCriticNetwork,
                 gamma: float = 0.99,
                 td_lambda: float = 0.95,
                 importance_ratio_clipping: Schedule = 0.2,
                 value_clipping: Optional[float] = None,
                 td_loss_weight: float = 0.5,
                 entropy_regularization: float = 0.0,
                 normalize_advantages: bool = True,
                 name: str = "PPOAlgorithm",
                 **kwargs):
        check_unit_interval(name, gamma=gamma, td_lambda=td_lambda)
        epsilon = StepSchedule(importance_ratio_clipping, f"{name}.importance_ratio_clipping")
        if not (min(epsilon.values) >= 0 and max(epsilon.values) > 0):
            raise ValueError(f"{name}: importance_ratio_clipping must be > 0 (a schedule's "
                             f"values >= 0), got {importance_ratio_clipping}")
        if not td_loss_weight >= 0:
            raise ValueError(f"{name}: td_loss_weight must be >= 0 (a negative weight would "
                             f"maximise the value error), got {td_loss_weight}")
        if value_clipping is not None and not value_clipping > 0:
            raise ValueError(f"{name}: value_clipping must be > 0 or None (no clipping), got "
                             f"{value_clipping}")
        network = network_ctor(observation_spec, action_spec)
        kwargs.setdefault("is_on_policy", True)
        super().__init__(observation_spec, action_spec, name=name, metric_discount=gamma,
                         train_state_spec=network.state_spec,
                         # the loss needs train_step's recomputed policy: always in epochs
                         rollout_graph_training=False,
                         data_needs=DataNeeds(rollout_state=bool(network.state_spec)), **kwargs)
        self._network = network
        self._gamma = gamma
        self._td_lambda = td_lambda
        self._epsilon_schedule = epsilon
        self._value_clipping = value_clipping
        self._td_loss_weight = td_loss_weight
        self._entropy_regularization = entropy_regularization
        self._normalize_advantages = normalize_advantages
        self._to_env = ClipToBounds(action_spec)

    @property
    def network(self):
        """The actor-critic network."""
        return self._network

    @property
    def importance_ratio_clipping(self) -> float:
        """The clip range ``epsilon`` at the current ``EnvironmentSteps``."""
        return self._epsilon_schedule(self.get_env_steps())

    def predict_step(self, time_step, state) -> AlgStep:
        """The policy's mode (clipped to the bounds for a Box)."""
        action, state = greedy_action(self._network, time_step.observation, state)
        return AlgStep(output=self._to_env(action), state=state)

    def rollout_step(self, time_step, state) -> AlgStep:
        """Samples ``a ~ pi(.|x)`` and records it with ``log pi(a|x)`` and ``V(x)``."""
        params, value, state = self._network(time_step.observation, state)
        head = self._network.policy_head
        action = head.sample(params)
        info = PPOInfo(action=action, log_prob=head.log_prob(params, action).detach(),
                       value=value.detach().float())
        return AlgStep(output=self._to_env(action), state=state, info=info)

    def preprocess_experience(self, root_inputs, rollout_info: PPOInfo, batch_info):
        """GAE advantages and ``lambda``-returns ``A + V`` over the whole batch-major
        ``[B, T]`` experience, and its loss mask (``valid_step_mask``) for normalising the
        advantages over valid steps only. The last step has advantage 0 and return ``V``
        (no successor)."""
        tm = lambda x: x.transpose(0, 1)  # noqa: E731
        value = tm(rollout_info.value).float()
        step_type = tm(root_inputs.step_type)
        adv = value_ops.generalized_advantage_estimation(
            tm(self.weighted_reward(root_inputs.reward)).float(), value, step_type,
            self._gamma * tm(root_inputs.discount).float(), self._td_lambda)
        adv = torch.cat([adv, torch.zeros_like(adv[:1])])
        return root_inputs, rollout_info._replace(
            advantage=tm(adv), returns=tm(adv + value),
            valid=tm(valid_step_mask(step_type)).float())

    def train_step(self, time_step, state, rollout_info: PPOInfo) -> AlgStep:
        """Recomputes the policy's parameters and ``V`` for a stored step."""
        params, value, state = self._network(time_step.observation, state)
        return AlgStep(output=rollout_info.action, state=state,
                       info=rollout_info._replace(params=params, new_value=value.float()))

    def calc_loss(self, info: PPOInfo) -> LossInfo:
        """The per-step PPO loss ``[T, B]`` (masked by the training loop)."""
        head = self._network.policy_head
        log_prob = head.log_prob(info.params, info.action)
        adv = info.advantage
        if self._normalize_advantages:
            n = info.valid.sum().clamp(min=1)
            mean = (adv * info.valid).sum() / n
            std = (((adv - mean) ** 2 * info.valid).sum() / (n - 1).clamp(min=1)).sqrt()
            adv = (adv - mean) / (std + 1e-8)
        epsilon = self.importance_ratio_clipping
        pg_loss = ppo_clipped_surrogate(log_prob, info.log_prob, adv, epsilon)
        td_loss = 0.5 * (info.returns - info.new_value) ** 2
        if self._value_clipping is not None:
            clipped = info.value + (info.new_value - info.value).clamp(
                -self._value_clipping, self._value_clipping)
            td_loss = torch.max(td_loss, 0.5 * (info.returns - clipped) ** 2)
        entropy = head.entropy(info.params)
        loss = (pg_loss + self._td_loss_weight * td_loss
                - self._entropy_regularization * entropy)
        if summary.should_record_summaries():
            with torch.no_grad():
                valid = info.valid > 0
                if bool(valid.any()):
                    log_ratio = (log_prob - info.log_prob)[valid]
                    summary.scalar(f"{self._name}/approx_kl",
                                   ((log_ratio.exp() - 1) - log_ratio).mean())
                    summary.scalar(f"{self._name}/clip_fraction", (
                        (log_ratio.exp() - 1).abs() > epsilon).float().mean())
                    if not self._epsilon_schedule.is_constant:
                        summary.scalar(f"{self._name}/importance_ratio_clipping", epsilon)
        return LossInfo(loss=loss, extra={"pg_loss": pg_loss, "td_loss": td_loss,
                                          "entropy": entropy})
