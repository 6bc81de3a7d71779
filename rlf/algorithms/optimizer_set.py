"""An algorithm's optimizers: built from its declarations (``OptimizerPlan``: the constructor's
``optimizer``, ``lr_scheduler`` and clipping, and ``add_optimizer``'s) at first use, in
checkpoint order, with the counters (``Counters``). The algorithm holds them, as ALF's holds its
optimizers, and checkpoints them beside its parameters; the ``Learner`` that
``build_training`` makes steps them.
"""

from __future__ import annotations

from typing import Any, Callable, Dict, List, NamedTuple, Optional, Set, Tuple

import torch
from torch import nn

from rlf.algorithms.counters import Counters
from rlf.algorithms.optimization import checked_schedule
from rlf.unrollers.actor_params import register_counters
from rlf.utils.errors import UserError

__all__ = ["OptimizerEntry", "OptimizerPlan", "OptimizerSet"]


class OptimizerPlan(NamedTuple):
    """One algorithm's optimizer declarations, which the learner builds its optimizers from.

    Attributes:
        algorithm: the root or a sub-algorithm (whose ``name`` prefixes its optimizers').
        optimizer, lr_scheduler: its constructor's arguments.
        clipping: ``(gradient_clipping, clip_by_global_norm)``.
        added: its ``add_optimizer`` declarations (dicts), in the order made.
    """

    algorithm: nn.Module
    optimizer: Any
    lr_scheduler: Any
    clipping: Tuple[Optional[float], bool]
    added: List[Dict[str, Any]]


class OptimizerEntry:
    """One optimizer with what the learner needs beside it."""

    def __init__(self, optimizer, schedule, clipping: Tuple[Optional[float], bool], name: str,
                 tag: str, every: int):
        self.optimizer, self.schedule, self.clipping = optimizer, schedule, clipping
        self.name, self.tag, self.every = name, tag, every



class OptimizerSet:
    """The optimizers of an algorithm tree, built from its ``OptimizerPlan`` s at first use,
    and its ``Counters``.

    Args:
        algorithm: the root ``Algorithm``.
        plans: returns the ``OptimizerPlan`` s, root first, read when the optimizers are
            built (after the subclass's constructor).

    Attributes:
        counters: the ``Counters``, which travel to the actors.
    """

    def __init__(self, algorithm: Any, plans: Callable[[], List[OptimizerPlan]]):
        self.algorithm = algorithm
        self._plans = plans
        self.counters = Counters()
        self._entries: Optional[List[OptimizerEntry]] = None
        register_counters(algorithm, self)  # (its counters travel to the actors' copies)

    def __setstate__(self, state: Dict[str, Any]) -> None:
        """Unpickled or deep-copied with its algorithm: registers the copy's counters too."""
        self.__dict__.update(state)
        register_counters(self.algorithm, self)

    @property
    def built(self) -> bool:
        """Whether the optimizers exist (``add_optimizer`` and new state are refused then)."""
        return self._entries is not None

    def build(self) -> List[OptimizerEntry]:
        """The optimizers with their schedules, clipping, names and periods, built at the
        first call.

        Raises:
            ValueError: for a setting an optimizer or schedule refuses.
            UserError: (a ``ValueError``) naming parameters no optimizer covers, a schedule
                without an optimizer, or repeated names.
        """
        if self._entries is None:
            self._entries = _build_optimizers(self.algorithm, self._plans())
            self.counters.set_num_optimizers(len(self._entries))
        return self._entries

    @property
    def optimizers(self) -> List[torch.optim.Optimizer]:
        """The optimizers, in checkpoint order."""
        return [e.optimizer for e in self.build()]

    @property
    def names(self) -> List[str]:
        """The optimizers' names, in ``optimizers`` order."""
        return [e.name for e in self.build()]

    @property
    def optimizer_steps(self) -> Dict[str, int]:
        """How many times each optimizer stepped (a step AMP skipped does not count), by
        name."""
        return dict(zip(self.names, self.counters.optimizer_steps))

    @property
    def schedules(self) -> List[Any]:
        """Each optimizer's learning-rate schedule, or None."""
        return [e.schedule for e in self.build()]

    def index(self, name: str) -> int:
        """The index of optimizer ``name``.

        Raises:
            KeyError: for a name that is not among the optimizers.
        """
        names = self.names
        if name not in names:
            raise KeyError(f"{self.algorithm.name}: no optimizer named {name!r}; the "
                           f"optimizers are {names} (add_optimizer(..., name=...))")
        return names.index(name)

    def is_due(self, index: int) -> bool:
        """Whether optimizer ``index`` steps in the next update (its ``every`` divides the
        next update's number, from 1)."""
        return (self.counters.num_updates + 1) % self.build()[index].every == 0


# ---------------------------------------------------------------------- building
def _parameters_of(algorithm, names) -> List[nn.Parameter]:
    params: List[nn.Parameter] = []
    for kind, name in names:
        params.extend([algorithm.get_parameter(name)] if kind == "p"
                      else algorithm.get_submodule(name).parameters())
    return [p for p in params if p.requires_grad]


def _own_parameters(plan: OptimizerPlan, plans: List[OptimizerPlan],
                    claimed=frozenset()) -> List[nn.Parameter]:
    """Parameters of ``plan``'s algorithm that no other optimizer claims."""
    excluded = set(claimed)
    modules = {id(m) for m in plan.algorithm.modules()}
    for other in plans:
        if (other.algorithm is not plan.algorithm and id(other.algorithm) in modules
                and other.optimizer is not None):
            excluded.update(id(p) for p in other.algorithm.parameters())
    return [p for p in plan.algorithm.parameters()
            if id(p) not in excluded and p.requires_grad]


def _build_optimizers(root, plans: List[OptimizerPlan]) -> List[OptimizerEntry]:
    """The optimizers of ``root`` and its sub-algorithms (``plans``), in checkpoint order.

    Raises:
        UserError: (a ``ValueError``) naming parameters no optimizer covers, a schedule
            without an optimizer or of length < 1, or repeated names.
    """
    claimed: Set[int] = set()
    for plan in plans:
        for entry in plan.added:
            claimed.update(id(p) for p in _parameters_of(plan.algorithm, entry["modules"]))
    entries: List[OptimizerEntry] = []
    for plan in plans:
        _add_plan(entries, root, plan, _own_parameters(plan, plans, claimed))
    _check_optimizers(root, entries)
    return entries


def _add_optimizer(entries: List[OptimizerEntry], opt, params, ctor, clip, name: Optional[str],
                   period: int) -> None:
    """Appends the optimizer ``opt`` (an instance, or a factory of ``params``: nothing
    without parameters) with its schedule (``ctor``), clipping, name and period."""
    if not isinstance(opt, torch.optim.Optimizer):
        if not params:
            return
        opt = opt(params)
    index = len(entries)
    tag = str(index) if name in (None, "default") or str(name).endswith("/default") else name
    entries.append(OptimizerEntry(opt, None if ctor is None else checked_schedule(ctor(opt)),
                              clip, str(index) if name is None else name, str(tag), period))


def _add_plan(entries: List[OptimizerEntry], root, plan: OptimizerPlan, own: List[nn.Parameter]
              ) -> None:
    """Appends one algorithm's optimizers: those it added, then its default one over ``own``
    (its parameters no other optimizer claims).

    Raises:
        UserError: for a schedule without an optimizer.
    """
    module = plan.algorithm
    taken: Set[int] = set()
    for entry in plan.added:
        params = [p for p in _parameters_of(module, entry["modules"]) if id(p) not in taken]
        taken.update(id(p) for p in params)
        _add_optimizer(entries, entry["optimizer"], params, entry["lr_scheduler"],
                       entry["clipping"], entry["name"] if module is root or entry["name"] is None
                       else f"{module.name}/{entry['name']}", entry["every"])
    if plan.optimizer is None:
        if plan.lr_scheduler is not None:
            raise UserError(f"{module.name}: lr_scheduler needs an optimizer of its "
                            f"own (set {type(module).__name__}.optimizer)")
        return
    _add_optimizer(entries, plan.optimizer, own, plan.lr_scheduler, plan.clipping,
                   "default" if module is root else f"{module.name}/default", 1)


def _check_optimizers(root, entries: List[OptimizerEntry]) -> None:
    """Refuses repeated optimizer names and trainable parameters no optimizer holds.

    Raises:
        UserError: naming them.
    """
    names = [e.name for e in entries]
    if len(set(names)) != len(names):
        raise UserError(f"{root.name}: optimizer names {names} repeat; give each "
                        f"add_optimizer its own name (sub-algorithms need their own "
                        f"names too)")
    covered = {id(p) for e in entries for g in e.optimizer.param_groups for p in g["params"]}
    uncovered = [n for n, p in root.named_parameters()
                 if p.requires_grad and id(p) not in covered]
    if uncovered:
        raise UserError(
            f"{root.name}: parameters {uncovered[:5]}{'...' if len(uncovered) > 5 else ''}"
            f" have no optimizer; pass optimizer=... (e.g. in gin "
            f"`{type(root).__name__}.optimizer = @torch.optim.Adam`)")
