"""The optimizers and the gradient update of an ``Algorithm`` (ALF's ``update_with_gradient``):
optimizer construction, loss summaries, the non-finite-loss guard, gradient clipping and mixed
precision."""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

from rlf import nest
from rlf.data_structures import LossInfo
from rlf.utils import summary
from rlf.utils.common import is_empty
from rlf.utils.errors import UserError

logger = logging.getLogger(__name__)

__all__ = ["OptimizationMixin", "NonFiniteLossError", "masked_loss_mean", "LOSS_AVERAGES",
           "check_required_optimizers"]


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

    With ``average = "all"`` (ALF's rule) the result is ``sum(mask * loss) / N`` with ``N``
    the number of entries of ``loss``: the gradient of each entry does not depend on how
    many others the mask removes. With ``"valid"`` it is ``sum(mask * loss) / sum(mask)``
    (the mask broadcast over the trailing dims; 0 when the mask is all 0): the mean over the
    kept entries.

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


def _term_mask(valid_masks: Optional[torch.Tensor], x: torch.Tensor,
               own: Optional[torch.Tensor]) -> Optional[torch.Tensor]:
    """The mask of loss term ``x``: its own (``LossInfo.mask``), else the loop's step mask
    fitted to its ``[T-k, B]`` rows; for a ``[B]`` loss (one per sequence) whether the
    sequence has a valid step at all; none for a scalar or without a step mask.

    A sequence without a valid step holds no transition (``[LAST, FIRST]``, a cut), so its
    loss is left out whatever it is; with ``T = 2`` this is exactly the transition mask, so a
    transition loss flattened to ``[B]`` is masked as its ``[1, B]`` form would be."""
    if own is not None:
        return own
    if valid_masks is None or x.ndim == 0:
        return None
    if x.ndim == 1 and x.shape[0] == valid_masks.shape[1]:
        return valid_masks.bool().any(0)  # [B]: one loss per sequence
    return _fit_mask(valid_masks, x).flatten(1)[:, :x.shape[1]]


def _extra_mean(value: torch.Tensor, valid_masks: Optional[torch.Tensor]) -> torch.Tensor:
    """The summary of an ``extra`` loss term: its mean over the step mask (the loop's, or the
    loss's own ``LossInfo.mask``) where it fits the mask (``[T-k, B, ...]``), else its plain
    mean."""
    value = value.float()
    if valid_masks is not None and _fits_mask(valid_masks, value):
        m = _fit_mask(valid_masks, value).expand_as(value)
        value = (value * m).sum() / m.sum().clamp(min=1)
    return value.mean()


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


def check_required_optimizers(name: str, configurable: str, **optimizers: Any) -> None:
    """Checks the optimizers of an algorithm that trains each part with its own (SAC's,
    TD3's, IQL's ``actor_optimizer``, ...): each is set and callable.

    Args:
        name: the algorithm's name, for the message.
        configurable: its class name, for the gin fix in the message.
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


class OptimizationMixin:
    """``Algorithm``'s optimizer and gradient-update methods (they use the attributes
    ``Algorithm.__init__`` sets: ``_optimizer_arg``, ``_config``, ``_device``, ...)."""

    # ------------------------------------------------------------------ optimizers
    def add_optimizer(self, optimizer: Any, modules: Any, lr_scheduler: Any = None,
                      gradient_clipping: Any = "inherit",
                      clip_by_global_norm: Optional[bool] = None,
                      name: Optional[str] = None, every: int = 1) -> None:
        """Gives some sub-modules an optimizer of their own (ALF's ``add_optimizer``), e.g.
        SAC's actor, critics and temperature, each with its own rate.

        The ``optimizer`` argument of the constructor then covers only the parameters no
        ``add_optimizer`` claimed. Each optimizer has its own schedule and clipping and is
        checkpointed with its schedule and step count, in the order: per algorithm (root
        first), its added optimizers in the order added, then its default one.

        Which loss trains it: when ``calc_loss`` returns ``LossInfo.loss`` as a dict of
        named terms, the term named ``name`` is back-propagated into this optimizer's
        parameters only (``backward(inputs=...)``: a term through another's module leaves
        that module's gradients alone, without ``requires_grad`` toggling), and an update
        without that term does not step it. A single (unnamed) loss trains every optimizer.
        Either way the optimizer steps only on updates ``every, 2 every, ...`` (counted from
        1; ``is_due``), and its schedule advances and its ``learning_rate/...`` summary is
        written only when it stepped.

        Args:
            optimizer: a ``torch.optim.Optimizer`` class or factory called with the
                parameters (gin: ``@torch.optim.Adam``), or None to leave these modules to
                the default optimizer.
            modules: an ``nn.Module``, an ``nn.Parameter``, or a list of them.
            lr_scheduler: like ``Algorithm``'s ``lr_scheduler``, for this optimizer.
            gradient_clipping: like ``Algorithm``'s, for this optimizer; by default the
                algorithm's.
            clip_by_global_norm: like ``Algorithm``'s; by default the algorithm's.
            name: the optimizer's name: the key of its term in a dict ``LossInfo.loss``,
                of ``optimizer_steps`` and of its summaries (``learning_rate/<alg>/<name>``);
                by default its index.
            every: it steps on every ``every``-th update (TD3's ``policy_delay``: 2).

        Raises:
            RuntimeError: once the optimizers exist (the trainer builds them right after the
                algorithm; otherwise the first update or ``state_dict`` does): call it in
                the constructor.
            ValueError: for a module or parameter that is not an attribute of this
                algorithm (or of its sub-modules), an ``optimizer`` or ``lr_scheduler``
                that cannot be called, a ``gradient_clipping`` <= 0, ``every`` < 1 or a
                ``name`` used already.
        """
        if self._optimizers is not None:
            raise RuntimeError(f"{self._name}: add_optimizer must be called before the "
                               f"optimizers are created (in the constructor)")
        check_optimizer_args(f"{self._name}.add_optimizer", optimizer, lr_scheduler,
                             None if gradient_clipping == "inherit" else gradient_clipping)
        if not (isinstance(every, int) and every >= 1):
            raise ValueError(f"{self._name}.add_optimizer: every must be an int >= 1 "
                             f"(updates), got {every!r}")
        if name is not None and (not isinstance(name, str) or name == "default" or name in [
                e["name"] for e in self.__dict__.get("_added_optimizers", [])]):
            raise ValueError(f"{self._name}.add_optimizer: name {name!r} is taken or not a "
                             f"string; give each optimizer its own name")
        if optimizer is None:
            return
        optimizer_name = name
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
            optimizer=optimizer, modules=names, lr_scheduler=lr_scheduler, name=optimizer_name,
            every=every, clipping=(self._gradient_clipping if gradient_clipping == "inherit"
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
        optimizers, schedulers, clipping, names, every, tags = [], [], [], [], [], []

        def _add(opt, params, ctor, clip, name, period):
            if not isinstance(opt, torch.optim.Optimizer):
                if not params:
                    return
                opt = opt(params)
            optimizers.append(opt)
            schedulers.append(None if ctor is None else _checked_schedule(ctor(opt)))
            clipping.append(clip)
            tags.append(str(len(names)) if name in (None, "default") or name.endswith(
                "/default") else name)
            names.append(str(len(names)) if name is None else name)
            every.append(period)

        for module in algorithms:
            taken = set()
            for entry in module.__dict__.get("_added_optimizers", []):
                params = [p for p in module._parameters_of(entry["modules"])
                          if id(p) not in taken]
                taken.update(id(p) for p in params)
                _add(entry["optimizer"], params, entry["lr_scheduler"], entry["clipping"],
                     entry["name"] if module is self or entry["name"] is None
                     else f"{module._name}/{entry['name']}", entry["every"])
            if module._optimizer_arg is None:
                if module._lr_scheduler_arg is not None:
                    raise UserError(f"{module._name}: lr_scheduler needs an optimizer of its "
                                    f"own (set {type(module).__name__}.optimizer)")
                continue
            _add(module._optimizer_arg, module._own_parameters(claimed),
                 module._lr_scheduler_arg,
                 (module._gradient_clipping, module._clip_by_global_norm),
                 "default" if module is self else f"{module._name}/default", 1)
        if len(set(names)) != len(names):
            raise UserError(f"{self._name}: optimizer names {names} repeat; give each "
                            f"add_optimizer its own name (sub-algorithms need their own "
                            f"names too)")
        self._lr_schedulers = schedulers
        self.__dict__["_optimizer_clipping"] = clipping
        self.__dict__["_optimizer_names"] = names
        self.__dict__["_optimizer_every"] = every
        self.__dict__["_optimizer_tags"] = tags
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
            self._counters.set_num_optimizers(len(self._optimizers))
        return self._optimizers

    # ------------------------------------------------------------------ update counts
    @property
    def num_updates(self) -> int:
        """The number of gradient updates (``update_with_gradient`` calls that applied one)
        so far, checkpointed; an optimizer with ``every = N`` steps on updates ``N, 2N, ...``
        (counted from 1)."""
        return self._counters.num_updates

    @property
    def optimizer_steps(self) -> Dict[str, int]:
        """How many times each optimizer stepped, by its name (``optimizer_names``),
        checkpointed. An optimizer steps on an update where it is due (``is_due``) and
        received a loss; AMP's GradScaler skipping a step does not count."""
        names = self.optimizer_names  # (builds the optimizers, sizing the counts)
        return dict(zip(names, self._counters.optimizer_steps))

    @property
    def optimizer_names(self) -> List[str]:
        """The optimizers' names in ``optimizers`` order: the ``name`` given to
        ``add_optimizer``, ``"default"`` for an algorithm's own ``optimizer`` (a
        sub-algorithm's: ``"<its name>/default"``), else its index."""
        self.optimizers  # noqa: B018 (builds them)
        return list(self.__dict__["_optimizer_names"])

    def get_extra_state(self) -> Dict[str, Any]:
        """The parent's extra state plus the update count and the optimizers' step counts
        (in ``optimizers`` order)."""
        state = super().get_extra_state()
        state["num_updates"] = self.num_updates
        state["optimizer_steps"] = self._counters.optimizer_steps
        return state

    def set_extra_state(self, state: Dict[str, Any]) -> None:
        """Restores ``get_extra_state()`` output; checkpoints without the counts start them
        at 0."""
        super().set_extra_state(state)
        self._counters.num_updates = int(state.get("num_updates", 0))
        steps = [int(c) for c in state.get("optimizer_steps") or []]
        if self._optimizers is None:  # sized now; building the optimizers keeps a fitting size
            self._counters.set_num_optimizers(len(steps))
        if len(steps) == len(self._counters.optimizer_steps):
            self._counters.set_optimizer_steps(steps)
        else:  # counts of other optimizers (another configuration): start from 0
            self._counters.set_optimizer_steps([0] * len(self._counters.optimizer_steps))

    def is_due(self, name: str) -> bool:
        """Whether optimizer ``name`` steps in the next update (its ``every`` divides the
        next update's number, counted from 1): ``calc_loss`` may skip computing a term whose
        optimizer is not due (TD3's delayed actor).

        Raises:
            KeyError: for a name that is not in ``optimizer_names``.
        """
        return self._due(self._optimizer_index(name))

    def _due(self, index: int) -> bool:
        return (self.num_updates + 1) % self.__dict__["_optimizer_every"][index] == 0

    def _optimizer_index(self, name: str) -> int:
        names = self.optimizer_names
        if name not in names:
            raise KeyError(f"{self._name}: no optimizer named {name!r}; the optimizers are "
                           f"{names} (add_optimizer(..., name=...))")
        return names.index(name)

    # ------------------------------------------------------------------ gradient update
    def update_with_gradient(self, loss_info: LossInfo, valid_masks: Optional[torch.Tensor] = None,
                             weight: float = 1.0) -> Tuple[LossInfo, List[nn.Parameter]]:
        """One gradient update on ``loss_info``: each due optimizer steps on its loss.

        Each loss (the single ``loss``, or each term of a dict ``loss``) is reduced to a
        scalar with ``masked_loss_mean`` under its mask: its ``LossInfo.mask`` if given,
        else the loop's step mask ``valid_masks`` (``valid_step_mask``: 0 at LAST steps,
        steps before a cut and the sequence's last step) fitted to its shape: ``[T, B]`` per
        step, ``[T-k, B]`` the first ``T - k`` rows (``k = 1``: transitions), ``[B]`` (one
        loss per sequence) by whether the sequence has a valid step, scalars unmasked. It is averaged by ``loss_average`` (``"all"``, ALF's: over all
        entries, so the gradient scale does not depend on how many are masked; or
        ``"valid"``: over the kept ones), ``scalar_loss`` is added, and the sum is
        multiplied by ``weight``.

        A single loss is back-propagated once into every due optimizer's parameters; a dict
        of terms ``{name: loss}`` is back-propagated term by term, each into the parameters
        of the optimizer of that name only (``add_optimizer(name=...)``), and terms whose
        optimizer is not due (``is_due``) are left out. Gradients are clipped per optimizer
        (its ``gradient_clipping``) before its step; its schedule advances only if it
        stepped. Loss terms, gradient norms and learning rates are kept from the last update
        that produced each and written at the next update that records summaries, so a term
        that alternates with the summary interval still reaches TensorBoard.

        Args:
            loss_info: from ``calc_loss``: ``loss`` a tensor (``[T-k, B, ...]`` for
                ``k >= 0``, ``[B]`` or a scalar) or a dict of such tensors keyed by
                optimizer name; ``mask`` None/``()``, a tensor (the loss's leading dims) or a
                dict of them keyed like ``loss``; ``scalar_loss`` a scalar (with a dict
                loss: a dict keyed like it).
            valid_masks: ``[T, B]`` float or bool, or None (all valid).
            weight: multiplies the loss (e.g. the size of a last, partial mini-batch relative
                to a full one).

        Returns:
            ``(loss_info with the scalar total loss, parameters that received gradients)``.

        Raises:
            NonFiniteLossError: if the loss or any of its terms is NaN or infinite, naming the
                term and the iteration; no parameter is changed then.
            UserError: if a learning-rate schedule sets a negative or non-finite rate for
                the next update.
            ValueError: if a loss fits neither its mask nor ``[T-k, B]``/``[B]``, or a term
                names no optimizer.
            UserError: (a ``ValueError``) for a loss term and an ``extra`` entry of the same
                name, which would write one summary tag (``loss/<name>/<key>``).
        """
        optimizers = self.optimizers
        names = self.__dict__["_optimizer_names"]
        self._check_summary_tags(loss_info)
        terms = self._reduced_loss_terms(loss_info, valid_masks, weight)
        total = sum(terms.values())
        # (meta tensors, which the device-placement tests train on, hold no values to check)
        if total.device.type != "meta" and not bool(torch.isfinite(total.detach())):
            self._raise_non_finite(loss_info, total)
        due = [self._due(i) for i in range(len(optimizers))]
        if None in terms:
            backward = [(terms[None], [i for i in range(len(optimizers)) if due[i]])]
        else:
            backward = [(term, [names.index(key)]) for key, term in terms.items()
                        if due[names.index(key)]]
        for opt in optimizers:
            opt.zero_grad(set_to_none=True)
        scaler = self._grad_scaler
        for n, (term, indices) in enumerate(backward):
            inputs = [p for i in indices for g in optimizers[i].param_groups
                      for p in g["params"]]
            if not inputs or not term.requires_grad:
                continue  # (a term that no parameter reaches gives no gradient)
            (scaler.scale(term) if scaler is not None else term).backward(
                inputs=inputs, retain_graph=n < len(backward) - 1)
        pending = self.__dict__.setdefault("_pending_summaries", {})
        active = summary.is_active()
        params = []
        for i in sorted({i for _, indices in backward for i in indices}):
            opt = optimizers[i]
            if scaler is not None:
                scaler.unscale_(opt)
            group_params = [p for g in opt.param_groups for p in g["params"]
                            if p.grad is not None]
            params.extend(group_params)
            tag = f"{self._name}/{self.__dict__['_optimizer_tags'][i]}"
            norm = self._clip_grads(group_params, *self._optimizer_clipping[i], active)
            stepped = True
            if scaler is not None:
                # GradScaler skips the step when a gradient is inf/NaN; the schedule must
                # then stay where it is too.
                stepped = not group_params or bool(torch.stack(
                    [p.grad.isfinite().all() for p in group_params]).all())
                scaler.step(opt)
            else:
                opt.step()
            if not stepped:
                continue
            self._counters.count_optimizer_step(i)
            if active:  # the rate this update used
                pending[f"learning_rate/{tag}"] = opt.param_groups[0]["lr"]
                if norm is not None:
                    pending[f"global_grad_norm/{tag}"] = norm
            if self._lr_schedulers[i] is not None:
                self._lr_schedulers[i].step()
                self._check_scheduled_rates(i, opt)
        if scaler is not None:
            scaler.update()
        self._counters.num_updates += 1
        total = total.detach()
        if active:
            self._summarize_loss(total, terms, loss_info, valid_masks, pending)
            if summary.should_record_summaries():
                for tag, value in pending.items():
                    summary.scalar(tag, value() if callable(value) else value)
                pending.clear()
        return loss_info._replace(loss=total), params

    def _reduced_loss_terms(self, loss_info: LossInfo, valid_masks: Optional[torch.Tensor],
                            weight: float) -> Dict[Optional[str], torch.Tensor]:
        """``{None: scalar}`` for a single loss, ``{name: scalar}`` for a dict of terms: each
        masked, averaged, plus its ``scalar_loss``, times ``weight``."""
        loss, masks, scalar_loss = loss_info.loss, loss_info.mask, loss_info.scalar_loss
        average = getattr(self, "_loss_average", "all")
        if isinstance(loss, dict):
            names = self.__dict__["_optimizer_names"]
            unknown = sorted(set(loss) - set(names))
            if unknown:
                raise ValueError(f"{self._name}: loss terms {unknown} name no optimizer; the "
                                 f"optimizers are {names} (add_optimizer(..., name=...))")
            for what, value in (("mask", masks), ("scalar_loss", scalar_loss)):
                if not is_empty(value) and not (isinstance(value, dict)
                                                and set(value) <= set(loss)):
                    raise ValueError(f"{self._name}: with a dict of loss terms, "
                                     f"LossInfo.{what} is a dict keyed like it, got "
                                     f"{type(value).__name__}")
            items = [(k, loss[k], (masks or {}).get(k), (scalar_loss or {}).get(k))
                     for k in loss]
        else:
            items = [(None, loss, None if is_empty(masks) else masks,
                      None if is_empty(scalar_loss) else scalar_loss)]
        terms = {}
        for key, x, mask, extra in items:
            if isinstance(x, torch.Tensor):
                term_mask = _term_mask(valid_masks, x, mask)
                if self.num_updates == 0:
                    self._warn_if_masked_out(key, term_mask)
                x = masked_loss_mean(x, term_mask, average)
            elif is_empty(x):
                x = 0.0
            if extra is not None:
                x = x + extra
            if not isinstance(x, torch.Tensor):
                raise ValueError(f"{self._name}: calc_loss gave no loss tensor"
                                 f"{'' if key is None else f' for term {key!r}'}")
            terms[key] = x * weight
        return terms

    def _warn_if_masked_out(self, key: Optional[str], mask: Optional[torch.Tensor]) -> None:
        """Logs a warning if ``mask`` keeps no entry of a loss (checked at the first update
        only: a later all-zero mini-batch can be chance, a first one is most likely a
        setting). The usual cause: a per-step ``[T, B]`` loss on sampled sequences of one
        step, which the default step mask (no LAST step, not a sequence's last step)
        empties; the loss is then 0 and nothing learns."""
        if mask is None or mask.device.type == "meta" or bool(mask.detach().any()):
            return
        term = "the loss" if key is None else f"loss term {key!r}"
        logger.warning(
            "%s: the mask of %s keeps no entry at the first update, so it trains nothing; "
            "the default step mask leaves out LAST steps and each sequence's last step, so "
            "with mini_batch_length = 1 a per-step loss keeps none: give LossInfo.mask or "
            "sample longer sequences", self._name, term)

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

    @staticmethod
    def _clip_grads(params: List[nn.Parameter], clip: Optional[float], by_global_norm: bool,
                    want_norm: bool) -> Optional[torch.Tensor]:
        """Clips ``params``' gradients; returns their global L2 norm (before clipping by
        norm, after clipping by value) if computed (clipping by norm or ``want_norm``)."""
        if not params:
            return None
        if clip is not None and not by_global_norm:
            torch.nn.utils.clip_grad_value_(params, clip)
            clip = None
        if clip is None and not want_norm:
            return None
        # foreach kernels (faster on CPU too) exist for every device but meta
        return torch.nn.utils.clip_grad_norm_(
            params, max_norm=math.inf if clip is None else clip,
            foreach=params[0].device.type != "meta").detach()

    def _summarize_loss(self, total: torch.Tensor, terms: Dict[Optional[str], torch.Tensor],
                        loss_info: LossInfo, valid_masks: Optional[torch.Tensor],
                        pending: Dict[str, Any]) -> None:
        """Puts the update's total loss, its named terms and ``extra`` terms in ``pending``, to
        be written at the next update that records summaries; an ``extra`` term is kept
        unreduced and reduced (``_extra_mean``) only when written, so updates whose values
        are overwritten before then pay nothing for it."""
        pending[f"loss/{self._name}"] = total
        for key, term in terms.items():
            if key is not None:
                pending[f"loss/{self._name}/{key}"] = term.detach()
        # A single loss's own mask (LossInfo.mask) replaces the loop's for its extras too.
        mask = loss_info.mask if isinstance(loss_info.mask, torch.Tensor) else valid_masks
        for path, value in nest.flatten_with_path(loss_info.extra):
            if isinstance(value, torch.Tensor):  # reduced only if it is the one written
                pending[f"loss/{self._name}/{path}"] = functools.partial(
                    _extra_mean, value.detach(), mask)

    def _check_summary_tags(self, loss_info: LossInfo) -> None:
        """Refuses a loss term and an ``extra`` entry that would write one summary tag
        (``loss/<name>/<key>``), where the later would silently replace the other.

        Raises:
            UserError: naming both and the tag.
        """
        if not isinstance(loss_info.loss, dict) or is_empty(loss_info.extra):
            return
        clash = sorted(set(loss_info.loss) & {path for path, _ in
                                              nest.flatten_with_path(loss_info.extra)})
        if clash:
            tag = f"loss/{self._name}/{clash[0]}"
            raise UserError(f"{self._name}: the loss term {clash[0]!r} (LossInfo.loss) and the "
                            f"extra {clash[0]!r} (LossInfo.extra) would both write the summary "
                            f"'{tag}'; rename the extra (e.g. '{clash[0]}_loss')")

    def _raise_non_finite(self, loss_info: LossInfo, loss: torch.Tensor) -> None:
        bad = [p for p, v in nest.flatten_with_path(
            {"loss": loss_info.loss, "scalar_loss": loss_info.scalar_loss,
             "extra": loss_info.extra})
            if isinstance(v, torch.Tensor) and not bool(torch.isfinite(v.detach()).all())]
        where = ", ".join(bad) if bad else "the weighted total"
        raise NonFiniteLossError(
            f"{self._name}: the loss is {float(loss.detach())} at training iteration "
            f"{self.train_iter_num} (non-finite terms: {where}); no update was applied. "
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
