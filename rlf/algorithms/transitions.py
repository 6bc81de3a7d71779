"""What algorithms that learn from single transitions ``t -> t+1`` of replayed steps share
(SAC, TD3, IQL): the training info, its ``train_step``, the transitions' observations and the
twin critics with their targets."""

from __future__ import annotations

from typing import Any, Callable, NamedTuple, Tuple, cast

from torch import nn

from rlf import nest
from rlf.algorithms.target_network import make_target_network
from rlf.data_structures import AlgStep

__all__ = ["TransitionInfo", "transition_train_step", "transition_observations",
           "twin_critics"]


class TransitionInfo(NamedTuple):
    """Per step: the action (all ``rollout_step`` records); in training, ``[T, B]``:

    Attributes:
        action: the replayed action ``a_t``, ``[T, B, ...]``.
        reward: ``[T, B]`` float, the step's training reward (``weighted_reward``).
        discount: ``[T, B]`` float, the step's discount (0 after a termination).
        observation: ``x_t``, ``[T, B, ...]``.
    """

    action: Any = ()
    reward: Any = ()
    discount: Any = ()
    observation: Any = ()


def transition_train_step(algorithm, time_step, state, rollout_info: TransitionInfo) -> AlgStep:
    """A ``train_step`` that passes the step's observation, training reward, discount and
    replayed action on to ``calc_loss``, which forms the transitions ``t -> t+1`` from them.

    Args:
        algorithm: the ``RLAlgorithm`` (its ``weighted_reward``).
        time_step: ``[B]`` (or ``[T*B]``) ``TimeStep``.
        state: passed through.
        rollout_info: the stored ``TransitionInfo`` (its ``action``).

    Returns:
        ``AlgStep(output=action, state=state, info=TransitionInfo)``.
    """
    return AlgStep(output=rollout_info.action, state=state, info=TransitionInfo(
        action=rollout_info.action, reward=algorithm.weighted_reward(time_step.reward),
        discount=time_step.discount, observation=time_step.observation))


def transition_observations(observation: Any) -> Tuple[Any, Any]:
    """``(x_t, x_{t+1})`` of the ``[T-1, B]`` transitions ``t -> t+1`` of ``[T, B, ...]``
    observations (a nest): the first ``T - 1`` steps and the last ``T - 1``."""
    return (nest.map_structure(lambda x: x[:-1], observation),
            nest.map_structure(lambda x: x[1:], observation))


def twin_critics(critic_network_ctor: Callable, observation_spec: Any, action_spec: Any
                 ) -> Tuple[nn.ModuleList, nn.ModuleList]:
    """Two critics ``Q_1, Q_2`` (Fujimoto et al. 2018's clipped double Q) and their target
    copies.

    Args:
        critic_network_ctor: ``ctor(observation_spec, action_spec)`` -> ``Q(x, a)`` module.
        observation_spec, action_spec: the algorithm's specs.

    Returns:
        ``(critics, target_critics)``, two ``nn.ModuleList`` s of two networks each.
    """
    critics = nn.ModuleList(critic_network_ctor(observation_spec, action_spec)
                            for _ in range(2))
    return critics, cast(nn.ModuleList, make_target_network(critics))
