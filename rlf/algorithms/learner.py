"""The learner: an algorithm's gradient updates (ALF's ``update_with_gradient``), one per
``Batch`` of a data path or on an unroll's own graph, stepping the algorithm's optimizers (with
their schedules, periods and clipping: ``optimizer_set.py``) and counting in its counters;
mixed precision, the loss summaries and the averaging over the run's learners.
``make_learner`` makes one from what the algorithm declares (``build_training`` does). The
pure pieces (masks, reductions, argument checks) are in ``optimization.py``.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
from typing import Any, Dict, List, NamedTuple, Optional, Tuple, Union, cast

import torch
from torch import nn

from rlf import nest
from rlf.algorithms.counters import Counters
from rlf.algorithms.optimizer_set import OptimizerEntry, OptimizerPlan, OptimizerSet
from rlf.algorithms.data_paths import Batch, RolloutBatch
from rlf.algorithms.seams import LearnerSeam, run_args
from rlf.algorithms.optimization import (NonFiniteLossError, extra_mean,
                                         extra_sum, masked_loss_mean, term_mask)
from rlf.data_structures import Experience, LossInfo, valid_step_mask
from rlf.utils import distributed, summary
from rlf.utils.common import is_empty
from rlf.utils.deprecation import warn_deprecated
from rlf.utils.errors import UserError

# (OptimizerPlan: defined in optimizer_set.py, importable from here as in rlf 0.3)
__all__ = ["Learner", "LearnerSettings", "OptimizerPlan", "importance_weighted",
           "make_learner"]

logger = logging.getLogger(__name__)


def importance_weighted(name: str, loss: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    """``loss`` (``[T-k, B, ...]`` or ``[B]``) times prioritised replay's ``[B]`` weights.

    Raises:
        ValueError: for a loss without the batch dim.
    """
    if loss.ndim == 1 and loss.shape[0] == weights.shape[0]:
        return loss * weights
    if loss.ndim < 2 or loss.shape[1] != weights.shape[0]:
        raise ValueError(f"{name}: prioritised replay weights each sequence of the batch, so "
                         f"its loss must be [T-k, B, ...] or [B]; got shape "
                         f"{tuple(loss.shape)} for B = {weights.shape[0]}")
    return loss * weights.view((1, -1) + (1,) * (loss.ndim - 2))


class LearnerSettings(NamedTuple):
    """What the learner needs of its run.

    Attributes:
        config: the ``TrainerConfig``, or None.
        device: where the algorithm's parameters live.
        loss_average: ``masked_loss_mean``'s rule, ``"all"`` or ``"valid"``.
        world: the learners of the run, over which gradients and loss summaries average
            (one learner until ``Learner.build`` is given the run's).
    """

    config: Any
    device: torch.device
    loss_average: str
    world: distributed.World


def _check_steps(name: str, key: Optional[str], loss: torch.Tensor,
                 valid_masks: Optional[torch.Tensor]) -> None:
    """Refuses a loss over the ``[T-k, B]`` steps of sequences of ``T <= k`` steps.

    Raises:
        UserError: (a ``ValueError``) naming ``TrainerConfig.mini_batch_length``.
    """
    if loss.ndim >= 2 and loss.shape[0] == 0 and valid_masks is not None:
        term = "" if key is None else f" term {key!r}"
        raise UserError(f"{name}.calc_loss gave a loss{term} over 0 steps of sequences of "
                        f"{valid_masks.shape[0]} steps: a loss over transitions needs "
                        f"TrainerConfig.mini_batch_length >= 2 (or more for n-step targets)")


def _check_prioritized_rows(name: str, batch_info, experience: Experience) -> None:
    """Refuses a prioritised mini-batch with appended sequences (``mix_experience``), which
    have no importance weight and no priority.

    Raises:
        UserError: (a ``ValueError``) naming the rows and the fix.
    """
    rows, drawn = nest.flatten(experience)[0].shape[1], batch_info.env_ids.shape[0]
    if rows != drawn:
        raise UserError(f"{name}.mix_experience appended {rows - drawn} sequences to a "
                        f"prioritised mini-batch of {drawn}: they have no importance weight "
                        f"and no priority to update; remove TrainerConfig.priority_replay, or "
                        f"append none")


class Learner:
    """The gradient updates of ``algorithm`` (the root of an algorithm tree): backward, clip,
    step, mixed precision, the loss summaries and the averaging over the run's learners;
    ``build_training`` makes it (``make_learner``) from what the algorithm declares. The
    optimizers and counters it steps are the algorithm's (``OptimizerSet``); it reads them out
    as before (``optimizers``, ``names``, ``counters``, ...).

    Args:
        algorithm: the root ``Algorithm``.
        optimizers: the algorithm's ``OptimizerSet``.
        settings: the run's ``LearnerSettings``.

    Attributes:
        settings: the ``LearnerSettings``.
    """

    def __init__(self, algorithm: LearnerSeam, optimizers: OptimizerSet,
                 settings: LearnerSettings):
        self.algorithm = algorithm
        self._optimizers = optimizers
        self.settings = settings
        self._grad_scaler: Optional[torch.amp.GradScaler] = None
        # Loss terms, gradient norms and rates, written at the next recording update.
        self._pending: Dict[str, Any] = {}
        # The rows of each RowSource in the mini-batch of the update under way.
        self._row_counts: Optional[Tuple[int, int, int]] = None

    @property
    def row_sources(self) -> Optional[torch.Tensor]:
        """During an update (``train_step``, ``calc_loss``, ``after_update``): ``[B]`` int64 on
        the algorithm's device, the ``RowSource`` of each row of the mini-batch, in order:
        the data path's own (``SAMPLED``), hybrid training's offline rows (``OFFLINE``), those
        the algorithm's experience sources appended (``MIXED``). None outside an update."""
        counts = self._row_counts
        if counts is None:
            return None
        device = self.settings.device
        return torch.repeat_interleave(torch.arange(len(counts), device=device),
                                       torch.tensor(counts, device=device))

    # ------------------------------------------------------------------ optimizers
    @property
    def counters(self) -> Counters:
        """The algorithm's ``Counters``, which travel to the actors."""
        return self._optimizers.counters

    @property
    def built(self) -> bool:
        """Whether the optimizers exist (``add_optimizer`` and new state are refused then)."""
        return self._optimizers.built

    def build(self, world: Optional[distributed.World] = None) -> None:
        """Builds the optimizers and their schedules now (else the first update or
        ``state_dict`` does), so that a setting they refuse stops a run before any write.

        Args:
            world: deprecated (removed in 0.5): ``make_learner(algorithm, world=...)``
                makes the learner with its world; a world given here replaces it.

        Raises:
            ValueError: for a setting an optimizer or schedule refuses.
        """
        if world is not None:
            warn_deprecated("Learner.build(world)", "make_learner(algorithm, config, world) "
                            "(build_training(..., world=...) makes it)")
            self.settings = self.settings._replace(world=world)
        self._optimizers.build()

    @property
    def optimizers(self) -> List[torch.optim.Optimizer]:
        """The optimizers, built at the first call."""
        return self._optimizers.optimizers

    @property
    def names(self) -> List[str]:
        """The optimizers' names, in ``optimizers`` order."""
        return self._optimizers.names

    @property
    def optimizer_steps(self) -> Dict[str, int]:
        """How many times each optimizer stepped (a step AMP skipped does not count), by
        name."""
        return self._optimizers.optimizer_steps

    @property
    def schedules(self) -> List[Any]:
        """Each optimizer's learning-rate schedule, or None."""
        return self._optimizers.schedules

    def _built(self) -> List[OptimizerEntry]:
        return self._optimizers.build()

    def index(self, name: str) -> int:
        """The index of optimizer ``name``.

        Raises:
            KeyError: for a name that is not among the optimizers.
        """
        return self._optimizers.index(name)

    def is_due(self, index: int) -> bool:
        """Whether optimizer ``index`` steps in the next update (its ``every`` divides the
        next update's number, from 1)."""
        return self._optimizers.is_due(index)

    # ------------------------------------------------------------------ updates
    def update(self, batch: Union[Batch, RolloutBatch]) -> int:
        """One gradient update on a ``Batch`` (batch-major ``[B, T]``, on the algorithm's
        device) through ``train_step`` as its ``sequences`` say. With a priority sink the
        losses are weighted by the rows' importance weights and ``LossInfo.priority`` goes to
        the sink. A ``RolloutBatch`` is trained on by ``update_on_rollout``.

        Returns:
            The number of steps trained on.

        Raises:
            ValueError: for a batch without its data path's ``sequences``.
        """
        if isinstance(batch, RolloutBatch):
            return self.update_on_rollout(batch.experience, batch.train_info)
        if batch.sequences is None:
            raise ValueError(f"{self.algorithm.name}: a Batch for Learner.update needs the "
                             f"data path's sequences (Batch.sequences: data_path.sequences)")
        world = self.settings.world
        with summary.record_if(lambda: batch.record), world.batch_rows(
                batch.rows, batch.rows_size), world.own_draws_check(
                f"{self.algorithm.name}.train_step or calc_loss"), self._rows(
                batch.sources or (batch.valid.shape[0], 0, 0)):
            return self._update_rows(batch)

    @contextlib.contextmanager
    def _rows(self, counts: Tuple[int, int, int]):
        """``row_sources`` gives the rows of ``counts`` (one count per ``RowSource``) inside."""
        self._row_counts = counts
        try:
            yield
        finally:
            self._row_counts = None

    def _update_rows(self, batch: Batch) -> int:
        alg, sequences, batch_info = self.algorithm, batch.sequences, batch.batch_info
        sink = batch.priorities if batch_info is not None else None
        experience, valid = batch.experience, batch.valid
        assert sequences is not None  # update's check
        experience, valid = nest.map_structure(lambda x: x.transpose(0, 1), (experience, valid))
        with self.autocast():
            train_info = sequences.train_info(alg, experience)
            with self.settings.world.batch_rows(batch.rows, batch.rows_size, time_major=True):
                loss_info = alg.calc_loss(train_info)
        # calc_loss saw the [T-k, B] steps after a burn-in: so does the mask
        experience, valid = sequences.after_burn_in(experience, valid)
        if sink is not None:
            _check_prioritized_rows(type(alg).__name__, batch_info, experience)
            weights = batch_info.importance_weights.to(self.settings.device)
            loss_info = loss_info._replace(loss=nest.map_structure(
                lambda x: importance_weighted(alg.name, x, weights), loss_info.loss))
        loss_info, params = self.update_with_gradient(loss_info, valid, batch.weight)
        alg.after_update(experience.time_step, train_info)
        if sink is not None and not is_empty(loss_info.priority):
            sink(batch_info.env_ids, batch_info.positions, loss_info.priority.detach().cpu())
        self.summarize_train(experience, train_info, loss_info, params)
        return int(valid.numel())

    def update_on_rollout(self, experience: Experience, train_info: Any) -> int:
        """One update on ``calc_loss`` of the rollout's own infos (``"rollout_graph"``): the
        ``[T, B]`` unroll ``experience`` (``rollout_info`` removed) and its ``[T, B]``
        ``train_info`` with the graph of ``rollout_step``; returns the steps trained on.
        With several learners, batch draws in ``calc_loss`` draw as the one learner's
        (``World.batch_rows`` of this learner's environments) and others are warned of, as in
        ``update``."""
        alg, world = self.algorithm, self.settings.world
        valid_masks = valid_step_mask(experience.time_step.step_type)
        envs = valid_masks.shape[1]
        with self._rows((envs, 0, 0)), world.batch_rows(
                world.rank_rows(envs), envs * world.size, time_major=True), \
                world.own_draws_check(f"{alg.name}.calc_loss"):
            with self.autocast():
                loss_info = alg.calc_loss(train_info)
            loss_info, params = self.update_with_gradient(loss_info, valid_masks)
            alg.after_update(experience.time_step, train_info)
        self.summarize_train(experience, train_info, loss_info, params)
        return int(valid_masks.numel())

    def summarize_train(self, experience: Experience, train_info: Any, loss_info: LossInfo,
                        params: List[nn.Parameter]) -> None:
        """Parameter and gradient histograms and norms after an update, with
        ``summarize_grads_and_vars``.

        Args:
            experience: the ``[T, B]`` experience of the update.
            train_info: the ``[T, B]`` infos ``calc_loss`` got.
            loss_info: the update's ``LossInfo``.
            params: the parameters that received gradients.
        """
        alg = self.algorithm
        config = self.settings.config
        if (config is None or not config.summaries.summarize_grads_and_vars
                or not summary.should_record_summaries()):
            return
        for name, p in alg.named_parameters():
            summary.histogram(f"summarize_vars/{name}/value", p)
            summary.scalar(f"summarize_vars/{name}/norm", p.detach().norm())
            if p.grad is not None:
                summary.histogram(f"summarize_grads/{name}/value", p.grad)
                summary.scalar(f"summarize_grads/{name}/norm", p.grad.norm())

    def update_with_gradient(self, loss_info: LossInfo,
                             valid_masks: Optional[torch.Tensor] = None,
                             weight: float = 1.0) -> Tuple[LossInfo, List[nn.Parameter]]:
        """One gradient update on ``loss_info`` (ALF's ``update_with_gradient``).

        Each loss (``loss``, or each term of a dict ``loss``) is reduced with
        ``masked_loss_mean`` under ``term_mask``: the step mask ``valid_masks`` fitted to its
        shape (``[T, B]``, ``[T-k, B]``, ``[B]``; scalars unmasked) times its ``LossInfo.mask``
        (a ``ReplacingMask`` replaces it); ``scalar_loss`` is added, the sum times ``weight``.
        A single loss is back-propagated into every due optimizer's parameters, a dict term
        into those of the optimizer of its name only; terms whose optimizer is not due are
        left out. Gradients are clipped per optimizer before its step. Loss terms, gradient
        norms and rates are kept from the last update that produced each and written at
        the next update that records summaries.

        Args:
            loss_info: from ``calc_loss``; with a dict ``loss``, ``mask`` and
                ``scalar_loss`` are dicts keyed like it.
            valid_masks: ``[T, B]`` float or bool, or None (all valid).
            weight: multiplies the loss (a last, partial mini-batch's relative size).

        Returns:
            ``(loss_info with the scalar total loss, parameters that received gradients)``.

        Raises:
            NonFiniteLossError: for a NaN or infinite loss, naming the term; nothing changes.
            UserError: (a ``ValueError``) for a schedule's negative or non-finite rate, and a
                loss term and ``extra`` entry of one summary tag.
            ValueError: for a loss that fits no mask, or a term that names no optimizer.
        """
        alg = self.algorithm
        entries = self._built()
        names = [e.name for e in entries]
        _check_summary_tags(alg.name, loss_info)
        terms, own_masks = self._reduced_loss_terms(loss_info, valid_masks, weight, names)
        total = cast(torch.Tensor, sum(terms.values()))
        # (meta tensors, which the device-placement tests train on, hold no values to check)
        if total.device.type != "meta" and not bool(torch.isfinite(total.detach())):
            _raise_non_finite(alg, self.counters.train_iter_num, loss_info, total)
        stepping = self._backward(terms, entries, names)
        active = summary.is_active()
        params = self._step(stepping, entries, active)
        self.counters.num_updates += 1
        total = total.detach()
        if active:
            # a single loss's own mask (with the loop's) masks its extras too
            self._summarize_loss(total, terms, loss_info, own_masks.get(None, valid_masks))
            if summary.should_record_summaries():
                self._write_pending()
        return loss_info._replace(loss=total), params

    def _backward(self, terms: Dict[Optional[str], torch.Tensor], entries: List[OptimizerEntry],
                  names: List[str]) -> List[int]:
        """Back-propagates each term into its due optimizers' parameters and averages the
        gradients over the learners; returns the indices of the optimizers that step."""
        due = [self.is_due(i) for i in range(len(entries))]
        if None in terms:
            backward = [(terms[None], [i for i in range(len(entries)) if due[i]])]
        else:
            backward = [(term, [names.index(str(key))]) for key, term in terms.items()
                        if due[names.index(str(key))]]
        for e in entries:
            e.optimizer.zero_grad(set_to_none=True)
        scaler = self._grad_scaler
        for n, (term, indices) in enumerate(backward):
            inputs = [p for i in indices for g in entries[i].optimizer.param_groups
                      for p in g["params"]]
            if not inputs or not term.requires_grad:
                continue  # (a term that no parameter reaches gives no gradient)
            (scaler.scale(term) if scaler is not None else term).backward(
                inputs=inputs, retain_graph=n < len(backward) - 1)
        stepping = sorted({i for _, indices in backward for i in indices})
        self.settings.world.average_gradients(
            [p for i in stepping for g in entries[i].optimizer.param_groups for p in g["params"]])
        return stepping

    def _step(self, stepping: List[int], entries: List[OptimizerEntry],
              active: bool) -> List[nn.Parameter]:
        """Clips and steps the optimizers ``stepping`` and their schedules, keeping rates and
        norms for the summaries; returns the parameters that received gradients."""
        alg, scaler, pending = self.algorithm, self._grad_scaler, self._pending
        params: List[nn.Parameter] = []
        for i in stepping:
            entry = entries[i]
            opt = entry.optimizer
            if scaler is not None:
                scaler.unscale_(opt)
            group_params = [p for g in opt.param_groups for p in g["params"]
                            if p.grad is not None]
            params.extend(group_params)
            tag = f"{alg.name}/{entry.tag}"
            norm = _clip_grads(group_params, *entry.clipping, active)
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
            self.counters.count_optimizer_step(i)
            if active:  # the rate this update used
                pending[f"learning_rate/{tag}"] = opt.param_groups[0]["lr"]
                if norm is not None:
                    pending[f"global_grad_norm/{tag}"] = norm
            if entry.schedule is not None:
                entry.schedule.step()
                _check_scheduled_rates(alg.name, i, entry)
        if scaler is not None:
            scaler.update()
        return params

    def _write_pending(self) -> None:
        """Writes the kept loss terms, rates and norms (losses averaged over the learners)."""
        pending = self._pending
        values = {tag: value() if callable(value) else value for tag, value in pending.items()}
        _average_losses(values, self.settings.world)
        for tag, value in values.items():
            summary.scalar(tag, value)
        pending.clear()

    def _reduced_loss_terms(self, loss_info: LossInfo, valid_masks: Optional[torch.Tensor],
                            weight: float, names: List[str]
                            ) -> Tuple[Dict[Optional[str], torch.Tensor],
                                       Dict[Optional[str], Optional[torch.Tensor]]]:
        """``{key: scalar}`` (key None for a single loss): each term reduced, plus its
        ``scalar_loss``, times ``weight``; and the masks of terms with a ``LossInfo.mask``."""
        alg = self.algorithm
        loss, masks, scalar_loss = loss_info.loss, loss_info.mask, loss_info.scalar_loss
        if isinstance(loss, dict):
            unknown = sorted(set(loss) - set(names))
            if unknown:
                raise ValueError(f"{alg.name}: loss terms {unknown} name no optimizer; the "
                                 f"optimizers are {names} (add_optimizer(..., name=...))")
            for what, value in (("mask", masks), ("scalar_loss", scalar_loss)):
                if not is_empty(value) and not (isinstance(value, dict)
                                                and set(value) <= set(loss)):
                    raise ValueError(f"{alg.name}: with a dict of loss terms, "
                                     f"LossInfo.{what} is a dict keyed like it, got "
                                     f"{type(value).__name__}")
            items = [(k, loss[k], (masks or {}).get(k), (scalar_loss or {}).get(k))
                     for k in loss]
        else:
            items = [(None, loss, None if is_empty(masks) else masks,
                      None if is_empty(scalar_loss) else scalar_loss)]
        terms, own_masks = {}, {}
        for key, x, mask, extra in items:
            if isinstance(x, torch.Tensor):
                _check_steps(alg.name, key, x, valid_masks)
                mask_x = term_mask(valid_masks, x, mask)
                if mask is not None:
                    own_masks[key] = mask_x
                if self.counters.num_updates == 0:
                    _warn_if_masked_out(alg.name, key, mask_x)
                x = masked_loss_mean(x, mask_x, self.settings.loss_average)
            elif is_empty(x):
                x = 0.0
            if extra is not None:
                x = x + extra
            if not isinstance(x, torch.Tensor):
                raise ValueError(f"{alg.name}: calc_loss gave no loss tensor"
                                 f"{'' if key is None else f' for term {key!r}'}")
            terms[key] = x * weight
        return terms, own_masks

    def _summarize_loss(self, total: torch.Tensor, terms: Dict[Optional[str], torch.Tensor],
                        loss_info: LossInfo, mask: Optional[torch.Tensor]) -> None:
        """Keeps the total loss, the named and ``extra`` terms for the next recording update; an
        ``extra`` term is reduced only when written."""
        name, pending = self.algorithm.name, self._pending
        pending[f"loss/{name}"] = total
        for key, term in terms.items():
            if key is not None:
                pending[f"loss/{name}/{key}"] = term.detach()
        for path, value in nest.flatten_with_path(loss_info.extra):
            if isinstance(value, torch.Tensor):  # reduced only if it is the one written
                pending[f"loss/{name}/{path}"] = functools.partial(
                    extra_sum if self.settings.world.distributed else extra_mean,
                    value.detach(), mask)

    @contextlib.contextmanager
    def autocast(self):
        """``torch.autocast`` when ``config.run.enable_amp``; float16 on CUDA (with a
        ``GradScaler``), bfloat16 on CPU."""
        config, device = self.settings.config, self.settings.device
        if config is None or not config.run.enable_amp:
            yield
            return
        dtype = torch.float16 if device.type == "cuda" else torch.bfloat16
        if device.type == "cuda" and self._grad_scaler is None:
            self._grad_scaler = torch.amp.GradScaler("cuda")
        with torch.autocast(device.type, dtype=dtype):
            yield


# ---------------------------------------------------------------------- several learners
def _average_losses(values: Dict[str, Any], world: distributed.World) -> None:
    """With several learners, averages the ``loss/...`` summaries over them in place: a loss
    by its mean, an ``extra`` term (``extra_sum``'s ``(sum, count)``) by summed sums over
    summed counts."""
    if not world.distributed:
        return
    tags = [t for t in values if t.startswith("loss/")]
    if not tags:
        return

    def _scalar(x):
        return torch.as_tensor(x, dtype=torch.float64).detach().cpu().reshape(())

    pairs = [values[t] if isinstance(values[t], tuple) else (values[t], None) for t in tags]
    sums = torch.stack([_scalar(s) for s, _ in pairs])
    counts = torch.stack([_scalar(c) if c is not None else torch.tensor(0.0, dtype=torch.float64)
                          for _, c in pairs])
    world.all_reduce_sum([sums, counts])
    size = world.size
    for t, (_, c), s, n in zip(tags, pairs, sums.tolist(), counts.tolist()):
        values[t] = s / size if c is None else s / max(n, 1.0)


# ---------------------------------------------------------------------- checks and helpers
def _check_summary_tags(name: str, loss_info: LossInfo) -> None:
    """Refuses a loss term and an ``extra`` entry of one summary tag (``loss/<name>/<key>``).

    Raises:
        UserError: naming both and the tag.
    """
    if not isinstance(loss_info.loss, dict) or is_empty(loss_info.extra):
        return
    clash = sorted(set(loss_info.loss) & {path for path, _ in
                                          nest.flatten_with_path(loss_info.extra)})
    if clash:
        tag = f"loss/{name}/{clash[0]}"
        raise UserError(f"{name}: the loss term {clash[0]!r} (LossInfo.loss) and the "
                        f"extra {clash[0]!r} (LossInfo.extra) would both write the summary "
                        f"'{tag}'; rename the extra (e.g. '{clash[0]}_loss')")


def _warn_if_masked_out(name: str, key: Optional[str], mask: Optional[torch.Tensor]) -> None:
    """Warns if ``mask`` keeps no entry of a loss at the first update (most likely a setting:
    a per-step loss on sequences of one step)."""
    if mask is None or mask.device.type == "meta" or bool(mask.detach().any()):
        return
    term = "the loss" if key is None else f"loss term {key!r}"
    logger.warning(
        "%s: the mask of %s keeps no entry at the first update, so it trains nothing; "
        "the default step mask leaves out LAST steps and each sequence's last step, so "
        "with mini_batch_length = 1 a per-step loss keeps none: give a ReplacingMask or "
        "sample longer sequences", name, term)


def _check_scheduled_rates(name: str, index: int, entry: OptimizerEntry) -> None:
    """Raises ``UserError`` if optimizer ``index``'s schedule set a negative or non-finite
    rate (torch accepts ``MultiStepLR(gamma=-0.1)``)."""
    for group in entry.optimizer.param_groups:
        lr = float(group["lr"])
        if not math.isfinite(lr) or lr < 0:
            schedule = entry.schedule
            raise UserError(
                f"{name}: the learning-rate schedule {type(schedule).__name__} of optimizer "
                f"{index} set the learning rate to {lr} after "
                f"{getattr(schedule, 'last_epoch', '?')} updates; a rate must be finite and "
                f">= 0: check the schedule's settings (e.g. its gamma)")


def _clip_grads(params: List[nn.Parameter], clip: Optional[float], by_global_norm: bool,
                want_norm: bool) -> Optional[torch.Tensor]:
    """Clips ``params``' gradients; returns their global L2 norm if computed."""
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


def _raise_non_finite(algorithm, train_iter_num: int, loss_info: LossInfo,
                      loss: torch.Tensor) -> None:
    bad = [p for p, v in nest.flatten_with_path(
        {"loss": loss_info.loss, "scalar_loss": loss_info.scalar_loss,
         "extra": loss_info.extra})
        if isinstance(v, torch.Tensor) and not bool(torch.isfinite(v.detach()).all())]
    where = ", ".join(bad) if bad else "the weighted total"
    raise NonFiniteLossError(
        f"{algorithm.name}: the loss is {float(loss.detach())} at training iteration "
        f"{train_iter_num} (non-finite terms: {where}); no update "
        f"was applied. "
        f"Lower the learning rate, clip gradients, or restart from the last good checkpoint.")


def make_learner(algorithm, config=None, world: Optional[distributed.World] = None) -> Learner:
    """The ``Learner`` of ``algorithm`` from what it declares (``run_args``: its
    ``OptimizerSet``, device, ``loss_average`` and config); ``build_training`` makes the loop's
    this way.

    Args:
        algorithm: the root ``Algorithm``.
        config: the ``TrainerConfig``; the algorithm's if None.
        world: the learners of the run; one learner if None.
    """
    args = run_args(algorithm)
    return Learner(algorithm, args.optimizers, LearnerSettings(
        args.config if config is None else config, args.device, args.loss_average,
        distributed.World() if world is None else world))
