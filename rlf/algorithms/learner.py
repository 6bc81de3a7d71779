"""The learner: one gradient update per ``Batch`` of a data path, or on an unroll's own
graph, through the algorithm's ``train_step``, ``calc_loss`` and ``after_update``."""

from __future__ import annotations

from typing import Any

import torch

from rlf import nest
from rlf.algorithms.data_paths import Batch, Sequences
from rlf.data_structures import Experience, valid_step_mask
from rlf.utils import summary
from rlf.utils.common import is_empty

__all__ = ["Learner", "importance_weighted"]


def importance_weighted(name: str, loss: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``loss`` (``[T-k, B, ...]`` or ``[B]``) times prioritised replay's ``[B]`` importance
    weights.

    Raises:
        ValueError: for a loss without the batch dim (a scalar), which cannot be weighted.
    """
    if loss.ndim == 1 and loss.shape[0] == weights.shape[0]:
        return loss * weights
    if loss.ndim < 2 or loss.shape[1] != weights.shape[0]:
        raise ValueError(f"{name}: prioritised replay weights each sequence of the batch, so "
                         f"its loss must be [T-k, B, ...] or [B]; got shape "
                         f"{tuple(loss.shape)} for B = {weights.shape[0]}")
    return loss * weights.view((1, -1) + (1,) * (loss.ndim - 2))


class Learner:
    """Trains an algorithm on what its data path yields.

    Args:
        algorithm: the ``RLAlgorithm``; its ``update_with_gradient`` applies each update.
        sequences: how ``train_step`` runs over a stored sequence (None on the
            ``"rollout_graph"`` path, which calls no ``train_step``).
        prioritized: the replay buffer samples by priority: losses are weighted by the
            batch's importance weights and ``LossInfo.priority`` goes back to the buffer.
    """

    def __init__(self, algorithm, sequences: Sequences = None, prioritized: bool = False):
        self.algorithm = algorithm
        self.sequences = sequences
        self.prioritized = prioritized

    def update(self, batch: Batch) -> int:
        """One gradient update on a batch-major ``[B, T]`` mini-batch and its ``[B, T]`` loss
        mask, both on the algorithm's device, writing its summaries if ``batch.record``.

        Returns:
            The number of steps trained on.
        """
        with summary.record_if(lambda: batch.record):
            return self._update(batch.experience, batch.batch_info, batch.valid, batch.weight)

    def _update(self, experience: Experience, batch_info, valid: torch.Tensor,
                weight: float) -> int:
        alg = self.algorithm
        experience, valid = nest.map_structure(lambda x: x.transpose(0, 1), (experience, valid))
        with alg._autocast():
            train_info = self.sequences.train_info(alg, experience)
            loss_info = alg.calc_loss(train_info)
        # calc_loss saw the [T-k, B] steps after a burn-in: so does the mask
        experience, valid = self.sequences.after_burn_in(experience, valid)
        if batch_info is not None and self.prioritized:
            weights = batch_info.importance_weights.to(alg._device)
            loss_info = loss_info._replace(loss=nest.map_structure(
                lambda x: importance_weighted(alg.name, x, weights), loss_info.loss))
        loss_info, params = alg.update_with_gradient(loss_info, valid, weight)
        alg.after_update(experience.time_step, train_info)
        if (batch_info is not None and self.prioritized
                and not is_empty(loss_info.priority)):
            alg.replay_buffer.update_priority(batch_info.env_ids, batch_info.positions,
                                              loss_info.priority.detach().cpu())
        alg.summarize_train(experience, train_info, loss_info, params)
        return int(valid.numel())

    def update_on_rollout(self, experience: Experience, train_info: Any) -> int:
        """One update whose loss is ``calc_loss`` of the rollout's own ``[T, B]`` infos, with
        their graph (the ``"rollout_graph"`` path).

        Args:
            experience: the ``[T, B]`` unroll (``rollout_info`` removed).
            train_info: its ``[T, B]`` ``rollout_info``, with the graph of ``rollout_step``.

        Returns:
            The number of steps trained on.
        """
        alg = self.algorithm
        valid_masks = valid_step_mask(experience.time_step.step_type)
        with alg._autocast():
            loss_info = alg.calc_loss(train_info)
        loss_info, params = alg.update_with_gradient(loss_info, valid_masks)
        alg.after_update(experience.time_step, train_info)
        alg.summarize_train(experience, train_info, loss_info, params)
        return int(valid_masks.numel())
