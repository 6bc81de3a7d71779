"""R2D2Algorithm: recurrent replay distributed DQN (Kapturowski et al. 2019, "Recurrent
Experience Replay in Distributed Reinforcement Learning").

``DQNAlgorithm`` with an LSTM Q-network trained on replayed sequences:

- each sequence starts from the recurrent state the actor had at its first step (stored in
  ``Experience.state``; ``TrainerConfig.use_rollout_state``), for the online and the target
  network alike (``train_state_from_rollout_state``), or from zeros;
- its first ``TrainerConfig.burn_in_steps`` steps only warm both states up (no gradient, no
  loss); the state is reset at every FIRST step inside the sequence;
- n-step double-Q targets on rescaled values, ``h(x) = sign(x)(sqrt(|x| + 1) - 1) + eps x``
  (``value_ops.value_rescaling``, ``dqn_loss``);
- the sequence's replay priority mixes the max and the mean of its ``|delta|``
  (``r2d2_priority``);
- Ape-X's per-actor epsilons with actor processes or Ray actors (``actor_epsilons``).
"""

from __future__ import annotations

from typing import Optional

import gin
import torch

from rlf.algorithms.dqn import DQNAlgorithm, DQNInfo
from rlf.data_structures import AlgStep, starts_transition
from rlf.networks import RecurrentQNetwork

__all__ = ["R2D2Algorithm", "r2d2_priority"]


def r2d2_priority(td_error: torch.Tensor, mask: torch.Tensor, eta: float = 0.9
                  ) -> torch.Tensor:
    r"""R2D2's sequence priority (Kapturowski et al. 2019, section 2.3):
    $p = \eta \max_t |\delta_t| + (1 - \eta) \overline{|\delta|}$ over the sequence's valid
    transitions.

    Args:
        td_error: ``[T', B]`` TD errors.
        mask: ``[T', B]`` bool, the transitions that count.
        eta: ``eta`` in ``[0, 1]`` (the paper's 0.9).

    Returns:
        ``[B]`` float priorities, at least 1e-6 (the floor of a sequence without a valid
        transition), without gradient.
    """
    with torch.no_grad():
        abs_td = td_error.abs() * mask
        count = mask.sum(0)
        mean = abs_td.sum(0) / count.clamp(min=1)
        priority = eta * abs_td.max(0).values + (1.0 - eta) * mean
        return torch.where(count > 0, priority, torch.zeros_like(priority)).clamp(min=1e-6)


@gin.configurable
class R2D2Algorithm(DQNAlgorithm):
    """R2D2: an LSTM ``Q(x_t, . | h_{t-1})`` trained by n-step double Q-learning on rescaled
    values from prioritised sequences, with stored state and burn-in.

    The training settings that make it R2D2 are ``TrainerConfig``'s: sequences of
    ``mini_batch_length`` steps (80 in the paper) whose first ``burn_in_steps`` (40) warm up
    the state, ``use_rollout_state = True`` (False: both networks start each sequence from
    zeros, the paper's "zero start state" baseline) and ``priority_replay`` with the paper's
    exponent ``priority_replay_alpha = 0.9`` and ``priority_replay_beta = 0.6``.

    Args:
        observation_spec, action_spec, reward_spec, env, config: see ``RLAlgorithm`` (the last
            three as keywords); the action is one Discrete.
        q_network_ctor: ``q_network_ctor(observation_spec, action_spec)`` -> a module with a
            ``state_spec`` mapping ``([B, ...]`` observations, state``)`` to ``([B, N]``
            values, next state``)`` (``RecurrentQNetwork``).
        gamma: discount (the paper's 0.997).
        n_step: rewards summed before bootstrapping (the paper's 5).
        value_rescaling_epsilon: ``epsilon`` of the value rescaling ``h`` (the paper's 1e-3);
            None for plain values.
        priority_eta: ``eta`` of ``r2d2_priority`` (the paper's 0.9).
        huber_delta: None (the paper's squared error, ``0.5 delta^2``) or a Huber ``delta``.
        target_update_period: gradient updates between target copies (the paper's 2500).
        name: the algorithm's name (summaries).
        **kwargs: ``DQNAlgorithm``'s other arguments (``double_q``, ``epsilon_greedy``,
            ``eval_epsilon``, ``actor_epsilons``, ``target_update_tau``, ``optimizer``, ...).

    Raises:
        ValueError: for a network without a recurrent ``state_spec``, ``priority_eta``
            outside ``[0, 1]``, or any of ``DQNAlgorithm``'s errors (``mini_batch_length``
            below ``burn_in_steps + n_step + 1`` among them).
    """

    def __init__(self,
                 observation_spec,
                 action_spec,
                 q_network_ctor=RecurrentQNetwork,
                 gamma: float = 0.997,
                 n_step: int = 5,
                 value_rescaling_epsilon: Optional[float] = 1e-3,
                 priority_eta: float = 0.9,
                 huber_delta: Optional[float] = None,
                 target_update_period: int = 2500,
                 name: str = "R2D2Algorithm",
                 **kwargs):
        if not 0.0 <= priority_eta <= 1.0:
            raise ValueError(f"{name}: priority_eta must be in [0, 1], got {priority_eta}")
        super().__init__(observation_spec, action_spec, q_network_ctor=q_network_ctor,
                         gamma=gamma, n_step=n_step,
                         value_rescaling_epsilon=value_rescaling_epsilon,
                         huber_delta=huber_delta, target_update_period=target_update_period,
                         name=name, **kwargs)
        self._priority_eta = float(priority_eta)

    def _state_specs(self, network) -> dict:
        """Acting carries the online network's ``(h, c)``; training carries the online and
        the target network's, ``((h, c), (h', c'))``."""
        state_spec = getattr(network, "state_spec", ())
        if not state_spec:
            raise ValueError(f"R2D2Algorithm needs a recurrent Q network (with a state_spec, "
                             f"e.g. RecurrentQNetwork); got {type(network).__name__}")
        return {"rollout_state_spec": state_spec, "train_state_spec": (state_spec, state_spec)}

    def _q_values(self, observation, state):
        return self._q_network(observation, state)

    def train_state_from_rollout_state(self, state):
        """Both networks start a sequence from the state the actor stored (the paper's
        "stored state" strategy)."""
        return (state, state)

    def train_step(self, time_step, state, rollout_info) -> AlgStep:
        """The online ``Q(x_t, .)`` (with gradient) and the target ``Q'(x_t, .)`` of one
        replayed step, each network carrying its own state."""
        online, target = state
        q_values, online = self._q_network(time_step.observation, online)
        with torch.no_grad():
            target_q_values, target = self._target_q_network(time_step.observation, target)
        return AlgStep(output=(), state=(online, target), info=DQNInfo(
            action=rollout_info.action, reward=self.weighted_reward(time_step.reward),
            step_type=time_step.step_type, discount=time_step.discount,
            q_values=q_values, target_q_values=target_q_values))

    def _next_target_q_values(self, info: DQNInfo) -> torch.Tensor:
        return info.target_q_values[1:]

    def sequence_priority(self, td_error: torch.Tensor, step_type: torch.Tensor
                          ) -> torch.Tensor:
        """``r2d2_priority`` of the trained part's valid transitions."""
        return r2d2_priority(td_error, starts_transition(step_type), self._priority_eta)
