"""Algorithm: the base of every algorithm: specs, optimizers, gradient updates, training loops.

The template-method pattern of ALF's ``Algorithm``: the base class owns the loops
(``train_from_unroll``, ``train_from_replay_buffer``, ``update_with_gradient``); a subclass
writes ``rollout_step``, ``train_step`` and ``calc_loss`` and may override the hooks
``preprocess_experience``, ``after_update`` and ``after_train_iter``.

Shapes: ``*_step`` functions see ``[B, ...]`` inputs; ``calc_loss`` sees ``[T, B, ...]``
(time-major) information; the replay buffer hands out batch-major ``[B, T, ...]`` data, which
``train_from_replay_buffer`` transposes.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch import nn

from rlf import nest
from rlf.data_structures import AlgStep, Experience, LossInfo, StepType
from rlf.utils import summary
from rlf.utils.common import reset_state_if_necessary, zeros_from_spec

__all__ = ["Algorithm", "NonFiniteLossError"]


class NonFiniteLossError(FloatingPointError):
    """A loss (or one of its terms) became NaN or infinite during training."""


def _is_empty(x: Any) -> bool:
    return isinstance(x, tuple) and len(x) == 0


class Algorithm(nn.Module):
    """Base class of algorithms (ALF's ``Algorithm``).

    Args:
        train_state_spec: nest of ``TensorSpec`` of ``train_step``'s recurrent state (one
            sample, no batch dim); ``()`` for none.
        rollout_state_spec: state spec of ``rollout_step``; ``train_state_spec`` if None.
        predict_state_spec: state spec of ``predict_step``; ``rollout_state_spec`` if None.
        is_on_policy: True: train on each unroll directly (``train_from_unroll``); False:
            through the replay buffer; None: the subclass decides (``on_policy``).
        optimizer: a ``torch.optim.Optimizer`` class or factory called as
            ``optimizer(params)`` (e.g. ``functools.partial(torch.optim.Adam, lr=1e-3)``, or in
            gin ``@torch.optim.Adam`` with ``torch.optim.Adam.lr = 1e-3``), or an optimizer
            instance already holding this algorithm's parameters. It optimises every
            parameter of this algorithm that a sub-algorithm's own optimizer does not.
        config: the ``TrainerConfig`` of the algorithm that runs the training loop.
        checkpoint: ``"path"`` or ``"prefix@path"``: initial parameters from an rlf checkpoint
            file, optionally only those under ``prefix.`` (loaded by
            ``load_initial_checkpoint``, which the trainer calls).
        debug_summaries: write extra summaries.
        name: used in summaries and messages.
        gradient_clipping: clip gradients to this global L2 norm (per optimizer), or by
            value if ``clip_by_global_norm`` is False; None for no clipping.
        clip_by_global_norm: see ``gradient_clipping``.
        lr_scheduler: a ``torch.optim.lr_scheduler.LRScheduler`` class or factory called as
            ``lr_scheduler(optimizer)`` for this algorithm's optimizer (e.g. in gin
            ``@torch.optim.lr_scheduler.LinearLR`` with ``...LinearLR.start_factor = 0.1`` and
            ``...LinearLR.total_iters = 1000`` for a warm-up), or None for a constant rate.
            It is stepped once per gradient update (not per epoch, as torch's examples do;
            not for updates that AMP's GradScaler skips), and its state is checkpointed
            with the optimizer's.
    """

    def __init__(self,
                 train_state_spec: Any = (),
                 rollout_state_spec: Any = None,
                 predict_state_spec: Any = None,
                 is_on_policy: Optional[bool] = None,
                 optimizer: Any = None,
                 config: Any = None,
                 checkpoint: Optional[str] = None,
                 debug_summaries: bool = False,
                 name: str = "Algorithm",
                 gradient_clipping: Optional[float] = None,
                 clip_by_global_norm: bool = True,
                 lr_scheduler: Any = None):
        super().__init__()
        self._name = name
        self._train_state_spec = train_state_spec
        self._rollout_state_spec = (train_state_spec if rollout_state_spec is None
                                    else rollout_state_spec)
        self._predict_state_spec = (self._rollout_state_spec if predict_state_spec is None
                                    else predict_state_spec)
        self._is_on_policy = is_on_policy
        self._optimizer_arg = optimizer
        self._optimizers: Optional[List[torch.optim.Optimizer]] = None
        self._lr_scheduler_arg = lr_scheduler
        # one entry per optimizer (None: constant rate), built with ``optimizers``
        self._lr_schedulers: List[Any] = []
        self._config = config
        self._checkpoint = checkpoint
        self._debug_summaries = debug_summaries
        self._gradient_clipping = gradient_clipping
        self._clip_by_global_norm = clip_by_global_norm
        self._device = torch.device(getattr(config, "device", None) or "cpu")
        self._grad_scaler = None
        self._train_iter_num = 0  # for messages: the iteration a loss went non-finite in

    # ------------------------------------------------------------------ properties
    @property
    def name(self) -> str:
        """The algorithm's name."""
        return self._name

    @property
    def on_policy(self) -> Optional[bool]:
        """Whether the algorithm trains on each unroll directly."""
        return self._is_on_policy

    @property
    def train_state_spec(self) -> Any:
        """Spec of ``train_step``'s state."""
        return self._train_state_spec

    @property
    def rollout_state_spec(self) -> Any:
        """Spec of ``rollout_step``'s state."""
        return self._rollout_state_spec

    @property
    def predict_state_spec(self) -> Any:
        """Spec of ``predict_step``'s state."""
        return self._predict_state_spec

    @property
    def config(self):
        """The ``TrainerConfig`` (None for algorithms that do not run the loop)."""
        return self._config

    def get_initial_predict_state(self, batch_size: int) -> Any:
        """Zeros of ``predict_state_spec`` with outer dim ``[batch_size]``."""
        return zeros_from_spec(self._predict_state_spec, batch_size, self._device)

    def get_initial_rollout_state(self, batch_size: int) -> Any:
        """Zeros of ``rollout_state_spec`` with outer dim ``[batch_size]``."""
        return zeros_from_spec(self._rollout_state_spec, batch_size, self._device)

    def get_initial_train_state(self, batch_size: int) -> Any:
        """Zeros of ``train_state_spec`` with outer dim ``[batch_size]``."""
        return zeros_from_spec(self._train_state_spec, batch_size, self._device)

    # ------------------------------------------------------------------ steps (subclasses)
    def predict_step(self, inputs: Any, state: Any) -> AlgStep:
        """One step of acting for evaluation: ``rollout_step`` without its info.

        Args:
            inputs: ``[B, ...]`` nest (a ``TimeStep`` for RL algorithms).
            state: nest matching ``predict_state_spec``.
        """
        step = self.rollout_step(inputs, state)
        return AlgStep(output=step.output, state=step.state, info=())

    def rollout_step(self, inputs: Any, state: Any) -> AlgStep:
        """One step of acting while collecting experience.

        Args:
            inputs: ``[B, ...]`` nest (a ``TimeStep``).
            state: nest matching ``rollout_state_spec``, already reset where a new episode
                starts.

        Returns:
            ``AlgStep(output=action [B, ...], state=next state, info=rollout_info)``; the
            info nest is stored in ``Experience.rollout_info`` (for off-policy training keep
            it to tensors, e.g. the behaviour policy's logits).
        """
        raise NotImplementedError(f"{type(self).__name__} must implement rollout_step")

    def train_step(self, inputs: Any, state: Any, rollout_info: Any) -> AlgStep:
        """One step of recomputation on replayed experience (off-policy training).

        Args:
            inputs: ``[B, ...]`` nest (the ``TimeStep`` of one time index).
            state: nest matching ``train_state_spec``.
            rollout_info: the ``[B, ...]`` ``rollout_info`` stored with the step.

        Returns:
            ``AlgStep`` whose ``info`` is stacked over time and passed to ``calc_loss``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement train_step to train "
                                  f"off-policy")

    def calc_loss(self, info: Any) -> LossInfo:
        """The loss of ``[T, B]`` training information.

        Args:
            info: the ``rollout_info`` of an unroll (on-policy) or the stacked ``train_step``
                infos (off-policy), leaves ``[T, B, ...]``.

        Returns:
            ``LossInfo`` with ``loss`` ``[T, B]`` (masked and averaged by
            ``update_with_gradient``) and ``extra`` terms for summaries.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement calc_loss")

    # ------------------------------------------------------------------ hooks
    def preprocess_experience(self, root_inputs: Any, rollout_info: Any, batch_info: Any
                              ) -> Tuple[Any, Any]:
        """Hook on replayed ``[B, T]`` experience before training; returns
        ``(root_inputs, rollout_info)``. The default returns them unchanged."""
        return root_inputs, rollout_info

    def mix_experience(self, experience: Experience, batch_info: Any) -> Tuple[Experience, Any]:
        """Hook on each batch-major ``[N, T]`` mini-batch of ``train_from_replay_buffer``
        before its update: may add sequences from elsewhere (IMPALA's experience replay).
        Returns ``(experience, batch_info)``; the default returns them unchanged."""
        return experience, batch_info

    def after_update(self, root_inputs: Any, info: Any) -> None:
        """Called after every gradient update (e.g. to update target networks)."""

    def after_train_iter(self, root_inputs: Any, rollout_info: Any = None) -> None:
        """Called once per training iteration, after training."""

    # ------------------------------------------------------------------ optimizers
    def _own_parameters(self) -> List[nn.Parameter]:
        """Parameters of this algorithm not owned by a sub-algorithm with its own optimizer."""
        excluded = set()
        for module in self.modules():
            if module is not self and isinstance(module, Algorithm) and (
                    module._optimizer_arg is not None):
                excluded.update(id(p) for p in module.parameters())
        return [p for p in self.parameters() if id(p) not in excluded and p.requires_grad]

    def _create_optimizers(self) -> List[torch.optim.Optimizer]:
        optimizers, schedulers = [], []
        for module in self.modules():
            if not isinstance(module, Algorithm):
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

    # ------------------------------------------------------------------ training loops
    def train_from_unroll(self, experience: Experience, train_info: Any) -> int:
        """Trains on one on-policy unroll.

        Args:
            experience: ``[T, B]`` ``Experience`` (``rollout_info`` removed).
            train_info: the unroll's ``[T, B]`` ``rollout_info`` (still holding the graph of
                ``rollout_step``).

        Returns:
            The number of steps trained on, ``T * B``.
        """
        valid_masks = (experience.time_step.step_type != StepType.LAST).float()
        with self._autocast():
            loss_info = self.calc_loss(train_info)
        loss_info, params = self.update_with_gradient(loss_info, valid_masks)
        self.after_update(experience.time_step, train_info)
        self.summarize_train(experience, train_info, loss_info, params)
        return int(valid_masks.numel())

    def train_from_replay_buffer(self, update_global_counter: bool = False) -> int:
        """Trains on experience from the replay buffer (ALF's semantics).

        With ``whole_replay_buffer_training`` every held step is used
        ``num_updates_per_train_iter`` times, reshuffled into mini-batches of
        ``mini_batch_size`` sequences of ``mini_batch_length`` steps each pass; otherwise
        ``mini_batch_size * num_updates_per_train_iter`` sequences are sampled and each is
        used once.

        Args:
            update_global_counter: advance the global counter per mini-batch if
                ``config.update_counter_every_mini_batch``.

        Returns:
            The number of steps trained on (with repetitions); 0 if the buffer holds fewer
            than ``config.initial_collect_steps`` steps.
        """
        config = self._config
        buffer, offline = self.replay_buffer, self.offline_replay_buffer
        online_ready = buffer is not None and buffer.total_size >= max(
            config.initial_collect_steps, 1)
        if not online_ready and offline is None:
            return 0
        need_sampling = not online_ready or not config.whole_replay_buffer_training
        if need_sampling and (config.mini_batch_size is None
                              or config.mini_batch_length is None):
            raise ValueError("TrainerConfig.mini_batch_size and mini_batch_length must be set "
                             "for training from sampled (or offline) batches")
        if not online_ready:  # offline only: no environment data (yet)
            experience, _ = offline.get_batch(
                config.mini_batch_size * config.num_updates_per_train_iter,
                config.mini_batch_length)
            batch_info, num_updates = None, 1
        elif config.whole_replay_buffer_training:
            experience = buffer.gather_all(ignore_earliest_frames=True)  # [E, L]
            batch_info = None
            length = nest.flatten(experience)[0].shape[1]
            seq = config.mini_batch_length or length
            if seq > length:
                return 0
            usable = length - length % seq  # drop the oldest steps that fill no sequence

            def _split(x):
                x = x[:, length - usable:]
                return x.reshape(x.shape[0] * (usable // seq), seq, *x.shape[2:])

            experience = nest.map_structure(_split, experience)
            num_updates = config.num_updates_per_train_iter
        else:
            experience, batch_info = buffer.get_batch(
                config.mini_batch_size * config.num_updates_per_train_iter,
                config.mini_batch_length)
            num_updates = 1
        batch_size = nest.flatten(experience)[0].shape[0]
        mini_batch_size = config.mini_batch_size or batch_size
        steps = 0
        for _ in range(num_updates):
            order = (torch.randperm(batch_size) if config.whole_replay_buffer_training
                     and mini_batch_size < batch_size else None)
            for b in range(0, batch_size, mini_batch_size):
                # In order, a slice (a view): the buffer's batch is already a copy, and
                # indexing would copy it again (~16 ms for a whole [16, 20] Pong batch).
                idx = (slice(b, b + mini_batch_size) if order is None
                       else order[b:b + mini_batch_size])
                mb = nest.map_structure(lambda x: x[idx], experience)
                mb_info = (None if batch_info is None
                           else nest.map_structure(lambda x: x[idx], batch_info))
                if online_ready and offline is not None:
                    mb, mb_info = self._mix_offline(mb, offline)
                mb, mb_info = self.mix_experience(mb, mb_info)
                if update_global_counter and config.update_counter_every_mini_batch:
                    summary.increment_global_counter()
                size = min(b + mini_batch_size, batch_size) - b
                steps += self._update(mb, mb_info, weight=size / mini_batch_size)
        if config.clear_replay_buffer and not config.whole_replay_buffer_training:
            buffer.clear()
        return steps

    def _update(self, experience: Experience, batch_info, weight: float) -> int:
        """One gradient update on a batch-major ``[B, T]`` mini-batch."""
        time_step, rollout_info = self.preprocess_experience(
            experience.time_step, experience.rollout_info, batch_info)
        experience = experience._replace(time_step=time_step, rollout_info=rollout_info)
        experience = nest.utils.convert_device(
            nest.map_structure(lambda x: x.transpose(0, 1), experience), self._device)
        with self._autocast():
            train_info = self._collect_train_info(experience)
            loss_info = self.calc_loss(train_info)
        valid_masks = (experience.time_step.step_type != StepType.LAST).float()
        if batch_info is not None and self._config.priority_replay:
            loss_info = loss_info._replace(
                loss=loss_info.loss * batch_info.importance_weights.to(self._device)[None])
        loss_info, params = self.update_with_gradient(loss_info, valid_masks, weight)
        self.after_update(experience.time_step, train_info)
        if batch_info is not None and not _is_empty(loss_info.priority):
            self.replay_buffer.update_priority(batch_info.env_ids, batch_info.positions,
                                               loss_info.priority.detach().cpu())
        self.summarize_train(experience, train_info, loss_info, params)
        return int(valid_masks.numel())

    def _collect_train_info(self, experience: Experience) -> Any:
        """``train_step`` over ``[T, B]`` experience; returns the ``[T, B]`` infos."""
        time_step, rollout_info = experience.time_step, experience.rollout_info
        t_len, batch = time_step.step_type.shape[:2]
        independent = self._config.temporally_independent_train_step
        if independent is None:
            independent = not nest.flatten(self._train_state_spec)
        if independent:
            # Flattened batch-major: replayed experience is a [T, B] view of [B, T] storage,
            # so this reshape is a view where a time-major one copies every field (the
            # frames: ~1.5 ms per 336 Pong observations).
            flat = nest.map_structure(
                lambda x: x.transpose(0, 1).reshape(batch * t_len, *x.shape[2:]),
                (time_step, rollout_info))
            step = self.train_step(flat[0], (), flat[1])
            return nest.map_structure(
                lambda x: x.reshape(batch, t_len, *x.shape[1:]).transpose(0, 1), step.info)
        if self._config.use_rollout_state:
            state = nest.map_structure(lambda x: x[0], experience.state)
        else:
            state = self.get_initial_train_state(batch)
        initial_state = self.get_initial_train_state(batch)
        infos = []
        for t in range(t_len):
            inputs = nest.map_structure(lambda x: x[t], time_step)
            state = reset_state_if_necessary(state, initial_state, inputs.is_first())
            step = self.train_step(inputs, state, nest.map_structure(lambda x: x[t],
                                                                     rollout_info))
            infos.append(step.info)
            state = step.state
        return nest.utils.stack_nests(infos)

    def _mix_offline(self, experience: Experience, offline) -> Tuple[Experience, Any]:
        """Hybrid training: appends ``round(N f / (1 - f))`` offline sequences (``f`` =
        ``config.offline_fraction``) to a mini-batch of ``N`` online ones, keeping the fields
        both have (the offline data spec's)."""
        n, length = nest.flatten(experience)[0].shape[:2]
        f = self._config.offline_fraction
        k = int(round(n * f / (1.0 - f)))
        if k == 0:
            return experience, None
        offline_batch, _ = offline.get_batch(k, length)
        online = nest.pack_sequence_as(offline.data_spec, [
            nest.get_field(experience, p) for p, _ in nest.flatten_with_path(offline.data_spec)])
        return nest.utils.cat_nests([online, offline_batch]), None

    @property
    def offline_replay_buffer(self):
        """The buffer of offline data (``load_offline_replay_buffer``), or None."""
        return self.__dict__.get("_offline_replay_buffer")

    @property
    def replay_buffer(self):
        """The replay buffer, or None (on-policy algorithms, or before the first unroll)."""
        return self.__dict__.get("_replay_buffer")

    # ------------------------------------------------------------------ summaries
    def summarize_train(self, experience: Experience, train_info: Any, loss_info: LossInfo,
                        params: List[nn.Parameter]) -> None:
        """Summaries after an update: parameter and gradient histograms and norms when
        ``config.summarize_grads_and_vars``. Loss terms, gradient norms and learning rates
        are written by ``update_with_gradient``."""
        if (self._config is None or not self._config.summarize_grads_and_vars
                or not summary.should_record_summaries()):
            return
        for name, p in self.named_parameters():
            summary.histogram(f"summarize_vars/{name}/value", p)
            summary.scalar(f"summarize_vars/{name}/norm", p.detach().norm())
            if p.grad is not None:
                summary.histogram(f"summarize_grads/{name}/value", p.grad)
                summary.scalar(f"summarize_grads/{name}/norm", p.grad.norm())

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """The module's state plus, at the root, ``"_optimizers"``: the list of optimizer
        states (in ``optimizers`` order), and ``"_lr_schedulers"`` when any optimizer has
        one (None for those without)."""
        state = super().state_dict(*args, destination=destination, prefix=prefix,
                                   keep_vars=keep_vars)
        if prefix == "" and not args:
            state["_optimizers"] = [opt.state_dict() for opt in self.optimizers]
            if any(s is not None for s in self._lr_schedulers):
                state["_lr_schedulers"] = [None if s is None else s.state_dict()
                                           for s in self._lr_schedulers]
        return state

    def load_state_dict(self, state_dict: Dict[str, Any], strict: bool = True, assign=False):
        """Restores ``state_dict()`` output, checking everything first.

        Raises:
            ValueError: naming missing and unexpected keys, parameters whose shape or dtype
                differs (expected vs found), and optimizers that do not fit; nothing is
                changed then.
        """
        state_dict = dict(state_dict)
        opt_states = state_dict.pop("_optimizers", None)
        sched_states = state_dict.pop("_lr_schedulers", None)
        own = super().state_dict()
        own.pop("_optimizers", None)
        problems = []
        missing = sorted(k for k in own if k not in state_dict)
        unexpected = sorted(k for k in state_dict if k not in own)
        if missing and strict:
            problems.append(f"missing {missing[:10]}")
        if unexpected and strict:
            problems.append(f"unexpected {unexpected[:10]}")
        for k, v in own.items():
            found = state_dict.get(k)
            if isinstance(v, torch.Tensor) and isinstance(found, torch.Tensor) and (
                    v.shape != found.shape or v.dtype != found.dtype):
                problems.append(f"'{k}' expected {tuple(v.shape)} {v.dtype}, found "
                                f"{tuple(found.shape)} {found.dtype}")
        optimizers = self.optimizers if opt_states is not None else []
        if opt_states is not None:
            if len(opt_states) != len(optimizers):
                problems.append(f"{len(opt_states)} optimizer states for {len(optimizers)} "
                                f"optimizers")
            else:
                for i, (opt, st) in enumerate(zip(optimizers, opt_states)):
                    sizes = [len(g["params"]) for g in opt.param_groups]
                    found = [len(g["params"]) for g in st.get("param_groups", [])]
                    if sizes != found:
                        problems.append(f"optimizer {i} has parameter groups of sizes {sizes}, "
                                        f"the checkpoint {found}")
        if sched_states is not None and opt_states is not None:
            mine = [s is not None for s in self._lr_schedulers]
            theirs = [s is not None for s in sched_states]
            if mine != theirs:
                problems.append(f"learning-rate schedulers per optimizer: this algorithm "
                                f"{mine}, the checkpoint {theirs}")
        if problems:
            raise ValueError(f"{self._name}: the checkpoint does not fit this algorithm: "
                             + "; ".join(problems) + " (nothing was loaded)")
        result = super().load_state_dict(state_dict, strict=strict, assign=assign)
        if opt_states is not None:
            for opt, st in zip(optimizers, opt_states):
                opt.load_state_dict(st)
            # a checkpoint without schedules leaves this algorithm's schedules at their start
            for sched, st in zip(self._lr_schedulers, sched_states or []):
                if sched is not None:
                    sched.load_state_dict(st)
        return result

    def load_initial_checkpoint(self) -> None:
        """Loads the parameters named by the ``checkpoint`` argument (``"prefix@path"``).

        Raises:
            FileNotFoundError, ValueError: for a missing or unreadable file, or no matching
                parameters.
        """
        if not self._checkpoint:
            return
        from rlf.utils.checkpoint import load_checkpoint_file
        prefix, _, path = self._checkpoint.rpartition("@")
        state = load_checkpoint_file(Path(path))
        state = state.get("algorithm", state)
        if prefix:
            state = {k[len(prefix) + 1:]: v for k, v in state.items()
                     if k.startswith(prefix + ".")}
        state.pop("_optimizers", None)
        state.pop("_lr_schedulers", None)
        if not state:
            raise ValueError(f"{self._name}: checkpoint {path} has no parameters under "
                             f"prefix '{prefix}'")
        self.load_state_dict(state, strict=False)

    def get_extra_state(self) -> Dict[str, Any]:
        """What ``state_dict`` saves beside tensors (``nn.Module`` hook): the training
        iteration count. Subclasses extend the dict (call ``super()``)."""
        return {"train_iter_num": self._train_iter_num}

    def set_extra_state(self, state: Dict[str, Any]) -> None:
        """Restores ``get_extra_state()`` output; keys missing in older checkpoints get their
        defaults."""
        self._train_iter_num = int(state.get("train_iter_num", 0))

