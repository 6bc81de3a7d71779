"""A minimal research variant on the public API: one-step Q-learning with a target network
(Mnih et al. 2015) and epsilon-greedy exploration, trained from the replay buffer.

    python -m rlf.bin.train --conf examples/minimal_dqn_cartpole.gin
"""

import gin
import torch
from torch import nn

from rlf.algorithms import RLAlgorithm
from rlf.algorithms.data_needs import TRANSITIONS
from rlf.algorithms.target_network import TargetUpdater, make_target_network
from rlf.data_structures import AlgStep, LossInfo
from rlf.nest.utils import batch_apply
from rlf.utils import distributed


@gin.configurable
class MinimalDQN(RLAlgorithm):
    """Q-learning on single transitions (``TrainerConfig.mini_batch_length = 2``)."""

    def __init__(self, observation_spec, action_spec, epsilon=0.1, gamma=0.99,
                 name="MinimalDQN", **kwargs):
        # A loss over transitions: sequences of 2 steps at least (checked before the run).
        super().__init__(observation_spec, action_spec, is_on_policy=False, name=name,
                         data_needs=TRANSITIONS, **kwargs)
        self.num_actions = action_spec.num_values  # a Discrete action: 0 .. n - 1
        self.q = nn.Sequential(nn.Linear(observation_spec.shape[0], 64), nn.ReLU(),
                               nn.Linear(64, self.num_actions))
        self.target_q = make_target_network(self.q)
        self.update_target = TargetUpdater([self.q], [self.target_q], tau=0.01)
        self.epsilon, self.gamma = epsilon, gamma

    def predict_step(self, time_step, state):  # greedy, for evaluation
        return AlgStep(output=self.q(time_step.observation).argmax(-1), state=state)

    def rollout_step(self, time_step, state):  # [B] time step -> [B] actions
        greedy = self.q(time_step.observation).argmax(-1)
        # Batch draws (rlf.utils.distributed): N learners then act as one learner would.
        explore = distributed.rand_like(greedy.float()) < self.epsilon
        action = torch.where(explore, distributed.randint_like(greedy, self.num_actions), greedy)
        return AlgStep(output=action, state=state, info={"action": action})

    def train_step(self, time_step, state, rollout_info):  # a replayed step, for calc_loss
        return AlgStep(output=(), state=state, info={
            "observation": time_step.observation, "action": rollout_info["action"],
            "reward": time_step.reward, "discount": time_step.discount})

    def calc_loss(self, info):  # [T, B] infos -> a loss over the [T-1, B] transitions
        q = batch_apply(self.q, info["observation"][:-1])
        q = q.gather(-1, info["action"][:-1, :, None]).squeeze(-1)
        with torch.no_grad():
            next_q = batch_apply(self.target_q, info["observation"][1:]).max(-1).values
        target = info["reward"][1:] + self.gamma * info["discount"][1:] * next_q
        return LossInfo(loss=(q - target) ** 2, extra={"q": q.detach()})

    def after_update(self, root_inputs, info):  # after each gradient update
        self.update_target()
