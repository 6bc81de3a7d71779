"""Policy heads for Discrete (Categorical), MultiDiscrete (independent Categoricals) and Box
(diagonal Normal) action specs. A head maps features to the policy's *parameters* (a tensor
or a tuple of tensors, storable in replay as the behaviour policy) and computes samples,
log-probabilities and entropies from parameters with any outer dims (``[B]`` or ``[T, B]``)."""

from __future__ import annotations

from typing import Tuple

import torch
from torch import nn

from rlf.tensor_specs import BoundedTensorSpec

__all__ = ["CategoricalHead", "MultiCategoricalHead", "NormalHead", "make_policy_head"]


class CategoricalHead(nn.Module):
    """Logits ``[..., N]`` of a Discrete action ``[...]`` int64 in ``[minimum, maximum]``."""

    def __init__(self, input_size: int, spec: BoundedTensorSpec):
        super().__init__()
        self._min = int(spec.minimum)
        self.num_actions = int(spec.maximum) - self._min + 1
        self.fc = nn.Linear(input_size, self.num_actions)
        nn.init.orthogonal_(self.fc.weight, gain=0.01)  # near-uniform initial policy
        nn.init.zeros_(self.fc.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Features ``[..., input_size]`` -> logits ``[..., N]``."""
        return self.fc(x)

    def sample(self, logits, greedy: bool = False) -> torch.Tensor:
        """Actions ``[...]`` int64 drawn from ``softmax(logits)`` (``[..., N]``), or its mode
        when ``greedy``."""
        a = logits.argmax(-1) if greedy else torch.multinomial(
            torch.softmax(logits.reshape(-1, logits.shape[-1]).float(), -1), 1).reshape(
            logits.shape[:-1])
        return a + self._min

    def log_prob(self, logits, action) -> torch.Tensor:
        """``log pi(a|x)`` ``[...]`` float32 of actions ``[...]`` under logits ``[..., N]``."""
        return torch.log_softmax(logits.float(), -1).gather(
            -1, (action.long() - self._min).unsqueeze(-1)).squeeze(-1)

    def entropy(self, logits) -> torch.Tensor:
        """Entropy ``[...]`` float32 (nats) of the policy with logits ``[..., N]``."""
        logp = torch.log_softmax(logits.float(), -1)
        return -(logp.exp() * logp).sum(-1)


class MultiCategoricalHead(nn.Module):
    """A tuple of logits, one ``[..., N_i]`` per entry of a MultiDiscrete action ``[..., K]``."""

    def __init__(self, input_size: int, spec: BoundedTensorSpec):
        super().__init__()
        lo = torch.as_tensor(spec.minimum).expand(spec.shape).reshape(-1)
        hi = torch.as_tensor(spec.maximum).expand(spec.shape).reshape(-1)
        self.heads = nn.ModuleList(
            CategoricalHead(input_size, BoundedTensorSpec((), torch.int64, int(a), int(b)))
            for a, b in zip(lo, hi))

    def forward(self, x) -> Tuple[torch.Tensor, ...]:
        """Features ``[..., input_size]`` -> ``K`` logits ``[..., N_i]``."""
        return tuple(h(x) for h in self.heads)

    def sample(self, logits, greedy: bool = False) -> torch.Tensor:
        """Actions ``[..., K]`` int64, one independent draw (or mode) per entry."""
        return torch.stack([h.sample(lg, greedy) for h, lg in zip(self.heads, logits)], -1)

    def log_prob(self, logits, action) -> torch.Tensor:
        """``log pi(a|x)`` ``[...]``: the sum over the ``K`` entries of ``action [..., K]``."""
        return sum(h.log_prob(lg, action[..., i])
                   for i, (h, lg) in enumerate(zip(self.heads, logits)))

    def entropy(self, logits) -> torch.Tensor:
        """Entropy ``[...]`` (nats): the sum of the ``K`` entries' entropies."""
        return sum(h.entropy(lg) for h, lg in zip(self.heads, logits))


class NormalHead(nn.Module):
    """``(loc, scale)`` of a diagonal Normal over a Box action ``[..., d]``; the log standard
    deviation is a learned state-independent parameter. Samples are not squashed: the
    environment (or a wrapper) clips them to the bounds."""

    def __init__(self, input_size: int, spec: BoundedTensorSpec, initial_log_std: float = 0.0):
        super().__init__()
        self._shape = tuple(spec.shape)
        d = int(spec.numel)
        self.fc = nn.Linear(input_size, d)
        nn.init.orthogonal_(self.fc.weight, gain=0.01)
        nn.init.zeros_(self.fc.bias)
        self.log_std = nn.Parameter(torch.full((d,), float(initial_log_std)))

    def forward(self, x) -> Tuple[torch.Tensor, torch.Tensor]:
        """Features ``[..., input_size]`` -> ``(loc, scale)``, each ``[..., d]`` (``d`` = the
        action's number of elements)."""
        loc = self.fc(x)
        return loc, self.log_std.exp().expand_as(loc)

    def sample(self, params, greedy: bool = False) -> torch.Tensor:
        """Actions ``[..., *action_shape]`` drawn from ``N(loc, scale)``, or ``loc`` when
        ``greedy``."""
        loc, scale = params
        a = loc if greedy else loc + scale * torch.randn_like(loc)
        return a.reshape(a.shape[:-1] + self._shape)

    def log_prob(self, params, action) -> torch.Tensor:
        """``log pi(a|x)`` ``[...]`` float32: the density summed over the ``d`` elements."""
        loc, scale = params
        a = action.reshape(loc.shape)
        return torch.distributions.Normal(loc.float(), scale.float()).log_prob(a).sum(-1)

    def entropy(self, params) -> torch.Tensor:
        """Entropy ``[...]`` (nats) of the diagonal Normal."""
        loc, scale = params
        return torch.distributions.Normal(loc.float(), scale.float()).entropy().sum(-1)


def make_policy_head(input_size: int, action_spec) -> nn.Module:
    """The head for ``action_spec``.

    Raises:
        ValueError: naming the spec, if it is not one bounded discrete scalar (Discrete), a
            bounded discrete vector (MultiDiscrete) or a bounded continuous tensor (Box).
    """
    if isinstance(action_spec, BoundedTensorSpec):
        if action_spec.is_discrete and action_spec.ndim == 0:
            return CategoricalHead(input_size, action_spec)
        if action_spec.is_discrete and action_spec.ndim == 1:
            return MultiCategoricalHead(input_size, action_spec)
        if action_spec.is_continuous:
            return NormalHead(input_size, action_spec)
    raise ValueError(f"no policy head for action spec {action_spec}: supported are a scalar "
                     f"discrete BoundedTensorSpec (Discrete), a rank-1 discrete one "
                     f"(MultiDiscrete) and a continuous one (Box)")
