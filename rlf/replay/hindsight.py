"""``HindsightReplayBuffer``: deprecated; a ``ReplayBuffer`` with a ``HindsightSampler``
(``TrainerConfig.replay_sampler = @HindsightSampler()``) relabels the same way."""

from __future__ import annotations

from typing import Any, Sequence

import gin
import torch

from rlf.replay.replay_buffer import ReplayBuffer
from rlf.replay.samplers import HindsightSampler
from rlf.utils.deprecation import warn_deprecated

__all__ = ["HindsightReplayBuffer"]


@gin.configurable(denylist=["data_spec", "num_environments", "max_length", "name",
                           "sampler"])
class HindsightReplayBuffer(ReplayBuffer):
    """Deprecated: ``ReplayBuffer(..., sampler=HindsightSampler(...))``, which it builds (it
    warns once). The arguments are ``HindsightSampler``'s; ``sampler`` (if given) is the one
    whose draws are relabelled.

    Raises:
        ValueError: as ``HindsightSampler`` and ``ReplayBuffer``.
    """

    def __init__(self, data_spec: Any, num_environments: int, max_length: int,
                 achieved_goal: Sequence[int] = (0, 0), desired_goal: Sequence[int] = (0, 0),
                 her_proportion: float = 0.8, reward_threshold: float = 0.05,
                 observation_path: str = "time_step.observation", **kwargs):
        warn_deprecated("HindsightReplayBuffer",
                        "TrainerConfig.replay_sampler = @HindsightSampler() (a ReplayBuffer "
                        "with sampler=HindsightSampler(...))")
        kwargs.setdefault("name", "HindsightReplayBuffer")
        sampler = HindsightSampler(achieved_goal, desired_goal, her_proportion,
                                   reward_threshold, observation_path,
                                   sampler=kwargs.pop("sampler", None))
        super().__init__(data_spec, num_environments, max_length, sampler=sampler, **kwargs)

    def relabel(self, batch: Any, env_ids: torch.Tensor, positions: torch.Tensor) -> Any:
        """``HindsightSampler.relabel`` of the buffer's sampler."""
        sampler = self.sampler
        assert isinstance(sampler, HindsightSampler)
        return sampler.relabel(batch, env_ids, positions)
