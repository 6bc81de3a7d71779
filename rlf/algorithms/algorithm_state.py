"""An ``Algorithm``'s checkpoint state: optimizers in ``state_dict``, checked loading, initial
checkpoints, and the extra (non-tensor) state."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict

import torch

from rlf.utils.errors import UserError

__all__ = ["AlgorithmStateMixin"]

logger = logging.getLogger(__name__)


class AlgorithmStateMixin:
    """``Algorithm``'s ``state_dict``/``load_state_dict`` (optimizers and schedules included,
    everything checked before anything is loaded) and ``load_initial_checkpoint``."""

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
                differs (expected vs found), and optimizers that do not fit (other group
                sizes, or another optimizer class's hyperparameters); nothing is changed
                then.
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
        wrong = [f"'{k}' expected {tuple(v.shape)} {v.dtype}, found {tuple(found.shape)} "
                 f"{found.dtype}" for k, v in own.items()
                 if isinstance(v, torch.Tensor) and isinstance(found := state_dict.get(k),
                                                              torch.Tensor)
                 and (v.shape != found.shape or v.dtype != found.dtype)]
        problems += wrong[:4]
        if len(wrong) > 4:
            problems.append(f"{len(wrong) - 4} more tensors of other shapes or dtypes")
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
                    # Another optimizer class: torch would load its hyperparameters and fail
                    # at the first step (SGD's KeyError 'momentum' on Adam's state). A
                    # schedule's initial_lr is the schedulers' check, below.
                    foreign = sorted({k for g in st.get("param_groups", []) for k in g}
                                     - {k for g in opt.param_groups for k in g}
                                     - {"initial_lr"})
                    if foreign:
                        problems.append(f"optimizer {i} ({type(opt).__name__}) has none of "
                                        f"the checkpoint optimizer's hyperparameters "
                                        f"{foreign}: it was written by another optimizer")
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
            for i, (opt, st) in enumerate(zip(optimizers, opt_states)):
                configured = [dict(g) for g in opt.param_groups]
                opt.load_state_dict(st)
                self._warn_replaced_hyperparameters(i, opt, configured)
            # a checkpoint without schedules leaves this algorithm's schedules at their start
            for sched, st in zip(self._lr_schedulers, sched_states or []):
                if sched is not None:
                    sched.load_state_dict(st)
        return result

    def _warn_replaced_hyperparameters(self, index: int, optimizer, configured) -> None:
        """Warns where torch's ``Optimizer.load_state_dict`` replaced a configured
        hyperparameter (a learning rate changed in the conf before a resume) with the
        checkpoint's: the resumed run goes on with the checkpoint's. With a schedule the
        configured rate is compared as its ``initial_lr``."""
        changed = []
        for mine, group in zip(configured, optimizer.param_groups):
            for key, value in mine.items():
                if key == "params" or (key == "lr" and "initial_lr" in mine):
                    continue
                restored = group.get(key, value)
                if isinstance(value, torch.Tensor) or isinstance(restored, torch.Tensor):
                    same = torch.equal(torch.as_tensor(value), torch.as_tensor(restored))
                else:
                    same = value == restored
                if not same:
                    name = "lr" if key == "initial_lr" else key
                    changed.append(f"{name} = {restored!r} (configured: {value!r})")
        if changed:
            logger.warning("%s: optimizer %d (%s) goes on with the checkpoint's %s: torch "
                           "restores an optimizer's hyperparameters with its state; to change "
                           "them, start a new run (another --root_dir)", self._name, index,
                           type(optimizer).__name__, ", ".join(sorted(set(changed))))

    def load_initial_checkpoint(self) -> None:
        """Loads the parameters named by the ``checkpoint`` argument (``"prefix@path"``).

        Raises:
            UserError: (a ``ValueError``) for a missing or unreadable file, no parameters
                under the prefix (naming the prefixes there are), or parameters that do not
                fit (``load_state_dict``), naming the file; nothing is loaded then.
        """
        if not self._checkpoint:
            return
        from rlf.utils.checkpoint import load_checkpoint_file
        where = f"{self._name}.checkpoint = {self._checkpoint!r}"
        prefix, _, path = self._checkpoint.rpartition("@")
        try:
            full = load_checkpoint_file(Path(path))
        except FileNotFoundError as e:
            raise UserError(f"{where}: {e}") from None
        full = full.get("algorithm", full)
        state = dict(full)
        if prefix:
            state = {k[len(prefix) + 1:]: v for k, v in state.items()
                     if k.startswith(prefix + ".")}
        state.pop("_optimizers", None)
        state.pop("_lr_schedulers", None)
        if not state:
            prefixes = sorted({k.split(".")[0] for k in full if "." in k})
            raise UserError(f"{where}: {path} has no parameters under prefix '{prefix}' (its "
                            f"prefixes: {', '.join(prefixes) or 'none'})")
        try:
            self.load_state_dict(state, strict=False)
        except ValueError as e:
            raise UserError(f"{where}: {e}") from None

    def get_extra_state(self) -> Dict[str, Any]:
        """What ``state_dict`` saves beside tensors (``nn.Module`` hook): the training
        iteration count. Subclasses extend the dict (call ``super()``)."""
        return {"train_iter_num": self._counters.train_iter_num}

    def set_extra_state(self, state: Dict[str, Any]) -> None:
        """Restores ``get_extra_state()`` output; keys missing in older checkpoints get their
        defaults."""
        self._counters.train_iter_num = int(state.get("train_iter_num", 0))
