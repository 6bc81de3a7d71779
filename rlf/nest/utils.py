"""Tensor-aware helpers over nests: stacking, concatenation, outer rank, device transfer,
applying a batched function to time-major data."""

from __future__ import annotations

from typing import Any, Sequence

import torch

from rlf.nest.nest import _flatten_same, _spec_paths, flatten, map_structure

__all__ = ["stack_nests", "cat_nests", "get_outer_rank", "convert_device", "batch_apply"]


def stack_nests(nests: Sequence[Any], dim: int = 0) -> Any:
    """Stacks a sequence of nests of tensors leaf by leaf with ``torch.stack``.

    Args:
        nests: ``N`` nests of identical structure; leaf ``i`` of each has one shape ``S_i``.
        dim: where the new dimension of size ``N`` goes.

    Returns:
        One nest whose leaf ``i`` has shape ``S_i`` with ``N`` inserted at ``dim``.

    Raises:
        ValueError: if ``nests`` is empty or the structures differ (naming the path).
    """
    return _combine_leaves(nests, "stack_nests", lambda xs: torch.stack(xs, dim=dim))


def cat_nests(nests: Sequence[Any], dim: int = 0) -> Any:
    """Concatenates nests of tensors leaf by leaf with ``torch.cat``, on the first nest's
    devices (e.g. online ``[N, L, ...]`` and replayed ``[K, L, ...]`` sequences into
    ``[N + K, L, ...]``).

    Args:
        nests: nests of identical structure whose leaves agree except in ``dim``.
        dim: the dimension to concatenate.

    Returns:
        One nest of the concatenated leaves.

    Raises:
        ValueError: if ``nests`` is empty or the structures differ (naming the path).
    """
    return _combine_leaves(nests, "cat_nests", lambda xs: torch.cat(
        [x.to(xs[0].device) for x in xs], dim=dim))


def _combine_leaves(nests: Sequence[Any], what: str, combine) -> Any:
    """``combine(leaves)`` for each leaf position of nests of one structure, as one nest.

    Raises:
        ValueError: if ``nests`` is empty or the structures differ (naming ``what`` and the
            path).
    """
    nests = list(nests)
    if not nests:
        raise ValueError(f"{what} needs at least one nest")
    spec, all_leaves = _flatten_same(nests, what)
    return spec.unflatten([combine(xs) for xs in zip(*all_leaves)])


def get_outer_rank(tensors: Any, specs: Any) -> int:
    """Returns the number of outer (batch/time) dimensions of ``tensors`` relative to ``specs``.

    Each tensor must have shape ``outer_dims + spec.shape``, with the same number of outer
    dimensions for every leaf (e.g. ``[B, ...]`` -> 1, ``[T, B, ...]`` -> 2).

    Args:
        tensors: a nest of tensors.
        specs: a nest of ``TensorSpec`` with the same structure.

    Raises:
        ValueError: if the structures differ, a tensor's trailing shape is not its spec's
            shape, or the leaves disagree on the outer rank (naming the path).
    """
    spec_tree, (spec_leaves, tensor_leaves) = _flatten_same([specs, tensors], "get_outer_rank")
    outer_rank = None
    for path, spec, t in zip(_spec_paths(spec_tree), spec_leaves, tensor_leaves):
        rank = t.ndim - spec.ndim
        if rank < 0 or tuple(t.shape[rank:]) != tuple(spec.shape):
            raise ValueError(f"get_outer_rank: '{path}' has shape {tuple(t.shape)}, which does "
                             f"not end with the spec's shape {tuple(spec.shape)}")
        if outer_rank is None:
            outer_rank = rank
        elif rank != outer_rank:
            raise ValueError(f"get_outer_rank: '{path}' has {rank} outer dims but earlier "
                             f"leaves have {outer_rank}")
    return 0 if outer_rank is None else outer_rank


def convert_device(nest: Any, device: str | torch.device) -> Any:
    """Moves every tensor leaf of ``nest`` to ``device``; other leaves are returned as they are.

    Tensors already on ``device`` are not copied.
    """
    device = torch.device(device)

    def _move(x):
        return x.to(device) if isinstance(x, torch.Tensor) else x

    return map_structure(_move, nest)


def batch_apply(fn, *args: Any, num_outer_dims: int = 2) -> Any:
    """``fn`` of ``[N, ...]`` inputs applied to inputs with ``num_outer_dims`` outer dims
    (``[T, B, ...]``): the outer dims are merged into one batch dim, ``fn`` runs once, and its
    outputs get the outer dims back (Sonnet's ``BatchApply``).

    Use it to run a ``[B, ...]`` module (a critic, a policy) over ``calc_loss``'s ``[T, B]``
    (or ``[T-1, B]``) data: the result keeps its ``[T, B]`` shape, so that the training loop
    masks each step's loss, where a loss left flattened to ``[T*B]`` would not be.

    Args:
        fn: called as ``fn(*flat_args)``; returns a tensor or a nest of tensors, each with the
            merged batch dim first.
        *args: nests of tensors, each leaf ``[d_1, ..., d_n, ...]`` with the same outer dims
            ``[d_1, ..., d_n]`` (``n = num_outer_dims``).
        num_outer_dims: ``n`` (>= 1).

    Returns:
        ``fn``'s outputs, each leaf ``[d_1, ..., d_n, ...]``.

    Raises:
        ValueError: for no tensor among ``args``, or leaves whose outer dims differ.
    """
    leaves = [x for x in flatten(args) if isinstance(x, torch.Tensor)]
    if not leaves:
        raise ValueError("batch_apply: no tensor among the arguments")
    outer = tuple(leaves[0].shape[:num_outer_dims])
    for x in leaves:
        if tuple(x.shape[:num_outer_dims]) != outer:
            raise ValueError(f"batch_apply: inputs with outer dims {outer} and "
                             f"{tuple(x.shape[:num_outer_dims])}; all share the first "
                             f"{num_outer_dims}")
    flat = map_structure(lambda x: x.flatten(0, num_outer_dims - 1)
                         if isinstance(x, torch.Tensor) else x, args)
    return map_structure(lambda y: y.unflatten(0, outer), fn(*flat))
