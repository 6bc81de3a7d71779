"""Algorithm: the base of every algorithm: specs, states, the step and hook contract.

A subclass writes ``rollout_step``, ``train_step`` and ``calc_loss`` and may override the hooks
``preprocess_experience``, ``mix_experience``, ``after_update`` and ``after_train_iter``; the
base class owns the optimizers and the gradient update (``optimization.py``) and the checkpoint
state (``algorithm_state.py``). How experience reaches ``train_step`` is the data path's
(``data_paths.py``), and the update on each mini-batch the learner's (``learner.py``).

Shapes: ``*_step`` functions see ``[B, ...]`` inputs (``train_step`` ``[T*B, ...]`` when the
steps are temporally independent); ``calc_loss`` sees ``[T, B, ...]`` (time-major) infos; the
replay buffer hands out batch-major ``[B, T, ...]`` data, which the learner transposes.
"""

from __future__ import annotations

from typing import Any, List, Optional, Tuple

import torch
from torch import nn

from rlf.algorithms.algorithm_state import AlgorithmStateMixin
from rlf.algorithms.counters import Counters
from rlf.algorithms.reserved import check_reserved_name, check_subclass_members
from rlf.algorithms.optimization import (LOSS_AVERAGES, NonFiniteLossError,
                                         OptimizationMixin, check_optimizer_args)
from rlf.data_structures import AlgStep, Experience, LossInfo
from rlf.utils.common import zeros_from_spec

__all__ = ["Algorithm", "NonFiniteLossError"]


class Algorithm(OptimizationMixin, AlgorithmStateMixin, nn.Module):
    """Base class of algorithms (ALF's ``Algorithm``).

    Args:
        train_state_spec: nest of ``TensorSpec`` of ``train_step``'s recurrent state (one
            sample, no batch dim); ``()`` for none.
        rollout_state_spec: state spec of ``rollout_step``; ``train_state_spec`` if None.
        predict_state_spec: state spec of ``predict_step``; ``rollout_state_spec`` if None.
        is_on_policy: True: train on each unroll directly; False: through the replay buffer
            (``rlf.algorithms.data_paths``); None: the subclass decides (``on_policy``).
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
        loss_average: how ``update_with_gradient`` averages a masked loss
            (``masked_loss_mean``): ``"all"`` (ALF's rule: over all entries, so the gradient
            scale does not depend on how many the mask removes) or ``"valid"`` (over the
            entries the mask keeps).

    Raises:
        ValueError: for an ``optimizer`` or ``lr_scheduler`` that cannot be called, a
            ``gradient_clipping`` <= 0, or another ``loss_average``.
        UserError: (a ``ValueError``) for a subclass that defines or assigns a name the base
            classes reserve (``rlf.algorithms.reserved.RESERVED_NAMES``: properties and
            counters such as ``num_updates``), naming it and the version that reserved it.
    """

    _rlf_base_class = True  # defines the reserved names (``reserved.py``)

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
                 lr_scheduler: Any = None,
                 loss_average: str = "all"):
        check_subclass_members(type(self), Algorithm)
        super().__init__()
        check_optimizer_args(name, optimizer, lr_scheduler, gradient_clipping)
        if loss_average not in LOSS_AVERAGES:
            raise ValueError(f"{name}: loss_average must be one of {LOSS_AVERAGES}, got "
                             f"{loss_average!r}")
        self._loss_average = loss_average
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
        self._counters = Counters()

    # ------------------------------------------------------------------ reserved names
    def __setattr__(self, name: str, value: Any) -> None:
        """``nn.Module``'s, refusing a name the base classes reserve (``reserved.py``)."""
        check_reserved_name(type(self).__name__, name, "the attribute")
        super().__setattr__(name, value)

    def register_buffer(self, name: str, tensor: Optional[torch.Tensor],
                        persistent: bool = True) -> None:
        """``nn.Module``'s, refusing a name the base classes reserve (``reserved.py``)."""
        check_reserved_name(type(self).__name__, name, "the buffer")
        super().register_buffer(name, tensor, persistent)

    def register_parameter(self, name: str, param: Optional[nn.Parameter]) -> None:
        """``nn.Module``'s, refusing a name the base classes reserve (``reserved.py``)."""
        check_reserved_name(type(self).__name__, name, "the parameter")
        super().register_parameter(name, param)

    def add_module(self, name: str, module: Optional[nn.Module]) -> None:
        """``nn.Module``'s, refusing a name the base classes reserve (``reserved.py``)."""
        check_reserved_name(type(self).__name__, name, "the module")
        super().add_module(name, module)

    # ------------------------------------------------------------------ properties
    @property
    def name(self) -> str:
        """The algorithm's name."""
        return self._name

    @property
    def train_iter_num(self) -> int:
        """Training iterations begun so far (``RLAlgorithm.train_iter`` calls), checkpointed;
        on an actor, the learner's count as of the parameters it acts with."""
        return self._counters.train_iter_num

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

    def train_state_from_rollout_state(self, state: Any) -> Any:
        """The ``train_step`` state a stored sequence starts from, given the rollout state
        stored with its first step (``TrainerConfig.use_rollout_state``): that state itself
        by default. Override it where the two specs differ (R2D2: the online and the target
        network both start from the actor's state).

        Args:
            state: ``[B, ...]`` nest matching ``rollout_state_spec``.

        Returns:
            ``[B, ...]`` nest matching ``train_state_spec``.
        """
        return state

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
        """Hook on each batch-major ``[N, T]`` mini-batch of the data path
        before its update: may add sequences from elsewhere (IMPALA's experience replay).
        The mini-batch is on the algorithm's device; sequences added from CPU storage must
        be moved there (``nest.utils.cat_nests`` concatenates on the first nest's device).
        Returns ``(experience, batch_info)``; the default returns them unchanged."""
        return experience, batch_info

    def after_update(self, root_inputs: Any, info: Any) -> None:
        """Called after every gradient update (e.g. to update target networks).

        Args:
            root_inputs: the ``[T, B]`` ``TimeStep`` the update trained on (the mini-batch,
                time-major, on the algorithm's device).
            info: the ``[T, B]`` infos ``calc_loss`` got.
        """

    def after_train_iter(self, root_inputs: Any, rollout_info: Any = None) -> None:
        """Called once per training iteration, after training.

        Args:
            root_inputs: the ``[T, B]`` ``TimeStep`` of the iteration's unroll (time-major, on
                CPU), or None for an iteration without one (purely offline training).
            rollout_info: the unroll's ``[T, B]`` ``rollout_info`` (with the graph of
                ``rollout_step`` when training used it), or None.
        """
