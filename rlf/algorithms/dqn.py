"""DQNAlgorithm: deep Q-learning (Mnih et al. 2015) with double Q-learning (van Hasselt et al.
2016), n-step returns and optional prioritised replay (Schaul et al. 2016).

Trains from the replay buffer on sampled sequences of ``mini_batch_length`` steps; every
transition ``t -> t+1`` of a sequence gets the n-step return that the sequence holds
(``value_ops.n_step_return``: up to ``n_step`` rewards, fewer near the sequence's end, an
episode's end or a cut), so ``mini_batch_length = n_step + 1`` gives the first transition
the full n steps. Experience layout: see ``value_ops``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional, Tuple

import gin
import torch

from rlf import nest
from rlf.algorithms import value_ops
from rlf.algorithms.config_parts import without_effect
from rlf.algorithms.data_needs import DataNeeds
from rlf.algorithms.rl_algorithm import RLAlgorithm, check_unit_interval
from rlf.algorithms.schedules import Schedule, StepSchedule
from rlf.algorithms.target_network import TargetUpdater, make_target_network
from rlf.data_structures import AlgStep, LossInfo, starts_transition
from rlf.nest.utils import batch_apply
from rlf.networks import QNetwork
from rlf.utils import distributed, summary

__all__ = ["apex_epsilon", "DQNAlgorithm", "DQNInfo", "double_q_bootstrap", "dqn_loss"]


class DQNInfo(NamedTuple):
    """Per step: the action (all ``rollout_step`` records); in training, ``[T, B]``:

    Attributes:
        action: the replayed action ``a_t``, ``[T, B]`` int.
        reward, step_type, discount: ``[T, B]``, of the step.
        observation: ``x_t``, ``[T, B, ...]``.
        q_values: ``[T, B, N]`` the online network's ``Q(x_t, .)`` (with gradient).
        target_q_values: ``[T, B, N]`` the target network's ``Q'(x_t, .)`` where
            ``train_step`` computes it (R2D2's recurrent target); else ``()``.
    """

    action: Any = ()
    reward: Any = ()
    step_type: Any = ()
    discount: Any = ()
    observation: Any = ()
    q_values: Any = ()
    target_q_values: Any = ()


def double_q_bootstrap(q_values: torch.Tensor, target_q_values: torch.Tensor) -> torch.Tensor:
    """Double Q-learning's bootstrap value (van Hasselt et al. 2016, eq. 4): the target
    network's value of the online network's greedy action,
    ``Q_target(x, argmax_a Q_online(x, a))``.

    Args:
        q_values: ``[..., N]`` online action values.
        target_q_values: ``[..., N]`` target action values.

    Returns:
        ``[...]`` values, without gradient.
    """
    with torch.no_grad():
        greedy = q_values.argmax(-1, keepdim=True)
        return target_q_values.gather(-1, greedy).squeeze(-1)


def dqn_loss(q_values: torch.Tensor, action: torch.Tensor, next_target_q_values: torch.Tensor,
             reward: torch.Tensor, step_type: torch.Tensor, discount: torch.Tensor,
             n_step: int, double_q: bool = True, huber_delta: Optional[float] = 1.0,
             value_rescaling_epsilon: Optional[float] = None):
    r"""DQN's loss over the ``[T-1, B]`` transitions ``t -> t+1`` of ``[T, B]`` sequences:
    the Huber loss (Mnih et al. 2015) of ``Q(x_t, a_t)`` against the n-step return
    (``value_ops.n_step_return``) that bootstraps from ``max_a Q_target(x_{t+m}, a)`` or,
    with ``double_q``, from ``double_q_bootstrap`` (van Hasselt et al. 2016, eq. 4).

    With ``value_rescaling_epsilon`` the network learns rescaled values (Pohlen et al. 2018;
    R2D2, Kapturowski et al. 2019, section 2.3): the target is
    ``h(sum_k gamma^k r_{t+k+1} + gamma^m h^{-1}(Q_target(x_{t+m}, a*)))`` with
    ``h = value_ops.value_rescaling``.

    Args:
        q_values: ``[T, B, N]`` float online ``Q(x_t, .)`` (gradient flows into step ``t``'s
            taken action only; the double-Q selection is detached).
        action: ``[T, B]`` int action indices in ``[0, N)``.
        next_target_q_values: ``[T-1, B, N]`` target ``Q_target(x_{t+1}, .)`` for
            ``t < T-1``: no bootstrap reads step 0.
        reward: ``[T, B]`` ``r_t``, the reward on arriving at step ``t``.
        step_type: ``[T, B]`` int ``StepType``.
        discount: ``[T, B]`` ``gamma * d_t`` (0 after a termination).
        n_step: rewards summed before bootstrapping (>= 1).
        double_q: double Q-learning's bootstrap instead of ``max_a Q_target``.
        huber_delta: the Huber loss's ``delta``; None for the squared error
            ``0.5 delta^2``.
        value_rescaling_epsilon: ``epsilon`` of ``h`` (R2D2's 1e-3); None for no rescaling.

    Returns:
        ``(loss, td_error)``: ``[T-1, B]`` float each; ``td_error = G_t - Q(x_t, a_t)``. At
        steps that start no transition (see ``starts_transition``) the return is
        ``Q(x_t, a_t)`` itself, so their TD error and loss are 0.

    Raises:
        ValueError: for ``n_step < 1`` or mismatched shapes (``value_ops.n_step_return``).
    """
    q_taken = q_values.gather(-1, action.long().unsqueeze(-1)).squeeze(-1)
    if double_q:
        next_values = double_q_bootstrap(q_values[1:].detach(), next_target_q_values)
    else:
        next_values = next_target_q_values.max(-1).values
    if value_rescaling_epsilon is not None:
        next_values = value_ops.inverse_value_rescaling(next_values, value_rescaling_epsilon)
    # n_step_return reads row 0 only where step 0 starts no transition: any value will do.
    bootstrap = torch.cat([q_taken[:1].detach(), next_values], 0)
    returns = value_ops.n_step_return(reward.float(), bootstrap, step_type, discount.float(),
                                      n_step)
    if value_rescaling_epsilon is not None:
        returns = value_ops.value_rescaling(returns, value_rescaling_epsilon)
    q_taken = q_taken[:-1]
    returns = torch.where(starts_transition(step_type), returns, q_taken.detach())
    td_error = returns - q_taken
    if huber_delta is None:
        loss = 0.5 * td_error ** 2
    else:
        loss = torch.nn.functional.huber_loss(q_taken, returns, reduction="none",
                                              delta=huber_delta)
    return loss, td_error


def apex_epsilon(index: int, num_actors: int, epsilon: float = 0.4,
                 alpha: float = 7.0) -> float:
    r"""Ape-X's exploration rate of actor ``index`` of ``num_actors`` (Horgan et al. 2018,
    "Distributed Prioritized Experience Replay", section 4.1):
    $\epsilon_i = \epsilon^{1 + \alpha i / (N - 1)}$, from ``epsilon`` (actor 0) down to
    ``epsilon ** (1 + alpha)`` (the last); ``epsilon`` for a single actor.

    Args:
        index: ``i``, in ``[0, num_actors)``.
        num_actors: ``N >= 1``.
        epsilon, alpha: the paper's 0.4 and 7.

    Returns:
        The actor's epsilon, a float in ``[0, 1]``.
    """
    if num_actors <= 1:
        return float(epsilon)
    return float(epsilon ** (1.0 + alpha * index / (num_actors - 1)))


@gin.configurable
class DQNAlgorithm(RLAlgorithm):
    """DQN with a target network, double Q-learning, n-step returns, a Huber loss, an
    epsilon-greedy behaviour policy and, with ``TrainerConfig.priority_replay``, priorities
    ``|delta|`` of each sampled sequence's first transition.

    Args:
        observation_spec, action_spec, reward_spec, env, config: see ``RLAlgorithm`` (the last
            three as keywords); the action is one Discrete.
        q_network_ctor: ``q_network_ctor(observation_spec, action_spec)`` -> a module
            mapping ``[B, ...]`` observations to ``[B, N]`` action values.
        gamma: discount ``gamma``.
        n_step: rewards summed before bootstrapping.
        double_q: select the bootstrap action with the online network and evaluate it with
            the target network (False: ``max_a Q_target``, the 2015 paper).
        epsilon_greedy: the behaviour policy's exploration rate, a float or a schedule of
            ``(environment_steps, epsilon)`` pairs, e.g. ``[(0, 1.0), (50000, 0.05)]``.
        eval_epsilon: epsilon of ``predict_step`` (evaluation; 0.05 in Mnih et al., 0 for a
            greedy policy).
        actor_epsilons: ``(epsilon, alpha)`` for Ape-X's fixed per-actor rates
            (``apex_epsilon``; the paper's ``(0.4, 7.0)``): with actor processes or Ray
            actors, actor ``i`` of ``N`` explores with ``epsilon ** (1 + alpha i / (N - 1))``
            instead of ``epsilon_greedy``'s schedule. Refused with a ``config`` that has
            no ``async_unroll`` (a synchronous unroll follows the schedule). None: every
            actor follows the schedule.
        huber_delta: the Huber loss's ``delta`` (the error where it turns linear); None for
            the squared error ``0.5 delta^2``.
        value_rescaling_epsilon: learn values rescaled by ``value_ops.value_rescaling``
            with this ``epsilon`` (Pohlen et al. 2018; R2D2's 1e-3), for unclipped rewards;
            None for none.
        target_update_tau: Polyak rate of the target network (1: copy).
        target_update_period: gradient updates between target updates.
        name, optimizer, gradient_clipping, lr_scheduler, ...: see ``Algorithm``.

    Raises:
        ValueError: for ``n_step < 1``, ``TrainerConfig.mini_batch_length < n_step + 1``,
            ``gamma``, ``eval_epsilon``, an epsilon of the schedule or of
            ``actor_epsilons`` outside ``[0, 1]``, a negative ``alpha``,
            ``actor_epsilons`` with a ``config`` that has no ``async_unroll``,
            ``huber_delta <= 0``, ``value_rescaling_epsilon <= 0``, or a bad schedule,
            target update or action spec.
    """

    # Registered buffers.
    _behaviour_epsilon: torch.Tensor

    def __init__(self,
                 observation_spec,
                 action_spec,
                 q_network_ctor=QNetwork,
                 gamma: float = 0.99,
                 n_step: int = 1,
                 double_q: bool = True,
                 epsilon_greedy: Schedule = 0.1,
                 eval_epsilon: float = 0.0,
                 actor_epsilons: Optional[Tuple[float, float]] = None,
                 huber_delta: Optional[float] = 1.0,
                 value_rescaling_epsilon: Optional[float] = None,
                 target_update_tau: float = 1.0,
                 target_update_period: int = 1000,
                 name: str = "DQNAlgorithm",
                 **kwargs):
        if n_step < 1:
            raise ValueError(f"{name}: n_step must be >= 1, got {n_step}")
        check_unit_interval(name, gamma=gamma, eval_epsilon=eval_epsilon)
        if actor_epsilons is not None:
            if len(actor_epsilons) != 2 or not 0.0 <= actor_epsilons[0] <= 1.0 or (
                    actor_epsilons[1] < 0):
                raise ValueError(f"{name}: actor_epsilons is (epsilon in [0, 1], alpha >= 0), "
                                 f"e.g. Ape-X's (0.4, 7.0); got {actor_epsilons!r}")
            actor_epsilons = (float(actor_epsilons[0]), float(actor_epsilons[1]))
            config = kwargs.get("config")
            if config is not None and not config.actors.async_unroll:
                raise ValueError(without_effect(
                    [f"actor_epsilons = {actor_epsilons!r}"], "with actors (a synchronous "
                    "unroll follows epsilon_greedy)", "set TrainerConfig.async_unroll = True "
                    "too, or remove {it}", owner=name))
        if huber_delta is not None and not huber_delta > 0:
            raise ValueError(f"{name}: huber_delta must be > 0 (or None for the squared "
                             f"error), got {huber_delta}")
        if value_rescaling_epsilon is not None and not value_rescaling_epsilon > 0:
            raise ValueError(f"{name}: value_rescaling_epsilon must be > 0 (or None for no "
                             f"rescaling), got {value_rescaling_epsilon}")
        epsilon = StepSchedule(epsilon_greedy, f"{name}.epsilon_greedy")
        if not all(0.0 <= v <= 1.0 for v in epsilon.values):
            raise ValueError(f"{name}: epsilon_greedy's values must be in [0, 1], got "
                             f"{epsilon_greedy!r}")
        network = q_network_ctor(observation_spec, action_spec)
        super().__init__(observation_spec, action_spec, is_on_policy=False, name=name,
                         metric_discount=gamma,
                         data_needs=DataNeeds(min_sequence_length=n_step + 1,
                                              why=f"n_step = {n_step}"),
                         **self._state_specs(network), **kwargs)
        self._q_network = network
        self._target_q_network = make_target_network(network)
        self._target_updater = TargetUpdater([network], [self._target_q_network],
                                             target_update_tau, target_update_period)
        self._gamma = gamma
        self._n_step = int(n_step)
        self._double_q = double_q
        self._epsilon = epsilon
        self._eval_epsilon = eval_epsilon
        self._actor_epsilons = actor_epsilons
        self._huber_delta = huber_delta
        self._value_rescaling_epsilon = value_rescaling_epsilon
        self._min_action = int(action_spec.minimum)
        self.register_buffer("_behaviour_epsilon",
                             torch.tensor(self._epsilon(0), dtype=torch.float32))

    @property
    def q_network(self):
        """The online Q network."""
        return self._q_network

    @property
    def target_q_network(self):
        """The target Q network."""
        return self._target_q_network

    @property
    def epsilon(self) -> float:
        """The behaviour policy's exploration rate: on an actor copy with
        ``actor_epsilons``, its fixed Ape-X rate; else the schedule's at the current
        ``EnvironmentSteps`` (actors, which count no steps, act with the learner's latest
        value, a buffer sent with the parameters)."""
        if self.actor_identity is not None and self._actor_epsilons is not None:
            return apex_epsilon(*self.actor_identity, *self._actor_epsilons)
        return self._epsilon(self.get_env_steps())

    def _state_specs(self, network) -> dict:
        """The state specs ``Algorithm`` takes, for ``network``: none (feed-forward)."""
        return {}

    def _q_values(self, observation, state):
        """``Q(x, .)`` ``[B, N]`` of the online network and the next state (``state`` itself
        for a feed-forward network)."""
        return self._q_network(observation), state

    def _epsilon_greedy(self, q: torch.Tensor, epsilon) -> torch.Tensor:
        action = q.argmax(-1)
        if not isinstance(epsilon, float) or epsilon > 0:
            explore = distributed.rand_like(action.float()) < epsilon
            random = distributed.randint_like(action, q.shape[-1])
            action = torch.where(explore, random, action)
        return action + self._min_action

    def predict_step(self, time_step, state) -> AlgStep:
        """``eval_epsilon``-greedy action."""
        q, state = self._q_values(time_step.observation, state)
        return AlgStep(output=self._epsilon_greedy(q, self._eval_epsilon), state=state)

    def rollout_step(self, time_step, state) -> AlgStep:
        """``epsilon``-greedy action (``epsilon``)."""
        if self.actor_identity is None or self._actor_epsilons is not None:
            # the learner's own (synchronous) unroll, or an Ape-X actor's fixed rate
            self._behaviour_epsilon.fill_(self.epsilon)
        q, state = self._q_values(time_step.observation, state)
        action = self._epsilon_greedy(q, self._behaviour_epsilon)
        return AlgStep(output=action, state=state, info=DQNInfo(action=action))

    def train_step(self, time_step, state, rollout_info) -> AlgStep:
        """The online ``Q(x_t, .)`` of a replayed step; the step passes through for
        ``calc_loss``."""
        return AlgStep(output=(), state=state, info=DQNInfo(
            action=rollout_info.action, reward=self.weighted_reward(time_step.reward),
            step_type=time_step.step_type, discount=time_step.discount,
            observation=time_step.observation,
            q_values=self._q_network(time_step.observation)))

    def _next_target_q_values(self, info: DQNInfo) -> torch.Tensor:
        """``Q_target(x_t, .)`` ``[T-1, B, N]`` for ``t >= 1``: the target network evaluated at
        ``x_1 .. x_{T-1}`` only (no bootstrap reads ``x_0``)."""
        tail = nest.map_structure(lambda x: x[1:], info.observation)
        with torch.no_grad():
            return batch_apply(self._target_q_network, tail)

    def sequence_priority(self, td_error: torch.Tensor, step_type: torch.Tensor
                          ) -> torch.Tensor:
        """A sampled sequence's replay priority: ``|delta|`` of its first transition (0, the
        floor 1e-6, where its first step starts none).

        Args:
            td_error: ``[T-1, B]`` TD errors (0 where a step starts no transition).
            step_type: ``[T, B]`` int ``StepType``.

        Returns:
            ``[B]`` float priorities ``>= 1e-6``, without gradient.
        """
        return td_error[0].detach().abs().clamp(min=1e-6)

    def calc_loss(self, info: DQNInfo) -> LossInfo:
        """``dqn_loss`` over the ``[T-1, B]`` transitions of the sequence, with
        ``sequence_priority`` as the priority."""
        next_target_q = self._next_target_q_values(info)
        action = info.action.long() - self._min_action
        loss, td_error = dqn_loss(
            info.q_values, action, next_target_q, info.reward, info.step_type,
            self._gamma * info.discount.float(), self._n_step, self._double_q,
            self._huber_delta, self._value_rescaling_epsilon)
        priority = self.sequence_priority(td_error, info.step_type)
        if summary.should_record_summaries():
            with torch.no_grad():
                valid = starts_transition(info.step_type)
                if bool(valid.any()):
                    q_taken = info.q_values[:-1].gather(-1, action[:-1].unsqueeze(-1))
                    if self._value_rescaling_epsilon is not None:  # in return units
                        q_taken = value_ops.inverse_value_rescaling(
                            q_taken, self._value_rescaling_epsilon)
                    summary.scalar(f"{self._name}/q_value", q_taken.squeeze(-1)[valid].mean())
                summary.scalar(f"{self._name}/epsilon", self.epsilon)
        return LossInfo(loss=loss, extra={"td_loss": loss}, priority=priority)

    def after_train_iter(self, root_inputs, rollout_info=None) -> None:
        """Sets the behaviour epsilon that actors receive with the parameters (an actor
        unroller never calls the learner's ``rollout_step``)."""
        self._behaviour_epsilon.fill_(self._epsilon(self.get_env_steps()))

    def after_update(self, root_inputs, info) -> None:
        """Moves the target network towards the online one (every ``target_update_period``
        updates)."""
        self._target_updater()
