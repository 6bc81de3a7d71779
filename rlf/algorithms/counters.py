"""The training counters of an algorithm, kept in one CPU tensor that travels to the actors with
the parameters."""

from __future__ import annotations

from typing import Any, Dict, List, Mapping

import torch

from rlf.unrollers.actor_params import COUNTERS_KEY

__all__ = ["Counters", "COUNTERS_KEY", "without_legacy_update_counter"]


class Counters:
    """``num_updates``, ``env_steps``, ``train_iter_num`` and each optimizer's step count, in
    one ``int64`` CPU tensor ``[3 + num_optimizers]``.

    One tensor, so that an actor's copy receives them with its parameters (under
    ``COUNTERS_KEY``); on the CPU whatever the device, so reading one never waits for a
    device. Checkpoints keep them in the algorithm's extra state.
    """

    NUM_UPDATES, ENV_STEPS, TRAIN_ITER_NUM = 0, 1, 2
    _FIXED = 3

    def __init__(self) -> None:
        self.tensor = torch.zeros(self._FIXED, dtype=torch.int64)

    def _get(self, index: int) -> int:
        return int(self.tensor[index])

    def _set(self, index: int, value: int) -> None:
        self.tensor[index] = int(value)

    @property
    def num_updates(self) -> int:
        """Gradient updates applied so far."""
        return self._get(self.NUM_UPDATES)

    @num_updates.setter
    def num_updates(self, value: int) -> None:
        self._set(self.NUM_UPDATES, value)

    @property
    def env_steps(self) -> int:
        """Environment steps taken so far (the ``EnvironmentSteps`` metric's)."""
        return self._get(self.ENV_STEPS)

    @env_steps.setter
    def env_steps(self, value: int) -> None:
        self._set(self.ENV_STEPS, value)

    @property
    def train_iter_num(self) -> int:
        """Training iterations begun so far."""
        return self._get(self.TRAIN_ITER_NUM)

    @train_iter_num.setter
    def train_iter_num(self, value: int) -> None:
        self._set(self.TRAIN_ITER_NUM, value)

    @property
    def optimizer_steps(self) -> List[int]:
        """Each optimizer's step count, in the algorithm's optimizer order."""
        return self.tensor[self._FIXED:].tolist()

    def set_num_optimizers(self, n: int) -> None:
        """Sizes the step counts for ``n`` optimizers (zeros), keeping the other counters;
        a new size makes a new tensor (call it before the tensor is handed out)."""
        if self.tensor.numel() != self._FIXED + n:
            tensor = torch.zeros(self._FIXED + n, dtype=torch.int64)
            tensor[:self._FIXED] = self.tensor[:self._FIXED]
            self.tensor = tensor

    def set_optimizer_steps(self, steps: List[int]) -> None:
        """Sets every optimizer's step count (the list's length must be the number of
        optimizers)."""
        self.tensor[self._FIXED:] = torch.tensor([int(s) for s in steps], dtype=torch.int64)

    def count_optimizer_step(self, index: int) -> None:
        """Adds one step to optimizer ``index``."""
        self.tensor[self._FIXED + index] += 1


def without_legacy_update_counter(state_dict: Mapping[str, Any], own_keys) -> Dict[str, Any]:
    """``state_dict`` without a top-level ``_num_updates`` buffer not among ``own_keys``
    (SAC's and TD3's counter in rlf 0.1's checkpoints; ``num_updates`` replaces it)."""
    if "_num_updates" not in state_dict or "_num_updates" in own_keys:
        return dict(state_dict)
    return {k: v for k, v in state_dict.items() if k != "_num_updates"}
