"""Small helpers shared by unrollers and algorithms."""

from __future__ import annotations

from typing import Any

import torch

from rlf import nest

__all__ = ["reset_state_if_necessary", "is_empty", "detach", "zeros_from_spec", "read_only"]


def reset_state_if_necessary(state: Any, initial_state: Any, reset_mask: torch.Tensor) -> Any:
    """Replaces the rows of ``state`` where ``reset_mask`` is true by ``initial_state``'s.

    Args:
        state: nest of ``[B, ...]`` tensors (a recurrent state).
        initial_state: nest of the same structure and shapes.
        reset_mask: ``[B]`` bool, usually ``time_step.is_first()``.

    Returns:
        The new state nest (``state`` itself if nothing is reset; a mask on an accelerator is
        applied without asking it whether any row is set, which would wait for the device).
    """
    if not nest.flatten(state):
        return state
    if reset_mask.device.type == "cpu" and not bool(reset_mask.any()):
        return state

    def _reset(s, s0):
        mask = reset_mask.to(s.device).view((-1,) + (1,) * (s.ndim - 1))
        return torch.where(mask, s0, s)

    return nest.map_structure(_reset, state, initial_state)


def is_empty(x: Any) -> bool:
    """Whether ``x`` is ``()``, the empty nest (e.g. an unset ``LossInfo`` field)."""
    return isinstance(x, tuple) and len(x) == 0


def detach(x: Any) -> Any:
    """``detach()`` of every tensor leaf of a nest."""
    return nest.map_structure(lambda t: t.detach() if isinstance(t, torch.Tensor) else t, x)


def zeros_from_spec(spec: Any, batch_size: int, device: str | torch.device = "cpu") -> Any:
    """Nest of zero tensors ``[batch_size, *spec.shape]`` for a nest of ``TensorSpec``."""
    return nest.map_structure(
        lambda s: torch.zeros((batch_size, *s.shape), dtype=s.dtype, device=device), spec)


def read_only(attribute: str, doc: str) -> property:
    """A read-only property that returns ``self.<attribute>`` (an algorithm's networks:
    ``critics = read_only("_critics", "The two critics.")``).

    Args:
        attribute: the attribute's name.
        doc: the property's docstring.
    """
    return property(lambda self: getattr(self, attribute), doc=doc)
