"""``Unroller``: the interface between an algorithm and the environments it acts in.

An unroller hands the algorithm ``[T, B]`` experience; where the acting happens (in the
learner's process, in actor processes, in Ray actors on other machines) is its own business.
``RLAlgorithm`` uses nothing else of it, and the ``Trainer`` is the one that builds it.
"""

from __future__ import annotations

import abc
from typing import Any, Callable, Dict, NamedTuple, Optional

__all__ = ["Unroller", "UnrollerFactory"]


class Unroller(abc.ABC):
    """Collects ``[T, B]`` experience with an algorithm's ``rollout_step``.

    Attributes:
        times: seconds of the last ``unroll`` by part (``"env_step"``, ``"policy"`` and, for
            actor unrollers, ``"wait"``: the learner's time waiting for unrolls).
    """

    times: Dict[str, float]

    @property
    @abc.abstractmethod
    def batch_size(self) -> int:
        """``B``: the environments of every unroll (over all actors)."""

    @abc.abstractmethod
    def unroll(self, unroll_length: int) -> Optional[Any]:
        """The next ``unroll_length`` steps of every environment.

        Args:
            unroll_length: ``T`` >= 0.

        Returns:
            ``Experience`` with ``[T, B, ...]`` leaves, or None for ``T = 0``.
        """

    @property
    def uses_actors(self) -> bool:
        """Whether acting happens outside the learner (then ``policy_lag`` and ``restarts``
        are summarised)."""
        return False

    @property
    def policy_lag(self) -> float:
        """Mean parameter versions between the learner and the policy that acted (0 when the
        learner acts itself)."""
        return 0.0

    @property
    def restarts(self) -> int:
        """Actors restarted so far."""
        return 0

    def update_parameters(self) -> None:
        """Sends the learner's current parameters to where the acting happens (nothing to do
        when the learner acts itself)."""

    def state_dict(self) -> Dict[str, Any]:
        """What a checkpoint needs to continue the episodes in progress; ``{}`` if they
        cannot be continued."""
        return {}

    def load_state_dict(self, state_dict: Dict[str, Any]) -> bool:
        """Restores ``state_dict()`` output.

        Returns:
            True if the episodes in progress continue exactly; False if they restart.
        """
        return False

    def close(self) -> None:
        """Releases what the unroller holds (processes, environments it owns)."""


class UnrollerFactory(NamedTuple):
    """An unroller to be made by the ``TrainingLoop`` that takes it, after the checks of its
    environments (so that a refused setting leaves no actor behind).

    Attributes:
        batch_size: the environments the unroller will step (``Unroller.batch_size``).
        make: makes it (starting its actors, if any).
    """

    batch_size: int
    make: Callable[[], Unroller]
