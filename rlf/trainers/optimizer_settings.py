"""The configured optimizer hyperparameters against a checkpoint's on resume: torch's
``Optimizer.load_state_dict`` replaces the configured ``lr``, ``betas``, ... with the
checkpoint's, so the ``Trainer`` reads them before a restore (``optimizer_settings``), then
refuses a checkpoint that would silently override them (``replaced_hyperparameters``) or, for
population-based training, puts them back (``apply_optimizer_settings``)."""

from __future__ import annotations

from typing import Any, Dict, List

import torch

__all__ = ["optimizer_settings", "replaced_hyperparameters", "apply_optimizer_settings"]


def optimizer_settings(optimizers: List[torch.optim.Optimizer]) -> List[List[Dict[str, Any]]]:
    """Every optimizer's parameter groups' settings (``lr``, ``betas``, ``eps``, ...; no
    parameters): read before a restore, they are the configured ones.

    Args:
        optimizers: the learner's optimizers (``loop.learner.optimizers``).

    Returns:
        Per optimizer, per parameter group, ``{name: value}`` (floats, tuples, or tensors
        for tensor-valued settings).
    """
    return [[{k: v for k, v in group.items() if k != "params"} for group in opt.param_groups]
            for opt in optimizers]


def replaced_hyperparameters(configured: List[List[Dict[str, Any]]],
                             optimizers: List[torch.optim.Optimizer]) -> List[str]:
    """The configured hyperparameters (``optimizer_settings`` before a restore) that the
    restored optimizers no longer have: torch's ``Optimizer.load_state_dict`` replaced them
    with the checkpoint's. With a schedule the configured rate is compared as its
    ``initial_lr``.

    Args:
        configured: ``optimizer_settings`` read before the restore.
        optimizers: the restored optimizers, in the same order.

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

    Args:
        optimizers: the restored optimizers; ``schedules``: their schedules (None for none),
            in the same order.
        configured: ``optimizer_settings`` read before the restore.

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
