"""An ``Algorithm``'s checkpoint state: its tensors with the optimizers' states, checked before
anything is loaded, and initial parameters from a checkpoint file."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from rlf.algorithms.seams import run_args
from rlf.utils.errors import UserError

__all__ = ["state_problems", "load_optimizer_states", "load_initial_checkpoint"]

logger = logging.getLogger(__name__)


def state_problems(name: str, own: Dict[str, Any], state_dict: Dict[str, Any], strict: bool,
                   optimizers: List[torch.optim.Optimizer], schedules: List[Any],
                   opt_states, sched_states) -> List[str]:
    """What keeps ``state_dict``, ``opt_states`` and ``sched_states`` from loading into an
    algorithm whose state is ``own``: missing and unexpected keys (``strict``), tensors of
    other shapes or dtypes, optimizers and schedules that do not fit. Empty if it fits."""
    problems = _tensor_problems(own, state_dict, strict)
    if opt_states is not None:
        problems += _optimizer_problems(optimizers, opt_states)
    if sched_states is not None and opt_states is not None:
        mine = [s is not None for s in schedules]
        theirs = [s is not None for s in sched_states]
        if mine != theirs:
            problems.append(f"learning-rate schedulers per optimizer: this algorithm {mine}, "
                            f"the checkpoint {theirs}")
    return problems


def _tensor_problems(own: Dict[str, Any], state_dict: Dict[str, Any],
                     strict: bool) -> List[str]:
    """Missing and unexpected keys (``strict``) and tensors of other shapes or dtypes."""
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
    return problems


def _optimizer_problems(optimizers: List[torch.optim.Optimizer], opt_states) -> List[str]:
    """Optimizer states that do not fit: another count, other group sizes, another
    optimizer class's hyperparameters."""
    if len(opt_states) != len(optimizers):
        return [f"{len(opt_states)} optimizer states for {len(optimizers)} optimizers"]
    problems = []
    for i, (opt, st) in enumerate(zip(optimizers, opt_states)):
        sizes = [len(g["params"]) for g in opt.param_groups]
        found = [len(g["params"]) for g in st.get("param_groups", [])]
        if sizes != found:
            problems.append(f"optimizer {i} has parameter groups of sizes {sizes}, "
                            f"the checkpoint {found}")
        # Another optimizer class would fail at the first step (SGD's KeyError 'momentum').
        foreign = sorted({k for g in st.get("param_groups", []) for k in g}
                         - {k for g in opt.param_groups for k in g} - {"initial_lr"})
        if foreign:
            problems.append(f"optimizer {i} ({type(opt).__name__}) has none of the "
                            f"checkpoint optimizer's hyperparameters {foreign}: it "
                            f"was written by another optimizer")
    return problems


def load_optimizer_states(optimizers: List[torch.optim.Optimizer], schedules: List[Any],
                          opt_states, sched_states) -> None:
    """Loads checked optimizer and schedule states; the hyperparameters become the
    checkpoint's, as torch does (see ``replaced_hyperparameters``)."""
    for opt, st in zip(optimizers, opt_states):
        opt.load_state_dict(st)
    for schedule, st in zip(schedules, sched_states or []):
        if schedule is not None:
            schedule.load_state_dict(st)


def load_initial_checkpoint(algorithm, checkpoint: Optional[str] = None) -> None:
    """Loads the parameters named by ``checkpoint`` (``"prefix@path"``; by default the
    algorithm's ``checkpoint`` argument) into ``algorithm``.

    Raises:
        UserError: (a ``ValueError``) for a missing file, no parameters under the prefix, or
            parameters that do not fit, naming the file; nothing is loaded then.
    """
    from rlf.utils.checkpoint import load_checkpoint_file
    checkpoint = run_args(algorithm).checkpoint if checkpoint is None else checkpoint
    if not checkpoint:
        return
    where = f"{algorithm.name}.checkpoint = {checkpoint!r}"
    prefix, _, path = checkpoint.rpartition("@")
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
        algorithm.load_state_dict(state, strict=False)
    except ValueError as e:
        raise UserError(f"{where}: {e}") from None
