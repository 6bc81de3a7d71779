"""TensorSpec and BoundedTensorSpec: the shape and dtype of one tensor without its outer dims.

A spec describes a single sample (``[...]``); tensors built from it get ``outer_dims``
prepended (``[B, ...]`` for a batch, ``[T, B, ...]`` for an unroll).
"""

from __future__ import annotations

import warnings
from typing import Any, Sequence, Tuple, Union

import numpy as np
import torch

from rlf import nest

__all__ = ["TensorSpec", "BoundedTensorSpec", "torch_dtype", "spec_from_tensors", "validate_nest"]

_NUMPY_TO_TORCH = {
    np.dtype(np.bool_): torch.bool, np.dtype(np.uint8): torch.uint8,
    np.dtype(np.int8): torch.int8, np.dtype(np.int16): torch.int16,
    np.dtype(np.int32): torch.int32, np.dtype(np.int64): torch.int64,
    np.dtype(np.float16): torch.float16, np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
}


def torch_dtype(dtype: Any) -> torch.dtype:
    """Converts a torch dtype, numpy dtype/type or dtype name (``"float32"``) to a torch dtype.

    Raises:
        TypeError: if ``dtype`` names no supported dtype.
    """
    if isinstance(dtype, torch.dtype):
        return dtype
    try:
        return _NUMPY_TO_TORCH[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise TypeError(f"Unsupported dtype {dtype!r}; use a torch dtype such as torch.float32 "
                        f"or one of {sorted(str(d) for d in _NUMPY_TO_TORCH)}") from None


def _shape(shape: Union[int, Sequence[int], torch.Size]) -> torch.Size:
    if isinstance(shape, int):
        shape = (shape,)
    shape = torch.Size(int(d) for d in shape)
    if any(d < 0 for d in shape):
        raise ValueError(f"TensorSpec shape must be non-negative, got {tuple(shape)}")
    return shape


class TensorSpec:
    """Shape and dtype of a tensor, excluding outer (batch/time) dimensions.

    Args:
        shape: the per-sample shape, e.g. ``(4, 84, 84)``; an int means ``(int,)``.
        dtype: a torch dtype (numpy dtypes and names like ``"uint8"`` are converted).
    """

    __slots__ = ("_shape", "_dtype")

    def __init__(self, shape: Union[int, Sequence[int]] = (), dtype: Any = torch.float32):
        self._shape = _shape(shape)
        self._dtype = torch_dtype(dtype)

    @classmethod
    def from_tensor(cls, tensor: torch.Tensor, from_dim: int = 0) -> "TensorSpec":
        """Spec of ``tensor.shape[from_dim:]`` with ``tensor.dtype``."""
        return cls(tensor.shape[from_dim:], tensor.dtype)

    @classmethod
    def from_array(cls, array: Any, from_dim: int = 0) -> "TensorSpec":
        """Spec of a numpy array (or array-like): ``shape[from_dim:]`` and its dtype."""
        array = np.asarray(array)
        return cls(array.shape[from_dim:], array.dtype)

    @property
    def shape(self) -> torch.Size:
        """Per-sample shape (``torch.Size``)."""
        return self._shape

    @property
    def dtype(self) -> torch.dtype:
        """The torch dtype."""
        return self._dtype

    @property
    def ndim(self) -> int:
        """Number of per-sample dimensions."""
        return len(self._shape)

    @property
    def numel(self) -> int:
        """Number of elements of one sample."""
        return int(np.prod(self._shape, dtype=np.int64))

    @property
    def is_discrete(self) -> bool:
        """True for integer and bool dtypes."""
        return not (self._dtype.is_floating_point or self._dtype.is_complex)

    @property
    def is_continuous(self) -> bool:
        """True for floating-point dtypes."""
        return self._dtype.is_floating_point

    def _full_shape(self, outer_dims) -> Tuple[int, ...]:
        if isinstance(outer_dims, int):
            outer_dims = (outer_dims,)
        return tuple(outer_dims) + tuple(self._shape)

    def zeros(self, outer_dims: Sequence[int] = ()) -> torch.Tensor:
        """A zero tensor of shape ``outer_dims + shape``."""
        return torch.zeros(self._full_shape(outer_dims), dtype=self._dtype)

    def ones(self, outer_dims: Sequence[int] = ()) -> torch.Tensor:
        """A tensor of ones of shape ``outer_dims + shape``."""
        return torch.ones(self._full_shape(outer_dims), dtype=self._dtype)

    def constant(self, value: Any, outer_dims: Sequence[int] = ()) -> torch.Tensor:
        """A tensor of shape ``outer_dims + shape`` filled with ``value``."""
        return torch.full(self._full_shape(outer_dims), value, dtype=self._dtype)

    def randn(self, outer_dims: Sequence[int] = ()) -> torch.Tensor:
        """Standard-normal samples of shape ``outer_dims + shape``.

        Raises:
            ValueError: if the spec's dtype is not floating point.
        """
        if not self.is_continuous:
            raise ValueError(f"randn needs a floating-point spec, got {self}")
        return torch.randn(self._full_shape(outer_dims), dtype=self._dtype)

    def __eq__(self, other) -> bool:
        return (type(self) is type(other) and self._shape == other._shape
                and self._dtype == other._dtype)

    def __hash__(self) -> int:
        return hash((type(self).__name__, tuple(self._shape), self._dtype))

    def __repr__(self) -> str:
        return f"TensorSpec(shape={tuple(self._shape)}, dtype={self._dtype})"

    def __getstate__(self):
        return (self._shape, self._dtype)

    def __setstate__(self, state):
        self._shape, self._dtype = state


class BoundedTensorSpec(TensorSpec):
    """A TensorSpec whose values lie in ``[minimum, maximum]`` (inclusive, elementwise).

    Args:
        shape: the per-sample shape.
        dtype: a torch dtype (or numpy dtype/name).
        minimum: scalar or array broadcastable to ``shape``.
        maximum: scalar or array broadcastable to ``shape``; ``None`` means the dtype's largest
            value (``inf`` for floats).

    Raises:
        ValueError: if the bounds do not broadcast to ``shape`` or ``minimum > maximum``.
    """

    __slots__ = ("_minimum", "_maximum")

    def __init__(self, shape=(), dtype: Any = torch.float32, minimum: Any = 0,
                 maximum: Any = None):
        super().__init__(shape, dtype)
        np_dtype = np.float64 if self.is_continuous else np.int64
        if maximum is None:
            maximum = np.inf if self.is_continuous else (
                1 if self._dtype == torch.bool else torch.iinfo(self._dtype).max)
        self._minimum = np.array(minimum, dtype=np_dtype)
        self._maximum = np.array(maximum, dtype=np_dtype)
        for name, bound in (("minimum", self._minimum), ("maximum", self._maximum)):
            try:
                np.broadcast_to(bound, tuple(self._shape))
            except ValueError:
                raise ValueError(f"BoundedTensorSpec: {name} of shape {bound.shape} does not "
                                 f"broadcast to shape {tuple(self._shape)}") from None
        if np.any(self._minimum > self._maximum):
            raise ValueError(f"BoundedTensorSpec: minimum {self._minimum} exceeds maximum "
                             f"{self._maximum}")

    @classmethod
    def from_spec(cls, spec: TensorSpec, minimum: Any = 0, maximum: Any = None):
        """Deprecated (removed in 0.5): ``BoundedTensorSpec(spec.shape, spec.dtype, minimum,
        maximum)``, which it returns."""
        warnings.warn("BoundedTensorSpec.from_spec is deprecated and will be removed in the "
                      "next release; use BoundedTensorSpec(spec.shape, spec.dtype, minimum, "
                      "maximum)", DeprecationWarning, stacklevel=2)
        return cls(spec.shape, spec.dtype, minimum, maximum)

    @property
    def minimum(self) -> np.ndarray:
        """Lower bound, numpy array broadcastable to ``shape`` (float64 or int64)."""
        return self._minimum

    @property
    def maximum(self) -> np.ndarray:
        """Upper bound, numpy array broadcastable to ``shape`` (float64 or int64)."""
        return self._maximum

    def bounds(self, dtype: torch.dtype = torch.float32) -> Tuple[torch.Tensor, torch.Tensor]:
        """``(minimum, maximum)`` as new tensors of ``shape`` and ``dtype`` (each bound
        broadcast over the shape), e.g. for clipping or rescaling actions."""
        low, high = (torch.as_tensor(b, dtype=dtype).expand(self._shape).clone()
                     for b in (self._minimum, self._maximum))
        return low, high

    @property
    def num_values(self) -> int:
        """For a discrete scalar-bound spec, the number of values ``maximum - minimum + 1``.

        Raises:
            ValueError: for continuous specs or specs whose bounds differ per element.
        """
        lows, highs = np.unique(self._minimum), np.unique(self._maximum)
        if not self.is_discrete or lows.size != 1 or highs.size != 1:
            raise ValueError(f"num_values needs a discrete spec with one bound, got {self}")
        return int(highs[0] - lows[0] + 1)

    def sample(self, outer_dims: Sequence[int] = ()) -> torch.Tensor:
        """Random values of shape ``outer_dims + shape`` within the bounds.

        Discrete specs sample uniformly from ``{minimum, ..., maximum}``. Continuous specs
        sample uniformly where both bounds are finite, ``minimum + Exp(1)`` or
        ``maximum - Exp(1)`` where one is infinite, and ``N(0, 1)`` where both are (as
        ``gymnasium.spaces.Box.sample`` does).
        """
        shape = self._full_shape(outer_dims)
        low = np.broadcast_to(self._minimum, tuple(self._shape)).copy()
        high = np.broadcast_to(self._maximum, tuple(self._shape)).copy()
        if self.is_discrete:
            low_t = torch.as_tensor(low, dtype=torch.int64)
            span = torch.as_tensor(high - low + 1, dtype=torch.float64)
            u = torch.rand(shape, dtype=torch.float64)
            values = low_t + torch.floor(u * span).to(torch.int64).clamp(max=span.to(
                torch.int64) - 1)
            return values.to(self._dtype)
        low_t = torch.as_tensor(low, dtype=torch.float64)
        high_t = torch.as_tensor(high, dtype=torch.float64)
        lo_fin, hi_fin = torch.isfinite(low_t), torch.isfinite(high_t)
        # torch.where discards the inf/nan of the branches not taken.
        values = torch.randn(shape, dtype=torch.float64)
        exp = torch.empty(shape, dtype=torch.float64).exponential_()
        values = torch.where(lo_fin & ~hi_fin, low_t + exp, values)
        values = torch.where(~lo_fin & hi_fin, high_t - exp, values)
        uniform = low_t + torch.rand(shape, dtype=torch.float64) * (high_t - low_t)
        values = torch.where(lo_fin & hi_fin, uniform, values)
        return values.to(self._dtype)

    def __eq__(self, other) -> bool:
        return (super().__eq__(other) and np.array_equal(self._minimum, other._minimum)
                and np.array_equal(self._maximum, other._maximum))

    def __hash__(self) -> int:
        return super().__hash__()

    def __repr__(self) -> str:
        lo = self._minimum.item() if self._minimum.ndim == 0 else self._minimum.tolist()
        hi = self._maximum.item() if self._maximum.ndim == 0 else self._maximum.tolist()
        return (f"BoundedTensorSpec(shape={tuple(self._shape)}, dtype={self._dtype}, "
                f"minimum={lo}, maximum={hi})")

    def __getstate__(self):
        return (self._shape, self._dtype, self._minimum, self._maximum)

    def __setstate__(self, state):
        self._shape, self._dtype, self._minimum, self._maximum = state


def spec_from_tensors(tensors: Any, outer_rank: int = 1) -> Any:
    """The nest of ``TensorSpec`` describing one sample of a batched nest of tensors.

    Args:
        tensors: nest of tensors with ``outer_rank`` leading batch dims (``[B, ...]`` for 1,
            ``[T, B, ...]`` for 2).
        outer_rank: how many leading dims to drop.

    Returns:
        A nest of the same structure whose leaves are ``TensorSpec(shape[outer_rank:],
        dtype)``.
    """
    return nest.map_structure(lambda t: TensorSpec.from_tensor(t, from_dim=outer_rank),
                              tensors)


def validate_nest(tensors: Any, specs: Any, outer_shape: Sequence[int], what: str) -> None:
    """Checks that a nest of tensors matches a nest of specs with the given outer shape.

    Args:
        tensors: nest of tensors, each expected as ``outer_shape + spec.shape``.
        specs: nest of ``TensorSpec`` with the same structure.
        outer_shape: the expected outer dims, e.g. ``(B,)``.
        what: what is being checked, for the message (``"action"``, ``"add_batch"``).

    Raises:
        ValueError: naming the path, the expected and the actual shape and dtype (or the first
            differing path if the structures differ).
    """
    outer_shape = tuple(outer_shape)
    for path, spec, t in zip(*_paths_and_pairs(specs, tensors, what)):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"{what}: '{path}' should be a torch.Tensor of shape "
                             f"{outer_shape + tuple(spec.shape)} and dtype {spec.dtype}, got "
                             f"{type(t).__name__}")
        if t.dtype != spec.dtype or tuple(t.shape) != outer_shape + tuple(spec.shape):
            raise ValueError(
                f"{what}: '{path or '<root>'}' expected shape {outer_shape + tuple(spec.shape)} "
                f"dtype {spec.dtype} (spec {spec}), got shape {tuple(t.shape)} dtype {t.dtype}")


def _paths_and_pairs(specs, tensors, what):
    path_specs = nest.flatten_with_path(specs)
    try:
        nest.assert_same_structure(specs, tensors)
    except ValueError as e:
        raise ValueError(f"{what}: structure does not match the spec: {e}") from None
    return [p for p, _ in path_specs], [s for _, s in path_specs], nest.flatten(tensors)
