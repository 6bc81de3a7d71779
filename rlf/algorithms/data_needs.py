"""``DataNeeds``: what an algorithm's ``train_step`` and ``calc_loss`` need of the data path,
declared at construction and checked against the settings by ``make_data_path``."""

from __future__ import annotations

from typing import NamedTuple

from rlf.utils.errors import UserError

__all__ = ["DataNeeds", "TRANSITIONS", "check_data_needs"]


class DataNeeds(NamedTuple):
    """What an algorithm needs of the sequences it trains on.

    Attributes:
        min_sequence_length: steps a trained sequence needs after its burn-in: 1 (a loss
            per step), 2 (a loss over the ``[T-1, B]`` transitions: TD targets, V-trace), or
            ``n + 1`` (n-step targets).
        why: what needs them, in words, for the refusal (``"n_step = 3"``).
        rollout_state: sequences start from their stored rollout state
            (``use_rollout_state``: recurrent PPO).
        rollout_graph_training: see ``RLAlgorithm``'s argument of that name.
    """

    min_sequence_length: int = 1
    why: str = "its loss"
    rollout_state: bool = False
    rollout_graph_training: bool = True


#: The needs of an algorithm whose loss is over transitions (``[T-1, B]``).
TRANSITIONS = DataNeeds(min_sequence_length=2, why="a loss over transitions")


def check_data_needs(needs: DataNeeds, config, owner: str, path: str) -> None:
    """Refuses data-path settings that cannot give ``owner`` what it declared.

    Args:
        needs: the algorithm's ``DataNeeds``.
        config: the ``DataPathConfig`` (``TrainerConfig.data_path``).
        owner: the algorithm's name, for the messages.
        path: the data path's name (``data_path_name``).

    Raises:
        UserError: (a ``ValueError``) naming the setting and the value to set.
    """
    length, need = config.mini_batch_length, needs.min_sequence_length + config.burn_in_steps
    if (needs.min_sequence_length > 1 and path != "rollout_graph" and length is not None
            and length < need):  # (a burn-in that leaves no step: make_data_path's line)
        raise UserError(f"{owner}: {needs.why} needs sequences of burn_in_steps + "
                        f"{needs.min_sequence_length} steps; set "
                        f"TrainerConfig.mini_batch_length = {need} (it is {length})")
    steps = max(2, needs.min_sequence_length)  # a rollout graph's last step has no successor
    if path == "rollout_graph" and config.unroll_length < steps:
        raise UserError(f"{owner} trains on each unroll's own graph, where {needs.why} needs "
                        f"{steps} steps of the same unroll: TrainerConfig.unroll_length must "
                        f"be >= {steps}, got {config.unroll_length} (or train in epochs, "
                        f"carrying the last step over: set TrainerConfig.mini_batch_size)")
    if needs.rollout_state and not config.use_rollout_state:
        raise UserError(f"{owner}: a recurrent network trains each sequence from the state "
                        f"the actor had at its first step: set "
                        f"TrainerConfig.use_rollout_state = True")
