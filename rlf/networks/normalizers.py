"""``ObservationNormalizer``: a network's first layer that standardises observations by their
running mean and variance (ALF's ``ObservationNormalizer``; Stable-Baselines3's
``VecNormalize``), with statistics that live in the network, not in the environment."""

from __future__ import annotations

from typing import Sequence

import torch
from torch import nn

__all__ = ["ObservationNormalizer"]


class ObservationNormalizer(nn.Module):
    r"""Maps an observation ``x`` to ``clip((x - mu) / sqrt(sigma^2 + epsilon), -c, c)``.

    ``mu`` and ``sigma^2`` are the mean and the (population) variance, per entry, of every
    observation given to ``update``, merged batch by batch exactly in float64 with the
    pairwise update of Chan, Golub and LeVeque (1979, "Updating formulae and a pairwise
    algorithm for computing sample variances"): ``n = n_a + n_b``,
    ``mu = mu_a + delta n_b / n``, ``M2 = M2_a + M2_b + delta^2 n_a n_b / n`` with
    ``delta = mu_b - mu_a`` and ``sigma^2 = M2 / n``. ``forward`` never changes them, so a
    rollout, a training pass and an evaluation with the same statistics see the same inputs.

    Who updates it: ``RLAlgorithm`` calls ``update`` on every ``ObservationNormalizer`` among
    its modules with the observations of each new unroll, after training on it
    (``RLAlgorithm.update_observation_normalizers``). The statistics are buffers: they are
    checkpointed with the network and sent to actor processes with its parameters. Until the
    first update the layer is the identity (``mu = 0``, ``sigma^2 = 1``).

    Args:
        shape: the shape of one observation (``TensorSpec.shape``).
        epsilon: added to the variance under the square root (SB3's 1e-8), so that an entry
            that never varied maps to 0 rather than dividing by 0.
        clipping: ``c > 0``, the bound of the standardised values (SB3's ``clip_obs`` 10).

    Attributes:
        mean: ``[*shape]`` float64 ``mu``.
        var: ``[*shape]`` float64 ``sigma^2``.
        count: ``[]`` float64, the observations seen.

    Raises:
        ValueError: for ``epsilon <= 0`` or ``clipping <= 0``.
    """

    # Registered buffers.
    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, shape: Sequence[int], epsilon: float = 1e-8, clipping: float = 10.0):
        super().__init__()
        if not epsilon > 0 or not clipping > 0:
            raise ValueError(f"ObservationNormalizer: epsilon ({epsilon}) and clipping "
                             f"({clipping}) must be > 0")
        self._shape = torch.Size(shape)
        self._epsilon, self._clipping = float(epsilon), float(clipping)
        self.register_buffer("mean", torch.zeros(self._shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(self._shape, dtype=torch.float64))
        self.register_buffer("count", torch.zeros((), dtype=torch.float64))

    @property
    def shape(self) -> torch.Size:
        """The shape of one observation."""
        return self._shape

    def _check(self, x: torch.Tensor, what: str) -> None:
        n = len(self._shape)
        if tuple(x.shape[x.ndim - n:]) != tuple(self._shape) or x.ndim < n:
            raise ValueError(f"ObservationNormalizer: {what} of shape {tuple(x.shape)} do not "
                             f"end with the observation shape {tuple(self._shape)}")

    @torch.no_grad()
    def update(self, observation: torch.Tensor) -> None:
        """Merges a batch into the statistics.

        Args:
            observation: ``[..., *shape]`` observations (any outer dims, e.g. ``[T, B]``),
                any real dtype; an empty batch changes nothing.

        Raises:
            ValueError: if ``observation`` does not end with ``shape``.
        """
        self._check(observation, "observations to update with")
        x = observation.reshape(-1, *self._shape).to(self.mean.device, torch.float64)
        n_b = x.shape[0]
        if n_b == 0:
            return
        mean_b = x.mean(0)
        m2_b = (x - mean_b).square().sum(0)
        n_a = self.count.clone()
        n = n_a + n_b
        delta = mean_b - self.mean
        m2 = self.var * n_a + m2_b + delta.square() * (n_a * n_b / n)
        self.mean.add_(delta * (n_b / n))
        self.var.copy_(m2 / n)
        self.count.copy_(n)

    def forward(self, observation: torch.Tensor) -> torch.Tensor:
        """``[..., *shape]`` observations -> the same shape in float32, standardised and
        clipped.

        Raises:
            ValueError: if ``observation`` does not end with ``shape``.
        """
        self._check(observation, "observations")
        mean = self.mean.to(torch.float32)
        scale = torch.rsqrt(self.var + self._epsilon).to(torch.float32)
        x = (observation.float() - mean) * scale
        return x.clamp(-self._clipping, self._clipping)

    def extra_repr(self) -> str:
        return (f"shape={tuple(self._shape)}, epsilon={self._epsilon}, "
                f"clipping={self._clipping}")
