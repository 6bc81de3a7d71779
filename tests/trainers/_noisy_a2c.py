"""Imported by a test's conf: the A2C example drawing its actions and a noise term of its loss
with rlf.utils.distributed's batch draws, trained on the rollout's own graph, where
``calc_loss`` gets time-major ``[T, B]`` infos."""

import gin
import torch

from examples.a2c import A2C, A2CInfo
from rlf.data_structures import LossInfo
from rlf.utils import distributed


@gin.configurable
class NoisyA2C(A2C):
    """A2C with actions from ``categorical_sample`` and rewards perturbed in ``calc_loss``."""

    def _forward(self, time_step, action=None):
        if action is None:
            logits = self._actor(time_step.observation.flatten(1).float())
            action = distributed.categorical_sample(torch.softmax(logits, -1))
        return super()._forward(time_step, action)

    def calc_loss(self, info: A2CInfo) -> LossInfo:
        noise = 0.5 * distributed.randn_like(info.reward)  # [T, B]: a time-major draw
        return super().calc_loss(info._replace(reward=info.reward + noise))
