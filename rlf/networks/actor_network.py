"""``ActorNetwork``: a policy without a value head (SAC's actor)."""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import gin
import torch
from torch import nn

from rlf.networks.encoders import MLPEncoder
from rlf.networks.heads import TanhNormalHead
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec

__all__ = ["ActorNetwork"]


@gin.configurable
class ActorNetwork(nn.Module):
    """An encoder and a ``TanhNormalHead`` with a state-dependent standard deviation.

    Args:
        observation_spec: ``TensorSpec`` of one (flat) observation.
        action_spec: a continuous ``BoundedTensorSpec`` with finite bounds.
        encoder_ctor: ``encoder_ctor(observation_spec)`` with an ``output_size``; None: a
            ``MLPEncoder`` of two ReLU layers of 256 units.

    Attributes:
        policy_head: the ``TanhNormalHead``.
    """

    def __init__(self, observation_spec: TensorSpec, action_spec: BoundedTensorSpec,
                 encoder_ctor: Optional[Callable[[TensorSpec], nn.Module]] = None):
        super().__init__()
        if encoder_ctor is None:
            self.encoder = MLPEncoder(observation_spec, hidden=(256, 256),
                                      activation=nn.ReLU)
        else:
            self.encoder = encoder_ctor(observation_spec)
        self.policy_head = TanhNormalHead(self.encoder.output_size, action_spec,
                                          state_dependent_std=True)

    def forward(self, observation: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``[B, ...]`` observations -> ``(loc, scale)`` ``[B, d]`` of the pre-tanh Normal."""
        return self.policy_head(self.encoder(observation))
