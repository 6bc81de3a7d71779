"""Value networks: ``QNetwork`` (one value per discrete action, DQN), ``CriticNetwork``
(``Q(x, a)`` of a continuous action, SAC, TD3, IQL) and ``ValueNetwork`` (``V(x)``, IQL)."""

from __future__ import annotations

from typing import Callable, Optional, Sequence

import gin
import torch
from torch import nn

from rlf.networks.encoders import default_encoder_ctor, require_tensor_spec
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec

__all__ = ["QNetwork", "CriticNetwork", "ValueNetwork"]


@gin.configurable
class QNetwork(nn.Module):
    """``Q(x, .)``: an encoder and a linear layer with one output per action (Mnih et al.
    2015).

    Args:
        observation_spec: ``TensorSpec`` of one observation: ``(C, H, W)`` frames or flat.
        action_spec: a scalar discrete ``BoundedTensorSpec``.
        encoder_ctor: ``encoder_ctor(observation_spec)`` with an ``output_size``; None picks
            ``NatureCNN`` for rank-3 observations and ``MLPEncoder`` otherwise.

    Raises:
        ValueError: for an action spec that is not one bounded discrete scalar, or a nested
            observation without an ``encoder_ctor`` (``require_tensor_spec``).
    """

    def __init__(self, observation_spec: TensorSpec, action_spec: BoundedTensorSpec,
                 encoder_ctor: Optional[Callable[[TensorSpec], nn.Module]] = None):
        super().__init__()
        if not (isinstance(action_spec, BoundedTensorSpec) and action_spec.is_discrete
                and action_spec.ndim == 0):
            raise ValueError(f"QNetwork needs a scalar discrete action spec (Discrete), got "
                             f"{action_spec}")
        if encoder_ctor is None:
            encoder_ctor = default_encoder_ctor("QNetwork", observation_spec)
        self.encoder = encoder_ctor(observation_spec)
        self.num_actions = int(action_spec.maximum) - int(action_spec.minimum) + 1
        self.head = nn.Linear(self.encoder.output_size, self.num_actions)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """``[B, ...]`` observations -> ``[B, num_actions]`` float32 action values."""
        return self.head(self.encoder(observation)).float()


@gin.configurable
class CriticNetwork(nn.Module):
    """``Q(x, a)`` of a continuous action: an MLP over the flattened observation and action
    (Haarnoja et al. 2018; Fujimoto et al. 2018).

    Args:
        observation_spec: ``TensorSpec`` of one (flat) observation.
        action_spec: a continuous ``BoundedTensorSpec``.
        hidden: hidden layer sizes.
        activation: activation class.

    Raises:
        ValueError: for a nested observation (``require_tensor_spec``).
    """

    def __init__(self, observation_spec: TensorSpec, action_spec: BoundedTensorSpec,
                 hidden: Sequence[int] = (256, 256), activation=nn.ReLU):
        super().__init__()
        observation_spec = require_tensor_spec("CriticNetwork", observation_spec)
        layers, n = [], int(observation_spec.numel) + int(action_spec.numel)
        for h in hidden:
            layers += [nn.Linear(n, h), activation()]
            n = h
        self.net = nn.Sequential(*layers, nn.Linear(n, 1))

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``[B, ...]`` observations and ``[B, ...]`` actions -> ``[B]`` float32 values."""
        b = observation.shape[0]
        x = torch.cat([observation.reshape(b, -1).float(), action.reshape(b, -1).float()], -1)
        return self.net(x).squeeze(-1).float()


@gin.configurable
class ValueNetwork(nn.Module):
    """``V(x)``: an MLP over the flattened observation (Kostrikov et al. 2021's value
    network).

    Args:
        observation_spec: ``TensorSpec`` of one (flat) observation.
        hidden: hidden layer sizes.
        activation: activation class.

    Raises:
        ValueError: for a nested observation (``require_tensor_spec``).
    """

    def __init__(self, observation_spec: TensorSpec, hidden: Sequence[int] = (256, 256),
                 activation=nn.ReLU):
        super().__init__()
        observation_spec = require_tensor_spec("ValueNetwork", observation_spec)
        layers, n = [], int(observation_spec.numel)
        for h in hidden:
            layers += [nn.Linear(n, h), activation()]
            n = h
        self.net = nn.Sequential(*layers, nn.Linear(n, 1))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """``[B, ...]`` observations -> ``[B]`` float32 values."""
        return self.net(observation.reshape(observation.shape[0], -1).float()).squeeze(-1).float()
