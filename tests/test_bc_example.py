"""examples/bc.py: a Box action reaches the environment inside its bounds, while the
sampled action itself is what rollout_step records."""

import pytest
import torch

from examples.bc import BehaviourCloning
from rlf.environments import load

pytest.importorskip("mujoco", reason="HalfCheetah-v5 needs the mujoco extra: "
                                     "pip install -e '.[mujoco]'")


def test_box_actions_reach_the_environment_clipped_to_the_bounds():
    env = load("HalfCheetah-v5", 2, seed=0)
    try:
        alg = BehaviourCloning(env.observation_spec(), env.action_spec())
        mean = torch.tensor([3.0, -3.0, 0.5, 3.0, -0.5, -3.0])
        with torch.no_grad():  # a mean far outside [-1, 1], as off the data's states
            alg._head.fc.weight.zero_()
            alg._head.fc.bias.copy_(mean)
            time_step = env.reset()
            greedy = alg.predict_step(time_step, ()).output
            step = alg.rollout_step(time_step, ())
        assert torch.equal(greedy, torch.tensor([[1.0, -1.0, 0.5, 1.0, -0.5, -1.0]] * 2))
        assert step.output.abs().max() <= 1.0
        sampled = step.info["action"]
        assert sampled.abs().max() > 1.0  # recorded as drawn, not clipped
        assert torch.equal(step.output, sampled.clamp(-1.0, 1.0))
        # The same clamped control, but HalfCheetah charges 0.1 * sum(a^2) on the action it
        # is given: 0.45 for the clipped action, 3.65 for the unclipped mean
        reward = env.step(greedy).reward
        unclipped = load("HalfCheetah-v5", 2, seed=0)
        unclipped.reset()
        unclipped_reward = unclipped.step(mean.expand(2, 6)).reward
        unclipped.close()
        assert torch.allclose(reward - unclipped_reward, torch.full((2,), 3.65 - 0.45),
                              atol=1e-4)
    finally:
        env.close()
