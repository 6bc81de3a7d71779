"""Environments of a user's own, for the Python API's tests: a ``gymnasium.Env`` subclass with
a Dict observation and a Discrete action, one with a Box observation and a Box action, and
a function that returns one; all at the top of an importable module, as a user's package
would have them."""

import gymnasium as gym
import numpy as np


class Corridor(gym.Env):
    """Walk right along a corridor of 6 cells (Dict observation: the position and a flag of
    the goal's side; Discrete(2) action: left or right); reward 1 at the end, which ends it,
    -0.01 a step; at most 30 steps."""

    def __init__(self, length: int = 6, render_mode=None):
        self.length = length
        self.observation_space = gym.spaces.Dict({
            "position": gym.spaces.Box(0.0, 1.0, (1,), np.float32),
            "side": gym.spaces.Discrete(2)})
        self.action_space = gym.spaces.Discrete(2)
        self._cell, self._t = 0, 0

    def _observation(self):
        return {"position": np.array([self._cell / self.length], np.float32), "side": 1}

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._cell, self._t = 0, 0
        return self._observation(), {}

    def step(self, action):
        self._cell = max(0, self._cell + (1 if int(action) == 1 else -1))
        self._t += 1
        done = self._cell >= self.length
        return (self._observation(), 1.0 if done else -0.01, done, self._t >= 30, {})


class Target(gym.Env):
    """Steer a point to 0 (Box(2) observation and action); reward -|x| a step, 20 steps."""

    def __init__(self, render_mode=None):
        self.observation_space = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self._x, self._t = np.zeros(2, np.float32), 0

    def reset(self, seed=None, options=None):
        super().reset(seed=seed)
        self._x = self.np_random.uniform(-1, 1, 2).astype(np.float32)
        self._t = 0
        return self._x.copy(), {}

    def step(self, action):
        self._x = np.clip(self._x + 0.2 * np.asarray(action, np.float32), -2, 2)
        self._t += 1
        return self._x.copy(), -float(np.abs(self._x).sum()), False, self._t >= 20, {}


def short_corridor():
    """A function that returns an environment: a corridor of 3 cells."""
    return Corridor(length=3)


# the id gymnasium's form names: "tests.api._envs:Corridor-v0" imports this module first
gym.register("Corridor-v0", entry_point="tests.api._envs:Corridor")
