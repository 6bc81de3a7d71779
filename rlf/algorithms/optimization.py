"""The pure pieces of the gradient update (``learner.py`` applies them): loss masks and their
reduction (``masked_loss_mean``), the summary of an ``extra`` term, and the checks of optimizer,
schedule and clipping arguments."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import torch

from rlf.data_structures import ReplacingMask
from rlf.utils.errors import UserError

__all__ = ["NonFiniteLossError", "masked_loss_mean", "LOSS_AVERAGES", "check_optimizer_args",
           "check_required_optimizers", "term_mask", "extra_mean", "checked_schedule"]


class NonFiniteLossError(FloatingPointError):
    """A loss (or one of its terms) became NaN or infinite during training."""


#: How a masked loss is averaged (``Algorithm``'s ``loss_average``).
LOSS_AVERAGES = ("all", "valid")


def _fits_mask(valid_masks: torch.Tensor, x: torch.Tensor) -> bool:
    """Whether ``x`` is ``[T-k, B, ...]`` (``k >= 0``) for a ``[T, B]`` mask."""
    t, b = valid_masks.shape[:2]
    return x.ndim >= 2 and x.shape[1] == b and 1 <= x.shape[0] <= t


def _fit_mask(valid_masks: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The step mask for ``x``: ``[T, B, ...]`` per step, or ``[T-k, B, ...]`` over the
    sequence's first ``T - k`` steps (transitions for ``k = 1``, n-step targets for
    ``k = n``): the mask's first ``T - k`` rows, with trailing dims to broadcast.

    Raises:
        ValueError: if ``x`` is not ``[T-k, B, ...]``.
    """
    t, b = valid_masks.shape[:2]
    if not _fits_mask(valid_masks, x):
        flat = (" (flattened steps? keep the [T-k, B] dims: rlf.nest.utils.batch_apply runs a "
                "[B]-batched module over [T, B] data)" if x.ndim == 1 and x.shape[0] % b == 0
                else "")
        raise ValueError(f"a loss of shape {tuple(x.shape)} fits neither the [T-k, B] steps "
                         f"(k >= 0) of its [T, B] = [{t}, {b}] batch nor [B]{flat}; a loss "
                         f"over other steps passes its own LossInfo.mask")
    m = valid_masks[:x.shape[0]].to(x.dtype)
    return m.view(m.shape + (1,) * (x.ndim - 2))


def masked_loss_mean(loss: torch.Tensor, mask: Optional[torch.Tensor],
                     average: str = "all") -> torch.Tensor:
    r"""Reduces a loss to a scalar under a mask of its leading dims.

    ``"all"`` (ALF's rule): ``sum(mask * loss) / N``, ``N`` the entries of ``loss``, so an
    entry's gradient does not depend on the mask elsewhere; ``"valid"``:
    ``sum(mask * loss) / sum(mask)`` (0 for an all-0 mask), the mean over the kept entries.

    Args:
        loss: ``[...]`` float, e.g. ``[T-k, B]``, ``[B]`` or ``[T, B, A]``.
        mask: float or bool weights of ``loss``'s leading dims (``[T-k, B]``, ``[B]``), or
            None (all kept).
        average: ``"all"`` or ``"valid"``.

    Returns:
        A scalar tensor.

    Raises:
        ValueError: for another ``average``, or a mask whose shape is not ``loss``'s
            leading dims.
    """
    if average not in LOSS_AVERAGES:
        raise ValueError(f"loss_average must be one of {LOSS_AVERAGES}, got {average!r}")
    if mask is None or loss.ndim == 0:
        return loss.mean()
    if tuple(loss.shape[:mask.ndim]) != tuple(mask.shape):
        raise ValueError(f"a loss mask of shape {tuple(mask.shape)} does not fit a loss of "
                         f"shape {tuple(loss.shape)}: the mask is the loss's leading dims")
    m = mask.to(loss.dtype).view(tuple(mask.shape) + (1,) * (loss.ndim - mask.ndim))
    total = (loss * m).sum()
    if average == "all":
        return total / loss.numel()
    return total / m.expand_as(loss).sum().clamp(min=torch.finfo(loss.dtype).tiny)


def term_mask(valid_masks: Optional[torch.Tensor], x: torch.Tensor,
              own: Any) -> Optional[torch.Tensor]:
    """The mask of loss term ``x``: the step mask fitted to its ``[T-k, B]`` rows, or for a
    ``[B]`` loss whether the sequence has a valid step (with ``T = 2``, the transition
    mask); none for a scalar or without a step mask. Its own ``LossInfo.mask`` multiplies
    it, a ``ReplacingMask`` replaces it; an own mask no step mask fits is used alone."""
    if isinstance(own, ReplacingMask):
        return own.mask
    if valid_masks is None or x.ndim == 0 or (own is not None and not (
            _fits_mask(valid_masks, x) or _is_per_sequence(valid_masks, x))):
        return own
    if _is_per_sequence(valid_masks, x):
        step = valid_masks.bool().any(0)  # [B]: one loss per sequence
    else:
        step = _fit_mask(valid_masks, x).flatten(1)[:, :x.shape[1]]
    if own is None:
        return step
    if tuple(own.shape) != tuple(step.shape):
        raise ValueError(f"a loss mask of shape {tuple(own.shape)} does not fit a loss of "
                         f"shape {tuple(x.shape)}: the mask is the loss's leading dims")
    return own * step.to(own.dtype) if own.is_floating_point() else own.bool() & step.bool()


def _is_per_sequence(valid_masks: torch.Tensor, x: torch.Tensor) -> bool:
    return x.ndim == 1 and x.shape[0] == valid_masks.shape[1]


def extra_mean(value: torch.Tensor, valid_masks: Optional[torch.Tensor]) -> torch.Tensor:
    """The summary of an ``extra`` loss term: its mean under the mask where it fits
    (``[T-k, B, ...]``), else its plain mean."""
    value = value.float()
    if valid_masks is not None and _fits_mask(valid_masks, value):
        m = _fit_mask(valid_masks, value).expand_as(value)
        value = (value * m).sum() / m.sum().clamp(min=1)
    return value.mean()


def extra_sum(value: torch.Tensor, valid_masks: Optional[torch.Tensor]
              ) -> Tuple[torch.Tensor, torch.Tensor]:
    """``(sum, count)`` of the entries ``extra_mean`` averages (float32 scalars): summed over
    several learners' batches, their quotient is the mean over all of them."""
    value = value.float()
    if valid_masks is not None and _fits_mask(valid_masks, value):
        m = _fit_mask(valid_masks, value).expand_as(value)
        return (value * m).sum(), m.sum().float()
    return value.sum(), torch.tensor(float(value.numel()), device=value.device)


#: Schedule lengths (updates) torch accepts below 1, which then never end or divide by 0.
_SCHEDULE_LENGTHS = ("total_iters", "T_max", "step_size")


def checked_schedule(schedule: Any) -> Any:
    """Returns ``schedule``, refusing a length (``_SCHEDULE_LENGTHS``) below 1.

    Raises:
        UserError: naming the schedule, the setting and the value.
    """
    for name in _SCHEDULE_LENGTHS:
        length = getattr(schedule, name, None)
        if isinstance(length, (int, float)) and length < 1:
            raise UserError(f"{type(schedule).__name__}: {name} must be >= 1 (updates), got "
                            f"{length}")
    return schedule


def check_optimizer_args(name: str, optimizer: Any, lr_scheduler: Any,
                         gradient_clipping: Optional[float] = None) -> None:
    """Refuses an ``optimizer`` or ``lr_scheduler`` that cannot be called (else found only at
    the first update) and a ``gradient_clipping`` <= 0.

    Raises:
        ValueError: naming ``name`` and the value.
    """
    if gradient_clipping is not None and not gradient_clipping > 0:
        raise ValueError(f"{name}: gradient_clipping must be > 0 or None (no clipping), got "
                         f"{gradient_clipping}")
    if optimizer is not None and not (isinstance(optimizer, torch.optim.Optimizer)
                                      or callable(optimizer)):
        raise ValueError(f"{name}: optimizer must be a torch.optim.Optimizer class or factory "
                         f"(gin: @torch.optim.Adam) or None, got {optimizer!r}")
    if lr_scheduler is not None and not callable(lr_scheduler):
        raise ValueError(f"{name}: lr_scheduler must be a torch.optim.lr_scheduler class or "
                         f"factory (gin: @torch.optim.lr_scheduler.LinearLR) or None, got "
                         f"{lr_scheduler!r}")


def check_required_optimizers(name: str, configurable: str, **optimizers: Any) -> None:
    """Checks that each of an algorithm's per-part optimizers (SAC's ``actor_optimizer``,
    ...) is set and callable.

    Args:
        name: the algorithm's name; ``configurable``: its class name (the gin fix).
        **optimizers: argument name -> the optimizer class or factory given.

    Raises:
        ValueError: naming the first one that is None or cannot be called.
    """
    for key, value in optimizers.items():
        check_optimizer_args(f"{name}.{key}", value, None)
        if value is None:
            raise ValueError(f"{name}: {key} is not set; it trains its "
                             f"{', '.join(k.replace('_optimizer', '') for k in optimizers)} "
                             f"with an optimizer each (gin: {configurable}.{key} = "
                             f"@torch.optim.Adam)")
