"""Piecewise-linear schedules over environment steps (an entropy weight, an exploration
epsilon), in RLlib's ``[(steps, value), ...]`` format."""

from __future__ import annotations

from typing import List, Sequence, Tuple, Union

import numpy as np

__all__ = ["Schedule", "StepSchedule"]

#: A constant, or ``(environment_steps, value)`` pairs with increasing steps.
Schedule = Union[float, Sequence[Tuple[int, float]]]


class StepSchedule:
    """A value interpolated linearly between ``(environment_steps, value)`` points and
    constant outside them.

    Args:
        schedule: a float (constant), or pairs with increasing non-negative steps, e.g.
            ``[(0, 1.0), (50000, 0.05)]``.
        what: the argument's name, for messages (e.g. ``"DQNAlgorithm.epsilon_greedy"``).

    Raises:
        ValueError: naming ``what``, for an empty schedule, one not made of pairs, or steps
            that are negative or not increasing.
    """

    def __init__(self, schedule: Schedule, what: str):
        if isinstance(schedule, (int, float)):
            self.steps: List[int] = [0]
            self.values: List[float] = [float(schedule)]
            return
        try:
            pairs = [(int(steps), float(v)) for steps, v in schedule]
        except (TypeError, ValueError):
            raise ValueError(f"{what} must be a float or a list of (environment_steps, value) "
                             f"pairs, got {schedule!r}") from None
        steps = [p[0] for p in pairs]
        if not pairs or steps[0] < 0 or any(b <= a for a, b in zip(steps, steps[1:])):
            raise ValueError(f"{what}'s schedule needs at least one pair and increasing, "
                             f"non-negative environment steps, got {schedule!r}")
        self.steps, self.values = steps, [p[1] for p in pairs]

    @property
    def is_constant(self) -> bool:
        """Whether the schedule has a single value."""
        return len(self.steps) == 1

    def __call__(self, env_steps: int) -> float:
        """The value at ``env_steps`` environment steps."""
        return float(np.interp(env_steps, self.steps, self.values))
