"""ActorCriticNetwork: encoder -> optional LSTM core -> policy head and value head."""

from __future__ import annotations

from typing import Any, Callable, Optional, Tuple

import gin
import torch
from torch import nn

from rlf.networks.encoders import default_encoder_ctor, encoder_output_size
from rlf.networks.heads import make_policy_head
from rlf.tensor_specs import TensorSpec

__all__ = ["ActorCriticNetwork", "greedy_action"]


@gin.configurable
class ActorCriticNetwork(nn.Module):
    """IMPALA's agent network (shallow or deep, feed-forward or recurrent).

    Args:
        observation_spec: ``TensorSpec`` of one observation: ``(C, H, W)`` images or flat.
        action_spec: ``BoundedTensorSpec`` (Discrete, MultiDiscrete or Box), or a float
            ``TensorSpec`` (a Box without finite bounds: an unbounded Normal).
        encoder_ctor: ``encoder_ctor(observation_spec)`` with an ``output_size`` attribute;
            None picks ``NatureCNN`` for rank-3 observations and ``MLPEncoder`` otherwise.
        lstm_size: hidden units of an LSTM core between the encoder and the heads (IMPALA's
            recurrent agent); None for a feed-forward network.
        shared_encoder: one encoder (and LSTM core) for the policy and the value (IMPALA,
            images); False gives the value its own encoder (often better for small MLPs, e.g.
            CartPole) and its own LSTM core (sb3-contrib's ``enable_critic_lstm``), so the
            value loss cannot swamp the policy's memory.
        tanh_squash: for a Box action, a ``TanhNormalHead`` (samples inside the bounds)
            instead of a ``NormalHead`` (samples the algorithm or environment clips).

    Attributes:
        state_spec: ``(h, c)`` specs ``[lstm_size]`` each, ``((h, c), (h_v, c_v))`` with
            the value's own core, or ``()``. The caller resets the state at FIRST steps
            (``reset_state_if_necessary``).

    Raises:
        ValueError: for an action spec no head serves (naming it), or a nested observation
            without an ``encoder_ctor`` (``require_tensor_spec``).
    """

    def __init__(self, observation_spec: TensorSpec, action_spec,
                 encoder_ctor: Optional[Callable[[TensorSpec], nn.Module]] = None,
                 lstm_size: Optional[int] = None, shared_encoder: bool = True,
                 tanh_squash: bool = False):
        super().__init__()
        if encoder_ctor is None:
            encoder_ctor = default_encoder_ctor("ActorCriticNetwork", observation_spec)
        self.encoder = encoder_ctor(observation_spec)
        self.value_encoder = None if shared_encoder else encoder_ctor(observation_spec)
        n = encoder_output_size(self.encoder)
        self.lstm: Optional[nn.LSTMCell] = None
        self.value_lstm: Optional[nn.LSTMCell] = None
        self.state_spec: Any = ()
        n_v = n
        if lstm_size:
            self.lstm = nn.LSTMCell(n, lstm_size)
            n = n_v = lstm_size
            self.state_spec = (TensorSpec((lstm_size,)), TensorSpec((lstm_size,)))
            if not shared_encoder:
                assert self.value_encoder is not None  # not shared_encoder
                self.value_lstm = nn.LSTMCell(encoder_output_size(self.value_encoder),
                                              lstm_size)
                self.state_spec = (self.state_spec, self.state_spec)
        self.policy_head = make_policy_head(n, action_spec, tanh_squash=tanh_squash)
        self.value_head = nn.Linear(n_v, 1)

    def forward(self, observation: torch.Tensor, state: Any = ()
                ) -> Tuple[Any, torch.Tensor, Any]:
        """``[B, ...]`` observations -> ``(policy params, value [B], next state)``."""
        x = self.encoder(observation)
        v = x if self.value_encoder is None else self.value_encoder(observation)
        if self.value_lstm is not None:
            assert self.lstm is not None  # (value_lstm only beside it)
            (h, c), (h_v, c_v) = state
            h, c = self.lstm(x, (h, c))
            h_v, c_v = self.value_lstm(v, (h_v, c_v))
            state, x, v = ((h, c), (h_v, c_v)), h, h_v
        elif self.lstm is not None:
            h, c = self.lstm(x, tuple(state))
            state, x, v = (h, c), h, h
        return self.policy_head(x), self.value_head(v).squeeze(-1), state


def greedy_action(network: nn.Module, observation: Any, state: Any = ()) -> Tuple[Any, Any]:
    """The policy's mode for ``[B, ...]`` observations and the next state, for evaluation
    (IMPALA's and PPO's ``predict_step``).

    Args:
        network: an ``ActorCriticNetwork``-like module returning ``(params, value, state)``,
            with a ``policy_head``.
        observation: ``[B, ...]`` observations.
        state: its recurrent state (``()`` for none).

    Returns:
        ``(action [B, ...], next state)``.
    """
    params, _, state = network(observation, state)
    head: Any = network.policy_head
    return head.sample(params, greedy=True), state
