"""``NanRewardCartPole-v0``: CartPole whose fifth step in each copy returns a NaN reward
(``NanRewardInEvaluationCartPole-v0``: in the evaluation environment only), for the tests of
what rlf does with an environment that breaks its contract (gin imports this module in the
conf, as a user imports their own environments)."""

import gymnasium as gym


class NanRewardCartPole(gym.Wrapper):
    """CartPole-v1 whose reward is NaN at the fifth step after a reset.

    Args:
        in_evaluation_only: only in copies seeded as the ``Trainer`` seeds its evaluation
            environment (a seed over 1,000,000).
    """

    def __init__(self, in_evaluation_only=False):
        super().__init__(gym.make("CartPole-v1"))
        self._t, self._nan = 0, not in_evaluation_only

    def reset(self, *, seed=None, **kwargs):
        self._t = 0
        if seed is not None and seed > 1_000_000:
            self._nan = True
        return self.env.reset(seed=seed, **kwargs)

    def step(self, action):
        observation, reward, terminated, truncated, info = self.env.step(action)
        self._t += 1
        nan = self._nan and self._t == 5
        return observation, float("nan") if nan else reward, terminated, truncated, info


for _id, _kwargs in (("NanRewardCartPole-v0", {}),
                     ("NanRewardInEvaluationCartPole-v0", {"in_evaluation_only": True})):
    if _id not in gym.registry:
        gym.register(_id, entry_point=NanRewardCartPole, kwargs=_kwargs)
