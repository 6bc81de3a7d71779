"""The optimizers and the gradient update of an ``Algorithm`` (ALF's ``update_with_gradient``):
optimizer construction, loss summaries, the non-finite-loss guard, gradient clipping and mixed
precision."""

from __future__ import annotations

import contextlib
import math
from typing import Any, List, Optional, Tuple

import torch
from torch import nn

from rlf import nest
from rlf.data_structures import LossInfo
from rlf.utils import summary
from rlf.utils.common import is_empty
from rlf.utils.errors import UserError

__all__ = ["OptimizationMixin", "NonFiniteLossError"]


class NonFiniteLossError(FloatingPointError):
    """A loss (or one of its terms) became NaN or infinite during training."""


def _fits_mask(valid_masks: torch.Tensor, x: torch.Tensor) -> bool:
    """Whether ``x`` is ``[T, B, ...]`` or ``[T-1, B, ...]`` for a ``[T, B]`` mask."""
    t, b = valid_masks.shape[:2]
    return x.ndim >= 2 and x.shape[1] == b and x.shape[0] in (t, t - 1)


def _fit_mask(valid_masks: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The ``[T, B]`` mask for ``x``: ``[T, B, ...]`` per step, or ``[T-1, B, ...]`` over
    transitions (the mask's first ``T - 1`` rows), with trailing dims to broadcast.

    Raises:
        ValueError: if ``x``'s leading dims fit neither.
    """
    t, b = valid_masks.shape[:2]
    if not _fits_mask(valid_masks, x):
        raise ValueError(f"a loss of shape {tuple(x.shape)} fits neither the [T, B] = "
                         f"[{t}, {b}] steps nor the [T-1, B] transitions of its batch")
    m = valid_masks[:x.shape[0]].to(x.dtype)
    return m.view(m.shape + (1,) * (x.ndim - 2))


#: Lengths of torch's schedules, in updates, that torch accepts below 1: ``LinearLR``,
#: ``ConstantLR`` and ``PolynomialLR`` then keep the start factor's rate for ever;
#: ``CosineAnnealingLR`` and ``StepLR`` divide by zero at the first update (0) or count
#: backwards (negative).
_SCHEDULE_LENGTHS = ("total_iters", "T_max", "step_size")


def _checked_schedule(schedule: Any) -> Any:
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
    """Refuses an ``optimizer`` that is neither None, an optimizer nor callable, an
    ``lr_scheduler`` that is neither None nor callable (both are only called at the first
    update, too late for a clear error), and a ``gradient_clipping`` <= 0 (a negative norm
    would flip the gradients' sign).

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


class OptimizationMixin:
    """``Algorithm``'s optimizer and gradient-update methods (they use the attributes
    ``Algorithm.__init__`` sets: ``_optimizer_arg``, ``_config``, ``_device``, ...)."""

    # ------------------------------------------------------------------ optimizers
    def add_optimizer(self, optimizer: Any, modules: Any, lr_scheduler: Any = None,
                      gradient_clipping: Any = "inherit",
                      clip_by_global_norm: Optional[bool] = None) -> None:
        """Gives some sub-modules an optimizer of their own (ALF's ``add_optimizer``), e.g.
        SAC's actor, critics and temperature, each with its own rate.

        The ``optimizer`` argument of the constructor then covers only the parameters no
        ``add_optimizer`` claimed. Each optimizer has its own schedule and clipping, is
        stepped in the same ``update_with_gradient`` (one backward pass of the total loss:
        keep a term's gradient out of another's parameters, e.g. with
        ``torch.no_grad`` or ``requires_grad_(False)``) and is checkpointed with its
        schedule, in the order: per algorithm (root first), its added optimizers in the order
        added, then its default one.

        Args:
            optimizer: a ``torch.optim.Optimizer`` class or factory called with the
                parameters (gin: ``@torch.optim.Adam``), or None to leave these modules to
                the default optimizer.
            modules: an ``nn.Module``, an ``nn.Parameter``, or a list of them.
            lr_scheduler: like ``Algorithm``'s ``lr_scheduler``, for this optimizer.
            gradient_clipping: like ``Algorithm``'s, for this optimizer; by default the
                algorithm's.
            clip_by_global_norm: like ``Algorithm``'s; by default the algorithm's.

        Raises:
            RuntimeError: once the optimizers exist (the trainer builds them right after the
                algorithm; otherwise the first update or ``state_dict`` does): call it in
                the constructor.
            ValueError: for a module or parameter that is not an attribute of this
                algorithm (or of its sub-modules), an ``optimizer`` or ``lr_scheduler``
                that cannot be called, or a ``gradient_clipping`` <= 0.
        """
        if self._optimizers is not None:
            raise RuntimeError(f"{self._name}: add_optimizer must be called before the "
                               f"optimizers are created (in the constructor)")
        check_optimizer_args(f"{self._name}.add_optimizer", optimizer, lr_scheduler,
                             None if gradient_clipping == "inherit" else gradient_clipping)
        if optimizer is None:
            return
        if isinstance(modules, (nn.Module, nn.Parameter)):
            modules = [modules]
        names = []  # by name: moving or loading the algorithm may replace a Parameter object
        for m in modules:
            found = (self.named_parameters() if isinstance(m, nn.Parameter)
                     else self.named_modules())
            name = next((("p", n) if isinstance(m, nn.Parameter) else ("m", n)
                         for n, x in found if x is m), None)
            if name is None:
                raise ValueError(f"{self._name}: add_optimizer got a {type(m).__name__} that "
                                 f"is not part of this algorithm; assign it to an attribute "
                                 f"first")
            names.append(name)
        self.__dict__.setdefault("_added_optimizers", []).append(dict(
            optimizer=optimizer, modules=names, lr_scheduler=lr_scheduler,
            clipping=(self._gradient_clipping if gradient_clipping == "inherit"
                      else gradient_clipping,
                      self._clip_by_global_norm if clip_by_global_norm is None
                      else clip_by_global_norm)))

    def _parameters_of(self, names) -> List[nn.Parameter]:
        params = []
        for kind, name in names:
            params.extend([self.get_parameter(name)] if kind == "p"
                          else self.get_submodule(name).parameters())
        return [p for p in params if p.requires_grad]

    def _own_parameters(self, claimed=frozenset()) -> List[nn.Parameter]:
        """Parameters of this algorithm not owned by a sub-algorithm with its own optimizer
        nor by an ``add_optimizer`` optimizer (``claimed``: their ids)."""
        excluded = set(claimed)
        for module in self.modules():
            if module is not self and isinstance(module, OptimizationMixin) and (
                    module._optimizer_arg is not None):
                excluded.update(id(p) for p in module.parameters())
        return [p for p in self.parameters() if id(p) not in excluded and p.requires_grad]

    def _create_optimizers(self) -> List[torch.optim.Optimizer]:
        algorithms = [m for m in self.modules() if isinstance(m, OptimizationMixin)]
        claimed = set()
        for module in algorithms:
            for entry in module.__dict__.get("_added_optimizers", []):
                claimed.update(id(p) for p in module._parameters_of(entry["modules"]))
        optimizers, schedulers, clipping = [], [], []

        def _add(opt, params, ctor, clip):
            if not isinstance(opt, torch.optim.Optimizer):
                if not params:
                    return
                opt = opt(params)
            optimizers.append(opt)
            schedulers.append(None if ctor is None else _checked_schedule(ctor(opt)))
            clipping.append(clip)

        for module in algorithms:
            taken = set()
            for entry in module.__dict__.get("_added_optimizers", []):
                params = [p for p in module._parameters_of(entry["modules"])
                          if id(p) not in taken]
                taken.update(id(p) for p in params)
                _add(entry["optimizer"], params, entry["lr_scheduler"], entry["clipping"])
            if module._optimizer_arg is None:
                if module._lr_scheduler_arg is not None:
                    raise UserError(f"{module._name}: lr_scheduler needs an optimizer of its "
                                    f"own (set {type(module).__name__}.optimizer)")
                continue
            _add(module._optimizer_arg, module._own_parameters(claimed),
                 module._lr_scheduler_arg,
                 (module._gradient_clipping, module._clip_by_global_norm))
        self._lr_schedulers = schedulers
        self.__dict__["_optimizer_clipping"] = clipping
        covered = {id(p) for o in optimizers for g in o.param_groups for p in g["params"]}
        uncovered = [n for n, p in self.named_parameters()
                     if p.requires_grad and id(p) not in covered]
        if uncovered:
            raise UserError(
                f"{self._name}: parameters {uncovered[:5]}{'...' if len(uncovered) > 5 else ''}"
                f" have no optimizer; pass optimizer=... (e.g. in gin "
                f"`{type(self).__name__}.optimizer = @torch.optim.Adam`)")
        return optimizers

    @property
    def optimizers(self) -> List[torch.optim.Optimizer]:
        """All optimizers of this algorithm and its sub-algorithms (created on first use,
        with their ``lr_scheduler``s; ``Trainer`` uses it right after building the algorithm,
        so that a setting they refuse stops the run before it starts).

        Raises:
            UserError: (a ``ValueError``) naming parameters no optimizer covers, or an
                algorithm with an ``lr_scheduler`` but no ``optimizer`` of its own, or a
                schedule whose length (``total_iters``, ``T_max``, ``step_size``) is below 1.
        """
        if self._optimizers is None:
            self._optimizers = self._create_optimizers()
        return self._optimizers

    # ------------------------------------------------------------------ gradient update
    def update_with_gradient(self, loss_info: LossInfo, valid_masks: Optional[torch.Tensor] = None,
                             weight: float = 1.0) -> Tuple[LossInfo, List[nn.Parameter]]:
        """One optimizer step on ``loss_info``.

        A ``[T, B]`` per-step ``loss`` is multiplied by ``valid_masks`` (``valid_step_mask``:
        0 at LAST steps, steps before a cut and the sequence's last step), a ``[T-1, B]`` loss
        over transitions by its first ``T - 1`` rows; either is averaged over all its entries
        (ALF's convention: the gradient scale does not depend on how many steps a batch
        masks), ``scalar_loss`` is added, and the sum is multiplied by ``weight``. Gradients
        are clipped per optimizer (its ``gradient_clipping``) before its step.

        Args:
            loss_info: from ``calc_loss``; ``loss`` ``[T, B, ...]``, ``[T-1, B, ...]`` or a
                scalar.
            valid_masks: ``[T, B]`` float or bool, or None (all valid).
            weight: multiplies the loss (e.g. the size of a last, partial mini-batch relative
                to a full one).

        Returns:
            ``(loss_info with scalar loss and extra terms, parameters)``.

        Raises:
            NonFiniteLossError: if the loss or any of its terms is NaN or infinite, naming the
                term and the iteration; no parameter is changed then.
            UserError: if a learning-rate schedule sets a negative or non-finite rate for
                the next update.
            ValueError: if the loss's shape fits neither ``[T, B]`` nor ``[T-1, B]``.
        """
        loss = loss_info.loss
        if isinstance(loss, torch.Tensor) and loss.ndim > 0:
            if valid_masks is not None:
                loss = loss * _fit_mask(valid_masks, loss)
            loss = loss.mean()
        if not is_empty(loss_info.scalar_loss):
            loss = loss + loss_info.scalar_loss
        loss = loss * weight
        # (meta tensors, which the device-placement tests train on, hold no values to check)
        if loss.device.type != "meta" and not bool(torch.isfinite(loss.detach())):
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
            self._clip_and_summarize_grads(group_params, i, *self._optimizer_clipping[i])
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
                self._check_scheduled_rates(i, opt)
        if scaler is not None:
            scaler.update()
        if summary.should_record_summaries():
            self._summarize_loss(loss.detach(), loss_info, valid_masks)
        return loss_info._replace(loss=loss.detach()), params

    def _check_scheduled_rates(self, index: int, optimizer) -> None:
        """Raises ``UserError`` if optimizer ``index``'s schedule set a negative or
        non-finite learning rate (``MultiStepLR(gamma=-0.1)``): torch accepts it, and a
        negative rate ascends the loss without a word."""
        for group in optimizer.param_groups:
            lr = float(group["lr"])
            if not math.isfinite(lr) or lr < 0:
                schedule = self._lr_schedulers[index]
                raise UserError(
                    f"{self._name}: the learning-rate schedule {type(schedule).__name__} of "
                    f"optimizer {index} set the learning rate to {lr} after "
                    f"{getattr(schedule, 'last_epoch', '?')} updates; a rate must be finite "
                    f"and >= 0: check the schedule's settings (e.g. its gamma)")

    def _clip_and_summarize_grads(self, params: List[nn.Parameter], index: int,
                                  clip: Optional[float], by_global_norm: bool) -> None:
        if not params:
            return
        if clip is not None and not by_global_norm:
            torch.nn.utils.clip_grad_value_(params, clip)
            clip = None
        record = summary.should_record_summaries()
        if clip is not None or record:
            # foreach kernels (faster on CPU too) exist for every device but meta
            norm = torch.nn.utils.clip_grad_norm_(
                params, max_norm=math.inf if clip is None else clip,
                foreach=params[0].device.type != "meta")
            if record:
                summary.scalar(f"global_grad_norm/{self._name}/{index}", norm)

    def _summarize_loss(self, loss: torch.Tensor, loss_info: LossInfo,
                        valid_masks: Optional[torch.Tensor]) -> None:
        summary.scalar(f"loss/{self._name}", loss)
        for path, value in nest.flatten_with_path(loss_info.extra):
            if not isinstance(value, torch.Tensor):
                continue
            value = value.detach().float()
            if valid_masks is not None and _fits_mask(valid_masks, value):
                m = _fit_mask(valid_masks, value).expand_as(value)
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
