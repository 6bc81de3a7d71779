"""A user's off-policy actor-critic for discrete actions, as a researcher would write it: its
networks in ``self._actor`` and ``self._critic``, a target critic, and counters of its own
(``self._num_updates``, ``self._train_iter_num``, a checkpointed ``_updates`` buffer), on the
public API only. The support matrix trains it on every path."""

import gin
import torch
from torch import nn

from rlf.algorithms import RLAlgorithm
from rlf.algorithms.target_network import TargetUpdater, make_target_network
from rlf.data_structures import AlgStep, LossInfo
from rlf.nest.utils import batch_apply
from rlf.utils import distributed


def _mlp(n_in: int, n_out: int) -> nn.Module:
    return nn.Sequential(nn.Linear(n_in, 32), nn.Tanh(), nn.Linear(32, n_out))


@gin.configurable
class UserActorCritic(RLAlgorithm):
    """Q-learning critic ``Q(s, a)`` and a softmax actor trained towards ``argmax Q``."""

    def __init__(self, observation_spec, action_spec, gamma=0.99, optimizer=None,
                 name="UserActorCritic", **kwargs):
        super().__init__(observation_spec, action_spec, is_on_policy=False, name=name,
                         optimizer=optimizer, **kwargs)
        n_obs, n_act = observation_spec.shape[0], action_spec.num_values
        self._actor, self._critic = _mlp(n_obs, n_act), _mlp(n_obs, n_act)
        self._target_critic = make_target_network(self._critic)
        self._target_updater = TargetUpdater([self._critic], [self._target_critic], tau=0.05)
        self._gamma = gamma
        self._num_updates = 0
        self._train_iter_num = 0
        self.register_buffer("_updates", torch.zeros((), dtype=torch.int64))

    def predict_step(self, time_step, state):
        return AlgStep(output=self._actor(time_step.observation).argmax(-1), state=state)

    def rollout_step(self, time_step, state):
        probs = torch.softmax(self._actor(time_step.observation), -1)
        action = distributed.categorical_sample(probs)  # one learner's draw with N learners
        return AlgStep(output=action, state=state, info={"action": action})

    def train_step(self, time_step, state, rollout_info):
        return AlgStep(output=(), state=state, info={
            "observation": time_step.observation, "action": rollout_info["action"],
            "reward": time_step.reward, "discount": time_step.discount})

    def calc_loss(self, info):
        obs = info["observation"]
        q = batch_apply(self._critic, obs[:-1])
        q_taken = q.gather(-1, info["action"][:-1, :, None]).squeeze(-1)
        with torch.no_grad():
            next_q = batch_apply(self._target_critic, obs[1:]).max(-1).values
            greedy = q.argmax(-1)
        target = info["reward"][1:] + self._gamma * info["discount"][1:] * next_q
        logits = batch_apply(self._actor, obs[:-1])
        actor = nn.functional.cross_entropy(logits.flatten(0, 1), greedy.flatten(),
                                            reduction="none").view(greedy.shape)
        return LossInfo(loss=(q_taken - target) ** 2 + actor)

    def after_update(self, root_inputs, info):
        self._target_updater()
        self._num_updates += 1
        self._updates += 1

    def after_train_iter(self, root_inputs, rollout_info=None):
        self._train_iter_num += 1
