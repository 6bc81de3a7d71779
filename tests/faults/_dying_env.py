"""``DyingCartPole-v0``: CartPole whose copy seeded 8 (the first environment of learner 1 when a
16-environment run with seed 0 is split between two learners) kills its own process with
SIGKILL at its 30th step, as the kernel's out-of-memory killer would: a learner that dies
without a word (gin imports this module in the conf)."""

import os
import signal

import gymnasium as gym


class DyingCartPole(gym.Wrapper):
    """CartPole-v1 whose copy seeded ``8`` kills its process at its 30th step."""

    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        self._t, self._dies = 0, False

    def reset(self, *, seed=None, **kwargs):
        if seed is not None:
            self._dies = seed == 8
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action):
        self._t += 1
        if self._dies and self._t == 30:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.env.step(action)


if "DyingCartPole-v0" not in gym.registry:
    gym.register("DyingCartPole-v0", entry_point=DyingCartPole, max_episode_steps=500)
