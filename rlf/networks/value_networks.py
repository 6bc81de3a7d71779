"""Value networks: ``QNetwork`` (one value per discrete action, DQN),
``RecurrentQNetwork`` (the same with an LSTM core, R2D2), ``CriticNetwork``
(``Q(x, a)`` of a continuous action, SAC, TD3, IQL) and ``ValueNetwork`` (``V(x)``, IQL)."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence, Tuple

import gin
import torch
from torch import nn

from rlf.networks.encoders import (default_encoder_ctor, encoder_output_size,
                                     require_tensor_spec)
from rlf.networks.normalizers import ObservationNormalizer
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec

__all__ = ["QNetwork", "RecurrentQNetwork", "CriticNetwork", "ValueNetwork"]


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
        self.num_actions = _discrete_actions("QNetwork", action_spec)
        if encoder_ctor is None:
            encoder_ctor = default_encoder_ctor("QNetwork", observation_spec)
        self.encoder = encoder_ctor(observation_spec)
        self.head = nn.Linear(encoder_output_size(self.encoder), self.num_actions)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """``[B, ...]`` observations -> ``[B, num_actions]`` float32 action values."""
        return self.head(self.encoder(observation)).float()


def _discrete_actions(name: str, action_spec) -> int:
    if not (isinstance(action_spec, BoundedTensorSpec) and action_spec.is_discrete
            and action_spec.ndim == 0):
        raise ValueError(f"{name} needs a scalar discrete action spec (Discrete), got "
                         f"{action_spec}")
    return int(action_spec.maximum) - int(action_spec.minimum) + 1


@gin.configurable
class RecurrentQNetwork(nn.Module):
    """``Q(x_t, . | h_{t-1})``: an encoder, an LSTM core and a linear (or dueling) head with one
    output per action (R2D2's network, Kapturowski et al. 2019, section 2.3).

    Args:
        observation_spec: ``TensorSpec`` of one observation: ``(C, H, W)`` frames or flat.
        action_spec: a scalar discrete ``BoundedTensorSpec``.
        encoder_ctor: ``encoder_ctor(observation_spec)`` with an ``output_size``; None picks
            ``NatureCNN`` for rank-3 observations and ``MLPEncoder`` otherwise.
        lstm_size: hidden units of the LSTM core.
        dueling: a dueling head, ``Q = V + A - mean_a A`` (Wang et al. 2016), as R2D2's.

    Attributes:
        state_spec: ``(h, c)``, ``[lstm_size]`` float32 each. The caller resets the state at
            FIRST steps (``reset_state_if_necessary``).

    Raises:
        ValueError: for an action spec that is not one bounded discrete scalar, or a nested
            observation without an ``encoder_ctor`` (``require_tensor_spec``).
    """

    def __init__(self, observation_spec: TensorSpec, action_spec: BoundedTensorSpec,
                 encoder_ctor: Optional[Callable[[TensorSpec], nn.Module]] = None,
                 lstm_size: int = 512, dueling: bool = False):
        super().__init__()
        self.num_actions = _discrete_actions("RecurrentQNetwork", action_spec)
        if encoder_ctor is None:
            encoder_ctor = default_encoder_ctor("RecurrentQNetwork", observation_spec)
        self.encoder = encoder_ctor(observation_spec)
        self.lstm = nn.LSTMCell(encoder_output_size(self.encoder), lstm_size)
        self.head = nn.Linear(lstm_size, self.num_actions)
        self.value_head = nn.Linear(lstm_size, 1) if dueling else None
        self.state_spec = (TensorSpec((lstm_size,)), TensorSpec((lstm_size,)))

    def forward(self, observation: torch.Tensor, state: Any
                ) -> Tuple[torch.Tensor, Tuple[torch.Tensor, torch.Tensor]]:
        """``[B, ...]`` observations and ``(h, c)`` ``[B, lstm_size]`` -> ``([B, num_actions]``
        float32 action values, the next ``(h, c)``)."""
        h, c = self.lstm(self.encoder(observation), tuple(state))
        q = self.head(h)
        if self.value_head is not None:
            q = self.value_head(h) + q - q.mean(-1, keepdim=True)
        return q.float(), (h, c)


@gin.configurable
class CriticNetwork(nn.Module):
    """``Q(x, a)`` of a continuous action: an MLP over the flattened observation and action
    (Haarnoja et al. 2018; Fujimoto et al. 2018).

    Args:
        observation_spec: ``TensorSpec`` of one (flat) observation.
        action_spec: a continuous ``BoundedTensorSpec``.
        hidden: hidden layer sizes.
        activation: activation class.
        normalize_observations: standardise the observations (not the actions) by their
            running mean and variance first (``ObservationNormalizer``).

    Attributes:
        normalizer: the ``ObservationNormalizer``, or None.

    Raises:
        ValueError: for a nested observation (``require_tensor_spec``).
    """

    def __init__(self, observation_spec: TensorSpec, action_spec: BoundedTensorSpec,
                 hidden: Sequence[int] = (256, 256), activation=nn.ReLU,
                 normalize_observations: bool = False):
        super().__init__()
        observation_spec = require_tensor_spec("CriticNetwork", observation_spec)
        self.normalizer = (ObservationNormalizer(observation_spec.shape)
                           if normalize_observations else None)
        layers, n = [], int(observation_spec.numel) + int(action_spec.numel)
        for h in hidden:
            layers += [nn.Linear(n, h), activation()]
            n = h
        self.net = nn.Sequential(*layers, nn.Linear(n, 1))

    def forward(self, observation: torch.Tensor, action: torch.Tensor) -> torch.Tensor:
        """``[B, ...]`` observations and ``[B, ...]`` actions -> ``[B]`` float32 values."""
        b = observation.shape[0]
        if self.normalizer is not None:
            observation = self.normalizer(observation)
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
        normalize_observations: standardise the observations by their running mean and
            variance first (``ObservationNormalizer``).

    Attributes:
        normalizer: the ``ObservationNormalizer``, or None.

    Raises:
        ValueError: for a nested observation (``require_tensor_spec``).
    """

    def __init__(self, observation_spec: TensorSpec, hidden: Sequence[int] = (256, 256),
                 activation=nn.ReLU, normalize_observations: bool = False):
        super().__init__()
        observation_spec = require_tensor_spec("ValueNetwork", observation_spec)
        self.normalizer = (ObservationNormalizer(observation_spec.shape)
                           if normalize_observations else None)
        layers, n = [], int(observation_spec.numel)
        for h in hidden:
            layers += [nn.Linear(n, h), activation()]
            n = h
        self.net = nn.Sequential(*layers, nn.Linear(n, 1))

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """``[B, ...]`` observations -> ``[B]`` float32 values."""
        if self.normalizer is not None:
            observation = self.normalizer(observation)
        return self.net(observation.reshape(observation.shape[0], -1).float()).squeeze(-1).float()
