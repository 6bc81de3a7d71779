"""The optimizers and the gradient update of an ``Algorithm`` (ALF's ``update_with_gradient``):
optimizer construction, loss summaries, the non-finite-loss guard, gradient clipping and mixed
precision."""

from __future__ import annotations

import contextlib
import math
from typing import List, Optional, Tuple

import torch
from torch import nn

from rlf import nest
from rlf.data_structures import LossInfo
from rlf.utils import summary

__all__ = ["OptimizationMixin", "NonFiniteLossError"]


class NonFiniteLossError(FloatingPointError):
    """A loss (or one of its terms) became NaN or infinite during training."""


def _is_empty(x) -> bool:
    return isinstance(x, tuple) and len(x) == 0


class OptimizationMixin:
    """``Algorithm``'s optimizer and gradient-update methods (they use the attributes
    ``Algorithm.__init__`` sets: ``_optimizer_arg``, ``_config``, ``_device``, ...)."""

    # ------------------------------------------------------------------ optimizers
    def _own_parameters(self) -> List[nn.Parameter]:
        """Parameters of this algorithm not owned by a sub-algorithm with its own optimizer."""
        excluded = set()
        for module in self.modules():
            if module is not self and isinstance(module, OptimizationMixin) and (
                    module._optimizer_arg is not None):
                excluded.update(id(p) for p in module.parameters())
        return [p for p in self.parameters() if id(p) not in excluded and p.requires_grad]

    def _create_optimizers(self) -> List[torch.optim.Optimizer]:
        optimizers, schedulers = [], []
        for module in self.modules():
            if not isinstance(module, OptimizationMixin):
                continue
            if module._optimizer_arg is None:
                if module._lr_scheduler_arg is not None:
                    raise ValueError(f"{module._name}: lr_scheduler needs an optimizer of its "
                                     f"own (set {type(module).__name__}.optimizer)")
                continue
            opt = module._optimizer_arg
            if not isinstance(opt, torch.optim.Optimizer):
                params = module._own_parameters()
                if not params:
                    continue
                opt = opt(params)
            optimizers.append(opt)
            ctor = module._lr_scheduler_arg
            schedulers.append(None if ctor is None else ctor(opt))
        self._lr_schedulers = schedulers
        covered = {id(p) for o in optimizers for g in o.param_groups for p in g["params"]}
        uncovered = [n for n, p in self.named_parameters()
                     if p.requires_grad and id(p) not in covered]
        if uncovered:
            raise ValueError(
                f"{self._name}: parameters {uncovered[:5]}{'...' if len(uncovered) > 5 else ''}"
                f" have no optimizer; pass optimizer=... (e.g. in gin "
                f"`{type(self).__name__}.optimizer = @torch.optim.Adam`)")
        return optimizers

    @property
    def optimizers(self) -> List[torch.optim.Optimizer]:
        """All optimizers of this algorithm and its sub-algorithms (created on first use,
        with their ``lr_scheduler``s).

        Raises:
            ValueError: naming parameters no optimizer covers, or an algorithm with an
                ``lr_scheduler`` but no ``optimizer`` of its own.
        """
        if self._optimizers is None:
            self._optimizers = self._create_optimizers()
        return self._optimizers

    # ------------------------------------------------------------------ gradient update
    def update_with_gradient(self, loss_info: LossInfo, valid_masks: Optional[torch.Tensor] = None,
                             weight: float = 1.0) -> Tuple[LossInfo, List[nn.Parameter]]:
        """One optimizer step on ``loss_info``.

        The per-step ``loss`` is multiplied by ``valid_masks`` (0 at the LAST -> FIRST
        non-transition) and averaged over all ``T * B`` entries (ALF's convention: the
        gradient scale does not depend on how many steps a batch masks), ``scalar_loss`` is
        added, and the sum is multiplied by ``weight``. Gradients are clipped per optimizer
        (``gradient_clipping``) before its step.

        Args:
            loss_info: from ``calc_loss``; ``loss`` ``[T, B]`` or a scalar.
            valid_masks: ``[T, B]`` float or bool, or None (all valid).
            weight: multiplies the loss (e.g. the size of a last, partial mini-batch relative
                to a full one).

        Returns:
            ``(loss_info with scalar loss and extra terms, parameters)``.

        Raises:
            NonFiniteLossError: if the loss or any of its terms is NaN or infinite, naming the
                term and the iteration; no parameter is changed then.
        """
        loss = loss_info.loss
        if isinstance(loss, torch.Tensor) and loss.ndim > 0:
            if valid_masks is not None:
                loss = loss * valid_masks.to(loss.dtype)
            loss = loss.mean()
        if not _is_empty(loss_info.scalar_loss):
            loss = loss + loss_info.scalar_loss
        loss = loss * weight
        if not bool(torch.isfinite(loss.detach())):
            self._raise_non_finite(loss_info, loss)
        optimizers = self.optimizers
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        scaler = self._grad_scaler
        (scaler.scale(loss) if scaler is not None else loss).backward()
        params = []
        for i, opt in enumerate(optimizers):
            if scaler is not None:
                scaler.unscale_(opt)
            group_params = [p for g in opt.param_groups for p in g["params"]
                            if p.grad is not None]
            params.extend(group_params)
            self._clip_and_summarize_grads(group_params, i)
            stepped = True
            if scaler is not None:
                # GradScaler skips the step when a gradient is inf/NaN; the schedule must
                # then stay where it is too.
                stepped = not group_params or bool(torch.stack(
                    [p.grad.isfinite().all() for p in group_params]).all())
                scaler.step(opt)
            else:
                opt.step()
            if summary.should_record_summaries():  # the rate this update used
                summary.scalar(f"learning_rate/{self._name}/{i}", opt.param_groups[0]["lr"])
            if self._lr_schedulers[i] is not None and stepped:
                self._lr_schedulers[i].step()
        if scaler is not None:
            scaler.update()
        if summary.should_record_summaries():
            self._summarize_loss(loss.detach(), loss_info, valid_masks)
        return loss_info._replace(loss=loss.detach()), params

    def _clip_and_summarize_grads(self, params: List[nn.Parameter], index: int) -> None:
        if not params:
            return
        clip = self._gradient_clipping
        if clip is not None and not self._clip_by_global_norm:
            torch.nn.utils.clip_grad_value_(params, clip)
            clip = None
        record = summary.should_record_summaries()
        if clip is not None or record:
            norm = torch.nn.utils.clip_grad_norm_(
                params, max_norm=math.inf if clip is None else clip, foreach=True)
            if record:
                summary.scalar(f"global_grad_norm/{self._name}/{index}", norm)

    def _summarize_loss(self, loss: torch.Tensor, loss_info: LossInfo,
                        valid_masks: Optional[torch.Tensor]) -> None:
        summary.scalar(f"loss/{self._name}", loss)
        for path, value in nest.flatten_with_path(loss_info.extra):
            if not isinstance(value, torch.Tensor):
                continue
            value = value.detach().float()
            if valid_masks is not None and value.shape == valid_masks.shape:
                m = valid_masks.to(value.dtype)
                value = (value * m).sum() / m.sum().clamp(min=1)
            summary.scalar(f"loss/{self._name}/{path}", value.mean())

    def _raise_non_finite(self, loss_info: LossInfo, loss: torch.Tensor) -> None:
        bad = [p for p, v in nest.flatten_with_path(
            {"loss": loss_info.loss, "scalar_loss": loss_info.scalar_loss,
             "extra": loss_info.extra})
            if isinstance(v, torch.Tensor) and not bool(torch.isfinite(v.detach()).all())]
        where = ", ".join(bad) if bad else "the weighted total"
        raise NonFiniteLossError(
            f"{self._name}: the loss is {float(loss.detach())} at training iteration "
            f"{self._train_iter_num} (non-finite terms: {where}); no update was applied. "
            f"Lower the learning rate, clip gradients, or restart from the last good checkpoint.")

    @contextlib.contextmanager
    def _autocast(self):
        """``torch.autocast`` when ``config.enable_amp``; float16 on CUDA, bfloat16 on CPU."""
        if self._config is None or not self._config.enable_amp:
            yield
            return
        dtype = torch.float16 if self._device.type == "cuda" else torch.bfloat16
        if self._device.type == "cuda" and self._grad_scaler is None:
            self._grad_scaler = torch.amp.GradScaler("cuda")
        with torch.autocast(self._device.type, dtype=dtype):
            yield
