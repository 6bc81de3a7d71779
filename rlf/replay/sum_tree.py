"""SumTree: a binary tree of non-negative values for sampling in proportion to them.

Used by prioritised replay (Schaul et al. 2016, "Prioritized Experience Replay", §3.3, the
"sum-tree" implementation of proportional prioritisation). All operations are vectorised with
numpy over a batch of indices; values are float64 so that the sums stay exact enough for
buffers of millions of entries.
"""

from __future__ import annotations

from typing import Union

import numpy as np

__all__ = ["SumTree"]


class SumTree:
    """A complete binary tree over ``capacity`` leaves; each inner node holds its subtree's sum.

    Node 1 is the root, node ``i`` has children ``2i`` and ``2i + 1``; leaf ``j`` is node
    ``num_leaves + j`` where ``num_leaves`` is ``capacity`` rounded up to a power of two.

    Args:
        capacity: number of values (e.g. ``num_environments * max_length``).

    Raises:
        ValueError: if ``capacity < 1``.
    """

    def __init__(self, capacity: int):
        if capacity < 1:
            raise ValueError(f"SumTree capacity must be >= 1, got {capacity}")
        self._capacity = int(capacity)
        self._num_leaves = 1 << max(0, (self._capacity - 1).bit_length())
        self._depth = self._num_leaves.bit_length() - 1
        self._tree = np.zeros(2 * self._num_leaves, dtype=np.float64)

    @property
    def capacity(self) -> int:
        """Number of values."""
        return self._capacity

    @property
    def values(self) -> np.ndarray:
        """``[capacity]`` float64 view of the leaf values (writes must be followed by
        ``rebuild()``; prefer ``update``)."""
        return self._tree[self._num_leaves:self._num_leaves + self._capacity]

    @property
    def total(self) -> float:
        """Sum of all values."""
        return float(self._tree[1])

    def update(self, indices: np.ndarray, values: Union[np.ndarray, float]) -> None:
        """Sets ``values[indices]`` and updates the sums above them.

        Args:
            indices: ``[N]`` int leaf indices in ``[0, capacity)``; for repeated indices the
                last value wins.
            values: ``[N]`` (or scalar) non-negative finite values.

        Raises:
            ValueError: for out-of-range indices or negative/non-finite values.
        """
        indices = np.asarray(indices, dtype=np.int64).reshape(-1)
        values = np.broadcast_to(np.asarray(values, dtype=np.float64), indices.shape)
        if indices.size == 0:
            return
        if indices.min() < 0 or indices.max() >= self._capacity:
            raise ValueError(f"SumTree.update: indices must be in [0, {self._capacity})")
        if not np.all(np.isfinite(values)) or np.any(values < 0):
            raise ValueError("SumTree.update: values must be finite and >= 0")
        nodes = indices + self._num_leaves
        self._tree[nodes] = values
        nodes = np.unique(nodes >> 1)
        while nodes[0] >= 1:
            self._tree[nodes] = self._tree[2 * nodes] + self._tree[2 * nodes + 1]
            if nodes[0] == 1:
                break
            nodes = np.unique(nodes >> 1)

    def rebuild(self) -> None:
        """Recomputes every inner node from the leaves (after writing ``values`` directly)."""
        level = self._num_leaves
        while level > 1:
            self._tree[level // 2:level] = (self._tree[level:2 * level:2]
                                            + self._tree[level + 1:2 * level:2])
            level //= 2

    def find(self, targets: np.ndarray) -> np.ndarray:
        """For each target mass ``u`` in ``[0, total)``, the leaf ``j`` with
        ``sum(values[:j]) <= u < sum(values[:j + 1])``.

        Drawing ``u ~ Uniform[0, total)`` thus samples ``j`` with probability
        ``values[j] / total``.

        Args:
            targets: ``[N]`` float masses.

        Returns:
            ``[N]`` int64 leaf indices (clipped to ``capacity - 1`` against rounding).
        """
        u = np.asarray(targets, dtype=np.float64).copy()
        idx = np.ones(u.shape, dtype=np.int64)
        for _ in range(self._depth):
            left = self._tree[2 * idx]
            go_right = u >= left
            u -= np.where(go_right, left, 0.0)
            idx = 2 * idx + go_right
        return np.minimum(idx - self._num_leaves, self._capacity - 1)

    def clear(self) -> None:
        """Sets every value to 0."""
        self._tree[:] = 0.0
