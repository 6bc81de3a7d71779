"""The bounds of a continuous action (a Box), for algorithms that clip or sample within them."""

from __future__ import annotations

import torch
from torch import nn

from rlf.tensor_specs import BoundedTensorSpec
from rlf.utils import distributed

__all__ = ["ActionBounds", "check_continuous", "uniform_start_action"]


def check_continuous(owner: str, action_spec) -> None:
    """Refuses an action spec that is not a continuous ``BoundedTensorSpec`` (a Box) with
    finite bounds.

    Raises:
        ValueError: naming ``owner`` and the spec.
    """
    if not (isinstance(action_spec, BoundedTensorSpec) and action_spec.is_continuous):
        raise ValueError(f"{owner} needs a continuous action space (a Box) with finite "
                         f"bounds, got {action_spec}")


class ActionBounds(nn.Module):
    """The finite bounds ``[low, high]`` of a continuous action spec, as float32 buffers that
    follow the algorithm's device; not checkpointed (the spec defines them).

    Args:
        action_spec: a ``BoundedTensorSpec`` with finite bounds, shape ``[d...]``.

    Raises:
        ValueError: for a spec that is not a continuous ``BoundedTensorSpec``.
    """

    # Registered buffers.
    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, action_spec: BoundedTensorSpec):
        super().__init__()
        check_continuous("ActionBounds", action_spec)
        low, high = action_spec.bounds(torch.float32)
        self.register_buffer("low", low, persistent=False)
        self.register_buffer("high", high, persistent=False)

    @property
    def half_range(self) -> torch.Tensor:
        """``(high - low) / 2``, ``[d...]``: the unit of noise scales relative to the range."""
        return (self.high - self.low) / 2

    def clip(self, action: torch.Tensor) -> torch.Tensor:
        """``action`` (``[..., d...]``) clipped elementwise into ``[low, high]``."""
        return torch.maximum(torch.minimum(action, self.high), self.low)

    def uniform_like(self, action: torch.Tensor) -> torch.Tensor:
        """Actions drawn uniformly within the bounds, shaped like ``action`` (``[..., d...]``),
        from torch's generator (one ``rand_like``; a batch draw, ``rlf.utils.distributed``)."""
        return self.low + distributed.rand_like(action) * (self.high - self.low)


def uniform_start_action(action: torch.Tensor, bounds: ActionBounds,
                         num_updates: int) -> torch.Tensor:
    """The start steps of off-policy continuous control (TD3's and SAC's papers): uniform
    actions within ``bounds`` until the first gradient update, then ``action``.

    The uniform draw is made either way, so that torch's random stream (and so a run) does
    not depend on when training starts.

    Args:
        action: ``[B, d...]`` the policy's actions.
        bounds: the action bounds.
        num_updates: the algorithm's ``num_updates`` (an actor's: the learner's count as of
            the parameters it acts with).

    Returns:
        ``[B, d...]`` actions.
    """
    uniform = bounds.uniform_like(action)
    return uniform if num_updates == 0 else action
