"""Policies without a value head: ``ActorNetwork`` (SAC's) and ``DeterministicActorNetwork``
(TD3's)."""

from __future__ import annotations

from typing import Callable, Optional, Tuple

import gin
import torch
from torch import nn

from rlf.networks.encoders import MLPEncoder, encoder_output_size
from rlf.networks.heads import TanhNormalHead
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec

__all__ = ["ActorNetwork", "DeterministicActorNetwork"]


def _encoder(observation_spec: TensorSpec,
             encoder_ctor: Optional[Callable[[TensorSpec], nn.Module]]) -> nn.Module:
    """``encoder_ctor(observation_spec)``, or two ReLU layers of 256 units if it is None."""
    if encoder_ctor is None:
        return MLPEncoder(observation_spec, hidden=(256, 256), activation=nn.ReLU)
    return encoder_ctor(observation_spec)


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
        self.encoder = _encoder(observation_spec, encoder_ctor)
        self.policy_head = TanhNormalHead(encoder_output_size(self.encoder), action_spec,
                                          state_dependent_std=True)

    def forward(self, observation: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        """``[B, ...]`` observations -> ``(loc, scale)`` ``[B, d]`` of the pre-tanh Normal."""
        return self.policy_head(self.encoder(observation))


@gin.configurable
class DeterministicActorNetwork(nn.Module):
    """A deterministic policy ``mu(x)``: an encoder and a linear layer squashed by tanh into
    the action bounds (Lillicrap et al. 2016; Fujimoto et al. 2018: TD3's actor).

    Args:
        observation_spec: ``TensorSpec`` of one (flat) observation.
        action_spec: a continuous ``BoundedTensorSpec`` with finite bounds.
        encoder_ctor: ``encoder_ctor(observation_spec)`` with an ``output_size``; None: a
            ``MLPEncoder`` of two ReLU layers of 256 units.
    """

    # Registered buffers.
    _center: torch.Tensor
    _scale: torch.Tensor

    def __init__(self, observation_spec: TensorSpec, action_spec: BoundedTensorSpec,
                 encoder_ctor: Optional[Callable[[TensorSpec], nn.Module]] = None):
        super().__init__()
        self.encoder = _encoder(observation_spec, encoder_ctor)
        self._shape = tuple(action_spec.shape)
        self.layer = nn.Linear(encoder_output_size(self.encoder), int(action_spec.numel))
        low, high = action_spec.bounds(torch.float32)
        self.register_buffer("_center", (high + low) / 2, persistent=False)
        self.register_buffer("_scale", (high - low) / 2, persistent=False)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """``[B, ...]`` observations -> ``[B, *action_shape]`` float32 actions inside the
        bounds."""
        a = torch.tanh(self.layer(self.encoder(observation)).float())
        return self._center + self._scale * a.view(a.shape[0], *self._shape)
