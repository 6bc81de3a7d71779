"""Conversion of gymnasium spaces to rlf tensor specs."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch

from rlf.tensor_specs import BoundedTensorSpec, TensorSpec

__all__ = ["spec_from_space"]


def spec_from_space(space: gym.Space) -> Any:
    """Converts a single (unbatched) gymnasium space to a nest of specs.

    - ``Box`` -> ``BoundedTensorSpec`` with its bounds (``TensorSpec`` if all bounds are
      infinite), same shape and dtype (uint8 images stay uint8).
    - ``Discrete(n, start)`` -> ``BoundedTensorSpec((), int64, start, start + n - 1)``.
    - ``MultiDiscrete(nvec, start)`` -> ``BoundedTensorSpec(nvec.shape, int64, start,
      start + nvec - 1)``.
    - ``MultiBinary(n)`` -> ``BoundedTensorSpec(shape, int8, 0, 1)``.
    - ``Dict`` -> dict of specs; ``Tuple`` -> tuple of specs.

    Raises:
        ValueError: for space types with no tensor form (``Text``, ``Graph``, ...).
    """
    if isinstance(space, gym.spaces.Box):
        low = np.asarray(space.low, dtype=np.float64)
        high = np.asarray(space.high, dtype=np.float64)
        if not np.isfinite(low).any() and not np.isfinite(high).any():
            return TensorSpec(space.shape, space.dtype)
        return BoundedTensorSpec(space.shape, space.dtype, _squeeze(space.low),
                                 _squeeze(space.high))
    if isinstance(space, gym.spaces.Discrete):
        start = int(space.start)
        return BoundedTensorSpec((), torch.int64, start, start + int(space.n) - 1)
    if isinstance(space, gym.spaces.MultiDiscrete):
        nvec = np.asarray(space.nvec, dtype=np.int64)
        starts = np.asarray(space.start, dtype=np.int64)
        return BoundedTensorSpec(nvec.shape, torch.int64, _squeeze(starts),
                                 _squeeze(starts + nvec - 1))
    if isinstance(space, gym.spaces.MultiBinary):
        return BoundedTensorSpec(space.shape, torch.int8, 0, 1)
    if isinstance(space, gym.spaces.Dict):
        return {k: spec_from_space(s) for k, s in space.spaces.items()}
    if isinstance(space, gym.spaces.Tuple):
        return tuple(spec_from_space(s) for s in space.spaces)
    raise ValueError(f"spec_from_space: no tensor spec for space {space!r} "
                     f"(supported: Box, Discrete, MultiDiscrete, MultiBinary, Dict, Tuple)")


def _squeeze(bound: np.ndarray):
    """A bound that is the same everywhere becomes a scalar (as Box(low=0, high=255) was)."""
    bound = np.asarray(bound)
    if bound.size and np.all(bound == bound.flat[0]):
        return bound.flat[0].item()
    return bound

