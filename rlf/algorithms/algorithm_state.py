"""An ``Algorithm``'s checkpoint state: its tensors with the optimizers' states, checked before
anything is loaded, and initial parameters from a checkpoint file."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Dict, List, Optional

import torch

from rlf.utils.errors import UserError

__all__ = ["state_problems", "load_optimizer_states", "load_initial_checkpoint",
           "optimizer_settings", "replaced_hyperparameters", "apply_optimizer_settings"]

logger = logging.getLogger(__name__)


def state_problems(name: str, own: Dict[str, Any], state_dict: Dict[str, Any], strict: bool,
                   optimizers: List[torch.optim.Optimizer], schedules: List[Any],
                   opt_states, sched_states) -> List[str]:
    """What keeps ``state_dict`` (without its optimizer states) and ``opt_states`` /
    ``sched_states`` from loading into an algorithm whose own state is ``own``: missing and
    unexpected keys (``strict``), tensors of other shapes or dtypes (expected vs found), and
    optimizers that do not fit (other group sizes, another optimizer class's
    hyperparameters, schedules on other optimizers). Empty if it fits."""
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
        # Another optimizer class: torch would load its hyperparameters and fail at the
        # first step (SGD's KeyError 'momentum' on Adam's state). A schedule's initial_lr is
        # the schedules' check (state_problems).
        foreign = sorted({k for g in st.get("param_groups", []) for k in g}
                         - {k for g in opt.param_groups for k in g} - {"initial_lr"})
        if foreign:
            problems.append(f"optimizer {i} ({type(opt).__name__}) has none of the "
                            f"checkpoint optimizer's hyperparameters {foreign}: it "
                            f"was written by another optimizer")
    return problems


def load_optimizer_states(name: str, optimizers: List[torch.optim.Optimizer],
                          schedules: List[Any], opt_states, sched_states) -> None:
    """Loads checked optimizer and schedule states (``state_problems`` found none); a
    checkpoint without schedules leaves the schedules at their start. As torch does, the
    optimizers' hyperparameters (``lr``, ``betas``, ...) become the checkpoint's: a
    ``Trainer`` compares them with the configured ones (``replaced_hyperparameters``)."""
    del name
    for opt, st in zip(optimizers, opt_states):
        opt.load_state_dict(st)
    for schedule, st in zip(schedules, sched_states or []):
        if schedule is not None:
            schedule.load_state_dict(st)


def optimizer_settings(optimizers: List[torch.optim.Optimizer]) -> List[List[Dict[str, Any]]]:
    """Every optimizer's parameter groups' settings (``lr``, ``betas``, ``eps``, ...; no
    parameters): read before a restore, they are the configured ones."""
    return [[{k: v for k, v in group.items() if k != "params"} for group in opt.param_groups]
            for opt in optimizers]


def replaced_hyperparameters(configured: List[List[Dict[str, Any]]],
                             optimizers: List[torch.optim.Optimizer]) -> List[str]:
    """The configured hyperparameters (``optimizer_settings`` before a restore) that the
    restored optimizers no longer have: torch's ``Optimizer.load_state_dict`` replaced them
    with the checkpoint's. With a schedule the configured rate is compared as its
    ``initial_lr``.

    Returns:
        ``["optimizer i (Adam): lr = <checkpoint's> (configured: <configured>)", ...]``.
    """
    changed = []
    for i, (groups, opt) in enumerate(zip(configured, optimizers)):
        for mine, group in zip(groups, opt.param_groups):
            for key, value in mine.items():
                if key == "lr" and "initial_lr" in mine:
                    continue
                restored = group.get(key, value)
                if _differs(restored, value):
                    changed.append(f"optimizer {i} ({type(opt).__name__}): "
                                   f"{'lr' if key == 'initial_lr' else key} = {restored!r} "
                                   f"(configured: {value!r})")
    return sorted(set(changed))


def apply_optimizer_settings(optimizers: List[torch.optim.Optimizer], schedules: List[Any],
                             configured: List[List[Dict[str, Any]]]) -> List[str]:
    """Puts the configured optimizer settings (``optimizer_settings``) back after a restore,
    which loaded the checkpoint's (population-based training's explore step, whose mutated
    values must not be overwritten by the cloned trial's).

    A learning rate under a schedule keeps its place in the schedule: the current rate and the
    schedule's base rate are scaled by the configured base rate over the checkpoint's. With
    the checkpoint's own settings nothing changes, so a plain resume stays exact.

    Returns:
        ``["optimizer i group j: name old -> new", ...]`` for what changed.
    """
    changed = []
    for i, (opt, schedule, groups) in enumerate(zip(optimizers, schedules, configured)):
        for j, (group, want) in enumerate(zip(opt.param_groups, groups)):
            for key, value in want.items():
                if key in ("lr", "initial_lr") or key not in group:
                    continue
                if _differs(group[key], value):
                    changed.append(f"optimizer {i} group {j}: {key} {group[key]} -> {value}")
                    group[key] = value
            base = want.get("initial_lr", want["lr"])
            had = group.get("initial_lr", group["lr"])
            if _differs(had, base):
                old = group["lr"]
                group["lr"] = float(old) * float(base) / float(had) if had else float(base)
                if "initial_lr" in group:
                    group["initial_lr"] = base
                if schedule is not None and hasattr(schedule, "base_lrs"):
                    schedule.base_lrs[j] = base
                changed.append(f"optimizer {i} group {j}: lr {old} -> {group['lr']}")
    return changed


def _differs(a, b) -> bool:
    """Whether two hyperparameter values differ (tensors by value, of any size)."""
    if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
        a, b = torch.as_tensor(a), torch.as_tensor(b)
        return a.shape != b.shape or not bool((a == b).all())
    return bool(a != b)


def load_initial_checkpoint(algorithm, checkpoint: Optional[str] = None) -> None:
    """Loads the parameters named by ``checkpoint`` (``"prefix@path"``; by default the
    algorithm's ``checkpoint`` argument, and nothing without one) into ``algorithm`` (the
    ``Trainer`` calls it right after building the algorithm).

    Raises:
        UserError: (a ``ValueError``) for a missing or unreadable file, no parameters under
            the prefix (naming the prefixes there are), or parameters that do not fit
            (``load_state_dict``), naming the file; nothing is loaded then.
    """
    from rlf.utils.checkpoint import load_checkpoint_file
    checkpoint = algorithm.run_args.checkpoint if checkpoint is None else checkpoint
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
