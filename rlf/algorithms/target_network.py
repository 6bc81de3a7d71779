"""Target networks: frozen copies of a network, moved towards it by a Polyak average or a
periodic copy (Mnih et al. 2015; Lillicrap et al. 2016, eq. 7; ALF's ``TargetUpdater``)."""

from __future__ import annotations

import copy
from typing import Sequence

import torch
from torch import nn

__all__ = ["make_target_network", "TargetUpdater"]


def make_target_network(network: nn.Module) -> nn.Module:
    """A deep copy of ``network`` whose parameters take no gradient (no optimizer covers
    them; they are checkpointed with the algorithm as a sub-module)."""
    target = copy.deepcopy(network)
    target.requires_grad_(False)
    return target


class TargetUpdater(nn.Module):
    """Every ``period`` calls, ``target <- tau * online + (1 - tau) * target`` for each
    parameter and floating buffer; ``tau = 1`` copies.

    A module without parameters: assigned to an algorithm's attribute it checkpoints its
    update count (``get_extra_state``), so the period's phase survives a resume. It holds the
    networks outside the module tree (they belong to the algorithm).

    Args:
        networks: the online networks.
        targets: their target copies, in the same order and of the same structure.
        tau: the Polyak rate in ``(0, 1]``.
        period: gradient updates between target updates (>= 1).

    Raises:
        ValueError: for ``tau`` outside ``(0, 1]``, ``period < 1`` or networks whose
            parameters differ from their targets'.
    """

    def __init__(self, networks: Sequence[nn.Module], targets: Sequence[nn.Module],
                 tau: float = 1.0, period: int = 1):
        if not 0.0 < tau <= 1.0 or period < 1:
            raise ValueError(f"TargetUpdater: tau must be in (0, 1] (got {tau}) and period "
                             f">= 1 (got {period})")
        super().__init__()
        # A plain list: nn.Module registers no sub-module from it; the owner holds them.
        self._networks = list(zip(networks, targets))
        for src, dst in self._pairs_by_network():
            if [t.shape for t in src] != [t.shape for t in dst]:
                raise ValueError("TargetUpdater: a network and its target differ in structure")
        self._tau, self._period = tau, period
        self._count = 0

    def _pairs_by_network(self):
        # Looked up at each update, not kept: moving or loading a module may replace its
        # Parameter objects.
        return [(list(net.state_dict(keep_vars=True).values()),
                 list(target.state_dict(keep_vars=True).values()))
                for net, target in self._networks]

    @property
    def num_calls(self) -> int:
        """Gradient updates counted so far."""
        return self._count

    def get_extra_state(self):
        """The update count (``nn.Module`` hook, saved with the owner's ``state_dict``)."""
        return {"num_calls": self._count}

    def set_extra_state(self, state) -> None:
        """Restores ``get_extra_state()`` output."""
        self._count = int(state["num_calls"])

    @torch.no_grad()
    def forward(self) -> None:
        """Counts one gradient update and updates the targets when the period is reached."""
        self._count += 1
        if self._count % self._period:
            return
        pairs = [(s, d) for src, dst in self._pairs_by_network() for s, d in zip(src, dst)
                 if d.is_floating_point()]
        if self._tau == 1.0:
            for s, d in pairs:
                d.copy_(s)
        else:
            torch._foreach_lerp_([d for _, d in pairs], [s for s, _ in pairs], self._tau)
