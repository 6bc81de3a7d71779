"""SyncUnroller: time steps reach ``rollout_step`` on the algorithm's device."""

import pytest
import torch
from torch import nn

from rlf.data_structures import AlgStep
from rlf.environments import load
from rlf.unrollers import SyncUnroller


class DeviceRecorder(nn.Module):
    """Records the device of each observation it is given; always pushes left (on CPU)."""

    def __init__(self, device=None):
        super().__init__()
        if device is not None:
            self.w = nn.Parameter(torch.ones((), device=device))
        self.seen = []

    def get_initial_rollout_state(self, batch_size):
        return ()

    def rollout_step(self, time_step, state):
        self.seen.append(time_step.observation.device.type)
        return AlgStep(output=torch.zeros(time_step.observation.shape[0], dtype=torch.long),
                       state=(), info=())


@pytest.mark.parametrize("param_device, unroller_device, expected", [
    ("meta", None, "meta"),   # follows the algorithm (a learner moved to CUDA unrolls there)
    ("meta", "cpu", "cpu"),   # an explicit device wins
    (None, None, "cpu"),      # no parameters: CPU
])
def test_time_steps_reach_rollout_step_on_the_algorithms_device(param_device, unroller_device,
                                                                 expected):
    env = load("CartPole-v1", 2, seed=0)
    alg = DeviceRecorder(param_device)
    experience = SyncUnroller(env, alg, device=unroller_device).unroll(3)
    assert alg.seen == [expected] * 3
    assert experience.time_step.observation.shape[:2] == (3, 2)
    env.close()
