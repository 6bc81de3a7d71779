"""The training info of algorithms that learn from single transitions ``t -> t+1`` of
replayed steps (TD3, IQL)."""

from __future__ import annotations

from typing import Any, NamedTuple

from rlf.data_structures import AlgStep

__all__ = ["TransitionInfo", "transition_train_step"]


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
