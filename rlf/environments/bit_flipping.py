"""Bit flipping (Andrychowicz et al. 2017, "Hindsight Experience Replay", §3.1): a goal-conditioned
task whose reward is sparse enough that exploration alone almost never finds it for ``n >= 15``
bits, the classic test of hindsight relabelling (``rlf.replay.hindsight``).

Registered as ``rlf/BitFlipping-v0`` (``num_bits`` among ``load``'s keyword arguments).
"""

from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

import gymnasium as gym
import numpy as np

__all__ = ["BitFlippingEnv", "ENV_ID"]

#: The gymnasium id.
ENV_ID = "rlf/BitFlipping-v0"


class BitFlippingEnv(gym.Env):
    """``n`` bits and a goal of ``n`` bits, both random (and different) at each reset; action
    ``i`` flips bit ``i``. The reward is 0 at the step that makes the bits equal the goal (the
    episode then terminates) and -1 at every other step; an episode is cut (truncated) after
    ``n`` steps.

    Observations are gymnasium's goal-conditioned ``Dict``: ``observation`` (the bits),
    ``achieved_goal`` (the bits again) and ``desired_goal``, each ``MultiBinary(n)``. rlf's
    loader flattens them in key order: ``achieved_goal`` is ``[0, n)``, ``desired_goal``
    ``[n, 2n)`` and ``observation`` ``[2n, 3n)`` of the float32 vector.

    Args:
        num_bits: ``n`` (>= 1).

    Raises:
        ValueError: for ``num_bits < 1``.
    """

    metadata: Dict[str, Any] = {"render_modes": []}

    def __init__(self, num_bits: int = 15):
        if num_bits < 1:
            raise ValueError(f"BitFlippingEnv: num_bits must be >= 1, got {num_bits}")
        self.num_bits = int(num_bits)
        bits = gym.spaces.MultiBinary(self.num_bits)
        self.observation_space = gym.spaces.Dict(
            {"achieved_goal": bits, "desired_goal": bits, "observation": bits})
        self.action_space = gym.spaces.Discrete(self.num_bits)
        self._state = np.zeros(self.num_bits, dtype=np.int8)
        self._goal = np.zeros(self.num_bits, dtype=np.int8)
        self._steps = 0

    def _observation(self) -> Dict[str, np.ndarray]:
        return {"achieved_goal": self._state.copy(), "desired_goal": self._goal.copy(),
                "observation": self._state.copy()}

    def reset(self, *, seed: Optional[int] = None, options=None):
        super().reset(seed=seed)
        self._state = self.np_random.integers(0, 2, self.num_bits).astype(np.int8)
        self._goal = self._state
        while np.array_equal(self._goal, self._state):
            self._goal = self.np_random.integers(0, 2, self.num_bits).astype(np.int8)
        self._steps = 0
        return self._observation(), {"is_success": 0.0}

    def step(self, action) -> Tuple[Dict[str, np.ndarray], float, bool, bool, Dict[str, Any]]:
        self._state = self._state.copy()
        self._state[int(action)] ^= 1
        self._steps += 1
        success = bool(np.array_equal(self._state, self._goal))
        truncated = not success and self._steps >= self.num_bits
        return (self._observation(), 0.0 if success else -1.0, success, truncated,
                {"is_success": float(success)})


def register() -> None:
    """Registers ``ENV_ID`` with gymnasium (once)."""
    if ENV_ID not in gym.registry:
        gym.register(ENV_ID, entry_point="rlf.environments.bit_flipping:BitFlippingEnv")
