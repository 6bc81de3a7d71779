"""Policy heads for Discrete (Categorical), MultiDiscrete and MultiBinary (independent
Categoricals) and Box (diagonal Normal, unsquashed or tanh-squashed into the bounds) action
specs. A head maps features to the policy's *parameters* (a tensor or a tuple of tensors,
storable in replay as the behaviour policy) and computes samples, log-probabilities and
entropies from parameters with any outer dims (``[B]`` or ``[T, B]``)."""

from __future__ import annotations

import math
from typing import List, Tuple, cast

import torch
from torch import nn

from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from rlf.utils import distributed

__all__ = ["CategoricalHead", "ClipToBounds", "MultiCategoricalHead", "NormalHead",
           "TanhNormalHead", "make_policy_head"]


_LOG_SQRT_2PI = 0.5 * math.log(2 * math.pi)


def _normal_log_prob(loc: torch.Tensor, scale: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """Elementwise log-density of ``N(loc, scale)`` at ``x``, computed directly: no argument
    validation, hence no device-to-host synchronisation (``torch.distributions`` checks its
    arguments on the host)."""
    return -0.5 * ((x - loc) / scale) ** 2 - torch.log(scale) - _LOG_SQRT_2PI


class CategoricalHead(nn.Module):
    """Logits ``[..., N]`` of a Discrete action ``[...]`` in ``[minimum, maximum]``, of the
    spec's integer dtype (int64 for gymnasium's Discrete)."""

    def __init__(self, input_size: int, spec: BoundedTensorSpec):
        super().__init__()
        self._dtype = spec.dtype
        self._min = int(spec.minimum)
        self.num_actions = int(spec.maximum) - self._min + 1
        self.fc = nn.Linear(input_size, self.num_actions)
        nn.init.orthogonal_(self.fc.weight, gain=0.01)  # near-uniform initial policy
        nn.init.zeros_(self.fc.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Features ``[..., input_size]`` -> logits ``[..., N]``."""
        return self.fc(x)

    def sample(self, logits, greedy: bool = False) -> torch.Tensor:
        """Actions ``[...]`` (the spec's dtype) drawn from ``softmax(logits)``
        (``[..., N]``), or its mode when ``greedy``."""
        a = logits.argmax(-1) if greedy else distributed.categorical_sample(
            torch.softmax(logits.reshape(-1, logits.shape[-1]).float(), -1)).reshape(
            logits.shape[:-1])
        return (a + self._min).to(self._dtype)

    def log_prob(self, logits, action) -> torch.Tensor:
        """``log pi(a|x)`` ``[...]`` float32 of actions ``[...]`` under logits ``[..., N]``."""
        return torch.log_softmax(logits.float(), -1).gather(
            -1, (action.long() - self._min).unsqueeze(-1)).squeeze(-1)

    def entropy(self, logits) -> torch.Tensor:
        """Entropy ``[...]`` float32 (nats) of the policy with logits ``[..., N]``."""
        logp = torch.log_softmax(logits.float(), -1)
        return -(logp.exp() * logp).sum(-1)


class MultiCategoricalHead(nn.Module):
    """A tuple of logits, one ``[..., N_i]`` per entry of a MultiDiscrete or MultiBinary
    action ``[..., *shape]`` (``K`` entries in all, each an independent Categorical), of the
    spec's integer dtype (int64 for MultiDiscrete, int8 for MultiBinary)."""

    def __init__(self, input_size: int, spec: BoundedTensorSpec):
        super().__init__()
        self._shape = tuple(spec.shape)
        self._dtype = spec.dtype
        lo, hi = (b.reshape(-1) for b in spec.bounds(torch.int64))
        self.heads = nn.ModuleList(
            CategoricalHead(input_size, BoundedTensorSpec((), torch.int64, int(a), int(b)))
            for a, b in zip(lo, hi))

    def forward(self, x) -> Tuple[torch.Tensor, ...]:
        """Features ``[..., input_size]`` -> ``K`` logits ``[..., N_i]``."""
        return tuple(h(x) for h in self.heads)

    def _heads(self) -> List[CategoricalHead]:
        return [cast(CategoricalHead, h) for h in self.heads]

    def sample(self, logits, greedy: bool = False) -> torch.Tensor:
        """Actions ``[..., *shape]`` (the spec's dtype), one independent draw (or mode) per
        entry."""
        a = torch.stack([h.sample(lg, greedy) for h, lg in zip(self._heads(), logits)], -1)
        return a.reshape(a.shape[:-1] + self._shape).to(self._dtype)

    def log_prob(self, logits, action) -> torch.Tensor:
        """``log pi(a|x)`` ``[...]``: the sum over the ``K`` entries of ``action
        [..., *shape]``."""
        action = action.reshape(action.shape[:action.ndim - len(self._shape)] + (-1,))
        return cast(torch.Tensor, sum(h.log_prob(lg, action[..., i])
                                      for i, (h, lg) in enumerate(zip(self._heads(), logits))))

    def entropy(self, logits) -> torch.Tensor:
        """Entropy ``[...]`` (nats): the sum of the ``K`` entries' entropies."""
        return cast(torch.Tensor, sum(h.entropy(lg) for h, lg in zip(self._heads(), logits)))


class NormalHead(nn.Module):
    """``(loc, scale)`` of a diagonal Normal over a Box action ``[..., d]``; the log standard
    deviation is a learned state-independent parameter. Samples and the mean are not
    squashed and may leave the Box: an algorithm clips what it sends to the environment
    (``ClipToBounds``), since rlf's environments take actions as they are (MuJoCo clamps the
    control but charges its cost on the unclipped action)."""

    def __init__(self, input_size: int, spec: TensorSpec, initial_log_std: float = 0.0):
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
        a = loc if greedy else loc + scale * distributed.randn_like(loc)
        return a.reshape(a.shape[:-1] + self._shape)

    def log_prob(self, params, action) -> torch.Tensor:
        """``log pi(a|x)`` ``[...]`` float32: the density summed over the ``d`` elements."""
        loc, scale = params
        a = action.reshape(loc.shape)
        return _normal_log_prob(loc.float(), scale.float(), a.float()).sum(-1)

    def entropy(self, params) -> torch.Tensor:
        """Entropy ``[...]`` (nats) of the diagonal Normal."""
        _, scale = params
        return (0.5 + _LOG_SQRT_2PI + torch.log(scale.float())).sum(-1)


class TanhNormalHead(nn.Module):
    """A diagonal Normal squashed by ``tanh`` into a Box's bounds (SAC's policy, Haarnoja et
    al. 2018, appendix C): ``a = low + (tanh(u) + 1) (high - low) / 2`` with
    ``u ~ N(loc, scale)``. Parameters are ``(loc, scale)`` of ``u``, each ``[..., d]``.

    Args:
        input_size: features in.
        spec: the bounded continuous action spec (finite bounds).
        state_dependent_std: the log standard deviation is an output of the layer (SAC) or
            a learned state-independent parameter (PPO).
        log_std_bounds: ``(min, max)`` of the log standard deviation (state-dependent:
            squashed smoothly into it).
        initial_log_std: the log standard deviation's initial value (state-dependent: at
            zero features).

    Raises:
        ValueError: if the spec's bounds are not finite.
    """

    # Registered buffers.
    _low: torch.Tensor
    _half_range: torch.Tensor

    def __init__(self, input_size: int, spec: BoundedTensorSpec,
                 state_dependent_std: bool = True,
                 log_std_bounds: Tuple[float, float] = (-5.0, 2.0),
                 initial_log_std: float = 0.0):
        super().__init__()
        self._shape = tuple(spec.shape)
        d = int(spec.numel)
        low, high = (b.reshape(-1) for b in spec.bounds(torch.float32))
        if not (torch.isfinite(low).all() and torch.isfinite(high).all()):
            raise ValueError(f"TanhNormalHead needs finite action bounds, got {spec}")
        self.register_buffer("_low", low, persistent=False)
        self.register_buffer("_half_range", (high - low) / 2, persistent=False)
        self._bounds = log_std_bounds
        self.state_dependent_std = state_dependent_std
        self.fc = nn.Linear(input_size, 2 * d if state_dependent_std else d)
        nn.init.orthogonal_(self.fc.weight, gain=0.01)
        nn.init.zeros_(self.fc.bias)
        lo, hi = log_std_bounds
        if state_dependent_std:  # the initial log standard deviation is initial_log_std
            y = 2 * (float(initial_log_std) - lo) / (hi - lo) - 1
            with torch.no_grad():
                self.fc.bias[d:] = math.atanh(min(max(y, -0.999), 0.999))
        self.log_std = (None if state_dependent_std
                        else nn.Parameter(torch.full((d,), float(initial_log_std))))

    def forward(self, x) -> Tuple[torch.Tensor, torch.Tensor]:
        """Features ``[..., input_size]`` -> ``(loc, scale)`` of ``u``, each ``[..., d]``."""
        if self.state_dependent_std:
            loc, log_std = self.fc(x).chunk(2, -1)
            lo, hi = self._bounds
            log_std = lo + 0.5 * (hi - lo) * (torch.tanh(log_std) + 1)
            return loc, log_std.exp()
        loc = self.fc(x)
        assert self.log_std is not None  # a state-independent std
        return loc, self.log_std.clamp(*self._bounds).exp().expand_as(loc)

    def _squash(self, u):
        a = self._low + (torch.tanh(u) + 1) * self._half_range
        return a.reshape(a.shape[:-1] + self._shape)

    def _log_prob_u(self, params, u) -> torch.Tensor:
        loc, scale = params
        # log |da/du| = log(half_range) + log(1 - tanh(u)^2), the latter in a stable form
        log_det = (torch.log(self._half_range)
                   + 2 * (math.log(2.0) - u - nn.functional.softplus(-2 * u)))
        return (_normal_log_prob(loc.float(), scale.float(), u) - log_det).sum(-1)

    def sample(self, params, greedy: bool = False) -> torch.Tensor:
        """Actions ``[..., *action_shape]`` inside the bounds (the squashed mean when
        ``greedy``); no gradient."""
        loc, scale = params
        with torch.no_grad():
            u = loc if greedy else loc + scale * distributed.randn_like(loc)
            return self._squash(u)

    def rsample_with_log_prob(self, params) -> Tuple[torch.Tensor, torch.Tensor]:
        """A reparameterised sample ``[..., *action_shape]`` (gradient flows into ``params``)
        and its ``log pi(a|x)`` ``[...]`` (with the tanh change of variables)."""
        loc, scale = params
        u = loc + scale * distributed.randn_like(loc)
        return self._squash(u), self._log_prob_u(params, u)

    def log_prob(self, params, action) -> torch.Tensor:
        """``log pi(a|x)`` ``[...]`` float32 of actions inside the bounds (``u`` recovered by
        ``atanh``, clamped 1e-6 inside the bounds)."""
        loc, _ = params
        y = (action.reshape(loc.shape).float() - self._low) / self._half_range - 1
        u = torch.atanh(y.clamp(-1 + 1e-6, 1 - 1e-6))
        return self._log_prob_u(params, u)

    def entropy(self, params) -> torch.Tensor:
        """A one-sample estimate ``-log pi(a|x)`` ``[...]`` of the entropy (nats; there is no
        closed form), differentiable through the reparameterised sample."""
        return -self.rsample_with_log_prob(params)[1]


class ClipToBounds(nn.Module):
    """Clips a Box action ``[..., *shape]`` to the spec's bounds before it reaches the
    environment; the identity for discrete specs and a Box without finite bounds.

    A Normal policy's sample can fall outside the Box. The environment gets the clipped
    action, while the algorithm keeps training on the sample it drew (the PPO paper's and
    Stable-Baselines3's choice): the clipped action's density is not the policy's.

    Args:
        action_spec: the action's spec (a ``BoundedTensorSpec`` for clipping to happen).
    """

    # Registered buffers.
    low: torch.Tensor
    high: torch.Tensor

    def __init__(self, action_spec):
        super().__init__()
        self.active = isinstance(action_spec, BoundedTensorSpec) and action_spec.is_continuous
        if self.active:
            low, high = action_spec.bounds(torch.float32)
            self.register_buffer("low", low, persistent=False)
            self.register_buffer("high", high, persistent=False)

    def forward(self, action: torch.Tensor) -> torch.Tensor:
        """``action`` clipped elementwise to ``[low, high]`` (or itself)."""
        if not self.active:
            return action
        return torch.max(torch.min(action, self.high), self.low)


def make_policy_head(input_size: int, action_spec, tanh_squash: bool = False) -> nn.Module:
    """The head for ``action_spec``; ``tanh_squash`` picks ``TanhNormalHead`` (with a
    state-independent standard deviation) over ``NormalHead`` for a Box. A Box with no finite
    bound (a plain float ``TensorSpec``) gets a ``NormalHead``, whose samples are unbounded.

    Raises:
        ValueError: naming the spec, if it is not one bounded discrete scalar (Discrete), a
            bounded discrete tensor (MultiDiscrete, MultiBinary) or a continuous tensor
            (Box), or if
            ``tanh_squash`` is asked of a Box without finite bounds.
    """
    if type(action_spec) is TensorSpec and action_spec.is_continuous:
        if tanh_squash:
            raise ValueError(f"TanhNormalHead squashes actions into finite bounds; the action "
                             f"space has none ({action_spec}): give the environment's Box "
                             f"finite bounds, or use an unsquashed Normal (tanh_squash=False)")
        return NormalHead(input_size, action_spec)
    if isinstance(action_spec, BoundedTensorSpec):
        if action_spec.is_discrete and action_spec.ndim == 0:
            return CategoricalHead(input_size, action_spec)
        if action_spec.is_discrete and action_spec.ndim >= 1:
            return MultiCategoricalHead(input_size, action_spec)
        if action_spec.is_continuous:
            if tanh_squash:
                return TanhNormalHead(input_size, action_spec, state_dependent_std=False)
            return NormalHead(input_size, action_spec)
    raise ValueError(f"no policy head for action spec {action_spec}: supported are a scalar "
                     f"discrete BoundedTensorSpec (Discrete), a discrete tensor one "
                     f"(MultiDiscrete, MultiBinary) and a continuous one (Box), each alone "
                     f"(not in a nest)")
