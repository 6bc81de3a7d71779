"""Algorithm: the base of every algorithm: specs, states, the step and hook contract.

A subclass writes ``rollout_step``, ``train_step`` and ``calc_loss`` and may override the hooks;
it declares its optimizers (``add_optimizer``), and the ``Learner`` that ``build_training``
makes steps them and counts. Shapes: ``*_step`` see
``[B, ...]`` inputs (``train_step`` ``[T*B, ...]`` when temporally independent), ``calc_loss``
``[T, B, ...]`` infos; the replay buffer hands out batch-major ``[B, T, ...]`` data.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence, Tuple

import torch
from torch import nn

from rlf.algorithms.algorithm_state import load_optimizer_states, state_problems
from rlf.algorithms.removed import check_removed_hooks, removed_member_error
from rlf.algorithms.reserved import (check_reserved_name, check_subclass_members,
                                      set_framework_state)
from rlf.algorithms.loops import loop_of
from rlf.algorithms.mixing import ExperienceSource
from rlf.algorithms.optimizer_set import OptimizerPlan, OptimizerSet
from rlf.algorithms.optimization import LOSS_AVERAGES, NonFiniteLossError, check_optimizer_args
from rlf.algorithms.seams import RunArgs, run_args
from rlf.data_structures import AlgStep, LossInfo
from rlf.utils.deprecation import warn_deprecated
from rlf.utils.errors import UserError
from rlf.utils.common import zeros_from_spec

__all__ = ["Algorithm", "DEPRECATED_MEMBERS", "NonFiniteLossError", "RunArgs", "run_args"]


def _learner(algorithm: Any) -> Any:
    """The deprecated ``algorithm.learner``: the learner of the loop training it, else one
    made at the first read and kept."""
    loop = loop_of(algorithm)
    if loop is not None:
        return loop.learner
    own = algorithm._rlf_own_learner
    if own is None:
        from rlf.algorithms.learner import make_learner  # (it does not import this module)
        own = make_learner(algorithm)
        set_framework_state(algorithm, _rlf_own_learner=own)
    return own


#: The members rlf 0.4 deprecated (removed in 0.5): name -> (what replaces it, how the alias
#: answers). They are not in the contract: what trains an algorithm holds them, not it.
DEPRECATED_MEMBERS: Dict[str, Tuple[str, Callable[[Any], Any]]] = {
    "learner": ("the Learner of the loop that trains it (loop.learner, loop = "
                "build_training(alg, ...)), or rlf.algorithms.make_learner(alg) for updates by "
                "hand", _learner),
    "run_args": ("rlf.algorithms.run_args(alg)", run_args),
    "training_loop": ("the loop build_training returns (rlf.algorithms.loop_of(alg) finds the "
                      "one still held)",
                      lambda alg: loop_of(alg) or vars(alg).get("_rlf_own_loop")),
}


def _base_setter(cls: type, name: str) -> bool:
    """Whether ``name`` is a property with a setter of one of rlf's base classes."""
    for klass in cls.__mro__:
        member = vars(klass).get(name)
        if member is not None:
            return (isinstance(member, property) and member.fset is not None
                    and bool(vars(klass).get("_rlf_base_class")))
    return False


class Algorithm(nn.Module):
    """Base class of algorithms (ALF's ``Algorithm``).

    Args:
        train_state_spec: nest of ``TensorSpec`` of ``train_step``'s state (``()``: none).
        rollout_state_spec: state spec of ``rollout_step``; ``train_state_spec`` if None.
        predict_state_spec: state spec of ``predict_step``; ``rollout_state_spec`` if None.
        is_on_policy: train on each unroll (True) or through the replay buffer (False).
        optimizer: a ``torch.optim.Optimizer`` class or factory called as
            ``optimizer(params)`` (gin: ``@torch.optim.Adam``), or an instance holding this
            algorithm's parameters; it optimises every parameter no other optimizer claims.
        config: the ``TrainerConfig`` (root algorithm only).
        checkpoint: ``"path"`` or ``"prefix@path"``: initial parameters from an rlf checkpoint
            file, optionally only those under ``prefix.`` (``load_initial_checkpoint``).
        debug_summaries: write extra summaries.
        name: used in summaries and messages.
        gradient_clipping: clip gradients to this global L2 norm (per optimizer), or by
            value if ``clip_by_global_norm`` is False; None for no clipping.
        clip_by_global_norm: see ``gradient_clipping``.
        lr_scheduler: a ``torch.optim.lr_scheduler.LRScheduler`` class or factory called as
            ``lr_scheduler(optimizer)`` (gin: ``@torch.optim.lr_scheduler.LinearLR``), or None
            for a constant rate; stepped once per update the optimizer stepped in (not per
            epoch), checkpointed with the optimizer.
        loss_average: ``masked_loss_mean``'s rule: ``"all"`` (ALF's: over all entries, so the
            gradient scale does not depend on the mask) or ``"valid"`` (the kept entries).

    Raises:
        ValueError: for an ``optimizer`` or ``lr_scheduler`` that cannot be called, a
            ``gradient_clipping`` <= 0, or another ``loss_average``.
        UserError: (a ``ValueError``) for a subclass that defines or assigns a name the base
            classes reserve (``reserved.RESERVED_NAMES``), or defines a hook of rlf 0.1 that
            is no longer called (``removed.REMOVED_HOOKS``), naming the replacement.
    """

    _rlf_base_class = True  # defines the reserved names (``reserved.py``)
    # The base class's state (``reserved.set_framework_state``).
    _rlf_loss_average: str
    _rlf_name: str
    _rlf_train_state_spec: Any
    _rlf_rollout_state_spec: Any
    _rlf_predict_state_spec: Any
    _rlf_is_on_policy: Optional[bool]
    _rlf_optimizer_arg: Any
    _rlf_lr_scheduler_arg: Any
    _rlf_added_optimizers: List[Dict[str, Any]]
    _rlf_config: Any
    _rlf_checkpoint: Optional[str]
    _rlf_debug_summaries: bool
    _rlf_gradient_clipping: Optional[float]
    _rlf_clip_by_global_norm: bool
    _rlf_device: torch.device
    _rlf_optimizers: OptimizerSet
    _rlf_own_learner: Any

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
        check_removed_hooks(type(self))
        super().__init__()
        check_optimizer_args(name, optimizer, lr_scheduler, gradient_clipping)
        if loss_average not in LOSS_AVERAGES:
            raise ValueError(f"{name}: loss_average must be one of {LOSS_AVERAGES}, got "
                             f"{loss_average!r}")
        rollout_state_spec = train_state_spec if rollout_state_spec is None else rollout_state_spec
        set_framework_state(
            self, _rlf_loss_average=loss_average, _rlf_name=name,
            _rlf_train_state_spec=train_state_spec, _rlf_rollout_state_spec=rollout_state_spec,
            _rlf_predict_state_spec=(rollout_state_spec if predict_state_spec is None
                                     else predict_state_spec),
            _rlf_is_on_policy=is_on_policy, _rlf_optimizer_arg=optimizer,
            _rlf_lr_scheduler_arg=lr_scheduler,
            _rlf_added_optimizers=[],  # add_optimizer's declarations
            _rlf_config=config, _rlf_checkpoint=checkpoint,
            _rlf_debug_summaries=debug_summaries, _rlf_gradient_clipping=gradient_clipping,
            _rlf_clip_by_global_norm=clip_by_global_norm,
            _rlf_device=torch.device(getattr(config, "device", None) or "cpu"))
        # The optimizers (built at first use from the declarations) and the counters; the
        # Learner that steps them is made by build_training (or make_learner).
        set_framework_state(self, _rlf_optimizers=OptimizerSet(self, self._rlf_optimizer_plans),
                            _rlf_own_learner=None)
        # ALF's protected names, for a subclass to read (or replace: rlf never reads them).
        self._name, self._config, self._device = name, config, self._rlf_device
        self._debug_summaries = debug_summaries

    # ------------------------------------------------------------------ reserved names
    def __setattr__(self, name: str, value: Any) -> None:
        """``nn.Module``'s, refusing a name the base classes reserve (but their settable
        properties) and new state once the optimizers exist."""
        if not _base_setter(type(self), name):
            check_reserved_name(type(self).__name__, name, "the attribute")
        if isinstance(value, (nn.Module, nn.Parameter)):
            what = "module" if isinstance(value, nn.Module) else "parameter"
            self._rlf_check_new_state(name, what)
        super().__setattr__(name, value)

    def register_buffer(self, name: str, tensor: Optional[torch.Tensor],
                        persistent: bool = True) -> None:
        """``nn.Module``'s, with ``__setattr__``'s refusals."""
        check_reserved_name(type(self).__name__, name, "the buffer")
        self._rlf_check_new_state(name, "buffer")
        super().register_buffer(name, tensor, persistent)

    def register_parameter(self, name: str, param: Optional[nn.Parameter]) -> None:
        """``nn.Module``'s, with ``__setattr__``'s refusals."""
        check_reserved_name(type(self).__name__, name, "the parameter")
        self._rlf_check_new_state(name, "parameter")
        super().register_parameter(name, param)

    def add_module(self, name: str, module: Optional[nn.Module]) -> None:
        """``nn.Module``'s, with ``__setattr__``'s refusals."""
        check_reserved_name(type(self).__name__, name, "the module")
        self._rlf_check_new_state(name, "module")
        super().add_module(name, module)

    def _rlf_check_new_state(self, name: str, what: str) -> None:
        """Refuses a sub-module, parameter or buffer under a new name once the optimizers
        exist: no optimizer would train it, and a resumed run would refuse its checkpoint.

        Raises:
            UserError: (a ``ValueError``) naming it and the documented way.
        """
        optimizers = vars(self).get("_rlf_optimizers")
        if optimizers is None or not optimizers.built:
            return
        if any(name in vars(self).get(d, {}) for d in ("_modules", "_parameters", "_buffers")):
            return  # replacing one it has
        raise UserError(f"{type(self).__name__}: the {what} '{name}' is added after "
                        f"construction, where no optimizer trains it and a resumed run "
                        f"would refuse the checkpoint; create it in the constructor (a "
                        f"memory of the algorithm's own: see the guide, 'A memory of your "
                        f"own')")

    def __getattr__(self, name: str) -> Any:
        """``nn.Module``'s lookup; a member rlf 0.4 deprecated warns once, naming its
        replacement, and answers as before (``DEPRECATED_MEMBERS``); one rlf 0.3 removed
        raises an ``AttributeError`` naming its replacement (``removed.py``)."""
        try:
            return super().__getattr__(name)
        except AttributeError:
            deprecated = DEPRECATED_MEMBERS.get(name)
            if deprecated is None:
                raise removed_member_error(self, name) from None
        warn_deprecated(f"{type(self).__name__}.{name}", deprecated[0])
        return deprecated[1](self)

    def _rlf_run_args(self) -> RunArgs:
        """``run_args(self)``: the constructor arguments what trains it reads."""
        return RunArgs(self._rlf_config, self._rlf_device, self._rlf_checkpoint,
                       loss_average=self._rlf_loss_average, optimizers=self._rlf_optimizers)

    # ------------------------------------------------------------------ properties
    @property
    def name(self) -> str:
        """The algorithm's name."""
        return self._rlf_name

    @property
    def on_policy(self) -> Optional[bool]:
        """Whether the algorithm trains on each unroll directly."""
        return self._rlf_is_on_policy

    @property
    def train_state_spec(self) -> Any:
        """Spec of ``train_step``'s state."""
        return self._rlf_train_state_spec

    @property
    def rollout_state_spec(self) -> Any:
        """Spec of ``rollout_step``'s state."""
        return self._rlf_rollout_state_spec

    @property
    def predict_state_spec(self) -> Any:
        """Spec of ``predict_step``'s state."""
        return self._rlf_predict_state_spec

    def get_initial_predict_state(self, batch_size: int) -> Any:
        """Zeros of ``predict_state_spec`` with outer dim ``[batch_size]``."""
        return zeros_from_spec(self._rlf_predict_state_spec, batch_size, self._rlf_device)

    def get_initial_rollout_state(self, batch_size: int) -> Any:
        """Zeros of ``rollout_state_spec`` with outer dim ``[batch_size]``."""
        return zeros_from_spec(self._rlf_rollout_state_spec, batch_size, self._rlf_device)

    def get_initial_train_state(self, batch_size: int) -> Any:
        """Zeros of ``train_state_spec`` with outer dim ``[batch_size]``."""
        return zeros_from_spec(self._rlf_train_state_spec, batch_size, self._rlf_device)

    def train_state_from_rollout_state(self, state: Any) -> Any:
        """The ``train_step`` state a stored sequence starts from, given the rollout state
        stored with its first step (``use_rollout_state``): itself by default (R2D2 overrides
        it).

        Args:
            state: ``[B, ...]`` nest matching ``rollout_state_spec``.

        Returns:
            ``[B, ...]`` nest matching ``train_state_spec``.
        """
        return state

    # ------------------------------------------------------------------ optimizers
    def add_optimizer(self, optimizer: Any, modules: Any, lr_scheduler: Any = None,
                      gradient_clipping: Any = "inherit",
                      clip_by_global_norm: Optional[bool] = None,
                      name: Optional[str] = None, every: int = 1) -> None:
        """Gives some sub-modules an optimizer of their own (ALF's ``add_optimizer``), e.g.
        SAC's actor, critics and temperature; the constructor's ``optimizer`` then covers
        the rest. Checkpoint order: per algorithm (root first), its added optimizers in the
        order added, then its default one.

        With a dict ``LossInfo.loss``, the term named ``name`` is back-propagated into this
        optimizer's parameters only (``backward(inputs=...)``), and an update without it
        does not step it; a single loss trains every optimizer. It steps only on updates
        ``every, 2 every, ...`` (``is_due``); its schedule advances only when it stepped.

        Args:
            optimizer: as ``Algorithm``'s, or None to leave these modules to the default one.
            modules: an ``nn.Module``, an ``nn.Parameter``, or a list of them.
            lr_scheduler, gradient_clipping, clip_by_global_norm: as ``Algorithm``'s, for
                this optimizer (clipping: by default the algorithm's).
            name: the key of its term in a dict ``LossInfo.loss``, of
                ``learner.optimizer_steps`` and of its summaries; by default its index.
            every: it steps on every ``every``-th update (TD3's ``policy_delay``: 2).

        Raises:
            RuntimeError: once the optimizers exist: call it in the constructor.
            ValueError: for a module that is not part of this algorithm, an argument
                ``Algorithm`` refuses, ``every`` < 1 or a ``name`` used already.
        """
        if self._rlf_optimizers.built:
            raise RuntimeError(f"{self._rlf_name}: add_optimizer must be called before the "
                               f"optimizers are created (in the constructor)")
        check_optimizer_args(f"{self._rlf_name}.add_optimizer", optimizer, lr_scheduler,
                             None if gradient_clipping == "inherit" else gradient_clipping)
        if not (isinstance(every, int) and every >= 1):
            raise ValueError(f"{self._rlf_name}.add_optimizer: every must be an int >= 1 "
                             f"(updates), got {every!r}")
        if name is not None and (not isinstance(name, str) or name == "default" or name in [
                e["name"] for e in self._rlf_added_optimizers]):
            raise ValueError(f"{self._rlf_name}.add_optimizer: name {name!r} is taken or not a "
                             f"string; give each optimizer its own name")
        if optimizer is None:
            return
        if isinstance(modules, (nn.Module, nn.Parameter)):
            modules = [modules]
        names = []  # by name: moving or loading the algorithm may replace a Parameter object
        for m in modules:
            found = (self.named_parameters() if isinstance(m, nn.Parameter)
                     else self.named_modules())
            key = next((("p", n) if isinstance(m, nn.Parameter) else ("m", n)
                        for n, x in found if x is m), None)
            if key is None:
                raise ValueError(f"{self._rlf_name}: add_optimizer got a {type(m).__name__} that "
                                 f"is not part of this algorithm; assign it to an attribute "
                                 f"first")
            names.append(key)
        self._rlf_added_optimizers.append(dict(
            optimizer=optimizer, modules=names, lr_scheduler=lr_scheduler, name=name,
            every=every, clipping=(self._rlf_gradient_clipping if gradient_clipping == "inherit"
                                   else gradient_clipping,
                                   self._rlf_clip_by_global_norm if clip_by_global_norm is None
                                   else clip_by_global_norm)))

    def _rlf_optimizer_plans(self) -> List[OptimizerPlan]:
        """The ``OptimizerPlan`` s of this algorithm and its sub-algorithms, root first."""
        return [OptimizerPlan(m, m._rlf_optimizer_arg, m._rlf_lr_scheduler_arg,
                              (m._rlf_gradient_clipping, m._rlf_clip_by_global_norm),
                              m._rlf_added_optimizers)
                for m in self.modules() if isinstance(m, Algorithm)]

    @property
    def num_updates(self) -> int:
        """The number of gradient updates so far, checkpointed; on an actor, the learner's
        count as of the parameters it acts with."""
        return self._rlf_optimizers.counters.num_updates

    def is_due(self, name: str) -> bool:
        """Whether optimizer ``name`` steps in the next update: ``calc_loss`` may skip a term
        whose optimizer is not due (TD3's delayed actor).

        Raises:
            KeyError: for a name that is not among ``learner.names``.
        """
        optimizers = self._rlf_optimizers
        return optimizers.is_due(optimizers.index(name))

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """The module's state plus, at the root, ``"_optimizers"`` and (with any schedule)
        ``"_lr_schedulers"``."""
        state = super().state_dict(*args, destination=destination, prefix=prefix,
                                   keep_vars=keep_vars)
        if prefix == "" and not args:
            state["_optimizers"] = [opt.state_dict() for opt in self._rlf_optimizers.optimizers]
            schedules = self._rlf_optimizers.schedules
            if any(s is not None for s in schedules):
                state["_lr_schedulers"] = [None if s is None else s.state_dict()
                                           for s in schedules]
        return state

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True, assign=False):
        """Restores ``state_dict()`` output, checking everything first.

        Raises:
            ValueError: naming missing and unexpected keys, tensors of another shape or
                dtype, and optimizers that do not fit; nothing is changed then.
        """
        state_dict = dict(state_dict)
        opt_states = state_dict.pop("_optimizers", None)
        sched_states = state_dict.pop("_lr_schedulers", None)
        own = super().state_dict()
        own.pop("_optimizers", None)
        optimizers = self._rlf_optimizers.optimizers if opt_states is not None else []
        schedules = self._rlf_optimizers.schedules if opt_states is not None else []
        problems = state_problems(self._rlf_name, own, state_dict, strict, optimizers, schedules,
                                  opt_states, sched_states)
        if problems:
            raise ValueError(f"{self._rlf_name}: the checkpoint does not fit this algorithm: "
                             + "; ".join(problems) + " (nothing was loaded)")
        result = super().load_state_dict(state_dict, strict=strict, assign=assign)
        if opt_states is not None:
            load_optimizer_states(optimizers, schedules, opt_states, sched_states)
        return result

    def get_extra_state(self) -> Dict[str, Any]:
        """What ``state_dict`` saves beside tensors: the counters. Subclasses extend the dict
        (call ``super()``)."""
        counters = self._rlf_optimizers.counters
        return {"train_iter_num": counters.train_iter_num, "num_updates": counters.num_updates,
                "optimizer_steps": counters.optimizer_steps}

    def set_extra_state(self, state: Dict[str, Any]) -> None:
        """Restores ``get_extra_state()`` output (older checkpoints: defaults)."""
        counters = self._rlf_optimizers.counters
        counters.train_iter_num = int(state.get("train_iter_num", 0))
        counters.num_updates = int(state.get("num_updates", 0))
        steps = [int(c) for c in state.get("optimizer_steps") or []]
        if not self._rlf_optimizers.built:  # sized now; building them keeps a fitting size
            counters.set_num_optimizers(len(steps))
        if len(steps) != len(counters.optimizer_steps):
            steps = [0] * len(counters.optimizer_steps)
        counters.set_optimizer_steps(steps)

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
            info is stored in ``Experience.rollout_info``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement rollout_step")

    def train_step(self, inputs: Any, state: Any, rollout_info: Any) -> AlgStep:
        """One step of recomputation on stored experience (replay, and on-policy epochs).

        Args:
            inputs: ``[B, ...]`` ``TimeStep`` of one time index, or ``[T*B, ...]`` when
                the steps are temporally independent.
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
            info: the stacked ``train_step`` infos (or an unroll's ``rollout_info``),
                ``[T, B, ...]`` (``[T-k, B, ...]`` after a burn-in).

        Returns:
            ``LossInfo`` whose ``loss`` (a tensor or a dict of them by optimizer name) is
            ``[T, B]`` per step, ``[T-k, B]`` over the first ``T - k`` steps (``k = 1``:
            transitions), ``[B]`` per sequence or a scalar, which the learner masks and
            averages (``Learner.update_with_gradient``): keep the time and batch dims.
            ``extra`` terms are summarised as ``loss/<name>/<key>``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement calc_loss")

    # ------------------------------------------------------------------ hooks
    def preprocess_experience(self, root_inputs: Any, rollout_info: Any, batch_info: Any
                              ) -> Tuple[Any, Any]:
        """Hook on replayed ``[B, T]`` experience before training; returns
        ``(root_inputs, rollout_info)``. The default returns them unchanged."""
        return root_inputs, rollout_info

    def experience_sources(self) -> Sequence[ExperienceSource]:
        """The second sources of sequences appended to each training mini-batch
        (``rlf.algorithms.ExperienceSource``: IMPALA's experience replay, a model's
        sequences); none by default. The data path asks once, when it is built.

        Returns:
            The sources, in the order they are appended (after hybrid training's offline
            data).
        """
        return ()

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

