"""``NanRewardCartPole-v0``: CartPole whose fifth step in each copy returns a NaN reward, for
the tests of what rlf does with an environment that breaks its contract (gin imports this
module in the conf, as a user imports their own environments)."""

import gymnasium as gym


class NanRewardCartPole(gym.Wrapper):
    """CartPole-v1 whose reward is NaN at the fifth step after a reset."""

    def __init__(self):
        super().__init__(gym.make("CartPole-v1"))
        self._t = 0

    def reset(self, **kwargs):
        self._t = 0
        return self.env.reset(**kwargs)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._t += 1
        return (observation, float("nan") if self._t == 5 else reward, terminated, truncated,
                info)


if "NanRewardCartPole-v0" not in gym.registry:
    gym.register("NanRewardCartPole-v0", entry_point=NanRewardCartPole)
