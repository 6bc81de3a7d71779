"""The screen at the game's own size, for recording an Atari episode.

ale-py's ``AtariVectorEnv`` gives only the preprocessed observation (e.g. 84x84 grayscale)
and renders nothing. ``NativeFrames`` runs a second copy of the game, seeded alike and made
with the same settings but observing the full RGB screen (210x160x3), and steps it with the
same actions: the emulator, its sticky actions and its no-op starts depend on the seed and
the actions only, so both play the same episode, and the copy's newest frame is the screen
the agent saw, before downscaling.
"""

from __future__ import annotations

from typing import Any, Optional

import numpy as np

from rlf.data_structures import TimeStep

__all__ = ["NativeFrames", "NATIVE_SCREEN"]

#: ALE's screen: height, width.
NATIVE_SCREEN = (210, 160)


class NativeFrames:
    """A batched environment (``VectorEnvironment``'s interface, forwarded to ``env``) whose
    ``reset``/``step`` also step ``twin``, the same game at native size; ``frame()`` is the
    twin's newest screen.

    Args:
        env: the environment the agent plays (one game: ``batch_size`` 1).
        twin: the same game, seed and settings, with full-size RGB observations and one
            stacked frame (``load(..., img_height=210, img_width=160, grayscale=False,
            frame_stack=1, maxpool=False)``).

    Raises:
        ValueError: if ``env`` has more than one game, or ``twin``'s frames are not
            ``[1, 1, H, W, 3]``.
    """

    def __init__(self, env, twin):
        if env.batch_size != 1 or twin.batch_size != 1:
            raise ValueError("NativeFrames records one game: batch_size must be 1")
        shape = tuple(twin.observation_spec().shape)
        if len(shape) != 4 or shape[0] != 1 or shape[-1] != 3:
            raise ValueError(f"NativeFrames: the twin's observations must be one RGB frame "
                             f"[1, H, W, 3], got {list(shape)}")
        self._env = env
        self._twin = twin
        self._twin_step: Optional[TimeStep] = None
        self.diverged: bool = False  # the twin's episode ended where the agent's did not

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    def reset(self) -> TimeStep:
        """Resets both; returns the agent's first ``TimeStep``."""
        self._twin_step = self._twin.reset()
        return self._env.reset()

    def step(self, action) -> TimeStep:
        """Steps both with ``action``; returns the agent's ``TimeStep``."""
        time_step = self._env.step(action)
        self._twin_step = self._twin.step(action)
        if not np.array_equal(time_step.step_type.numpy(), self._twin_step.step_type.numpy()):
            self.diverged = True
        return time_step

    @property
    def twin_time_step(self) -> Optional[TimeStep]:
        """The copy's newest ``TimeStep`` (its ``env_info`` has the same rewards and lives as
        the agent's while both play the same episode)."""
        return self._twin_step

    def frame(self) -> Optional[np.ndarray]:
        """The twin's newest screen, ``[H, W, 3]`` uint8 (None before ``reset``)."""
        if self._twin_step is None:
            return None
        return np.ascontiguousarray(self._twin_step.observation[0, -1].numpy(), dtype=np.uint8)

    def close(self) -> None:
        """Closes both."""
        self._twin.close()
        self._env.close()
