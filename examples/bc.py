"""Behaviour cloning: an offline variant written as a subclass of ``RLAlgorithm``.

Learns ``pi(a|x)`` by maximising the log-likelihood of recorded actions from an offline replay
checkpoint (``TrainerConfig.offline_buffer_dir``), with ``TrainerConfig.unroll_length = 0``
(no environment step). Discrete (CartPole) and Box (Pendulum, HalfCheetah) actions both work;
a Box action is clipped to its bounds before it reaches the environment (``ClipToBounds``).
See ``examples/bc_cartpole.gin`` and the README's "Offline replay" section.
"""

import gin
from torch import nn

from rlf.algorithms import RLAlgorithm
from rlf.data_structures import AlgStep, LossInfo, ReplacingMask, StepType
from rlf.networks import ClipToBounds, MLPEncoder, make_policy_head
from rlf.utils.errors import UserError


@gin.configurable
class BehaviourCloning(RLAlgorithm):
    """Maximum-likelihood imitation of the recorded actions.

    Args:
        hidden: hidden layer sizes of the policy MLP.
        Others: see ``RLAlgorithm``.

    Raises:
        UserError: for a ``TrainerConfig`` with ``unroll_length > 0``: online experience
            holds the policy's own actions, not recorded ones.
    """

    def __init__(self, observation_spec, action_spec, hidden=(64, 64), name="BC", **kwargs):
        super().__init__(observation_spec, action_spec, is_on_policy=False, name=name,
                         **kwargs)
        if self._config is not None and self._config.unroll_length:  # its own actions
            raise UserError(f"{name} learns the recorded actions of an offline replay file "
                            f"only: set TrainerConfig.unroll_length = 0 and TrainerConfig."
                            f"offline_buffer_dir (unroll_length is "
                            f"{self._config.unroll_length})")
        self._encoder = MLPEncoder(observation_spec, hidden, nn.ReLU)
        self._head = make_policy_head(self._encoder.output_size, action_spec)
        # A Normal's mean or sample may leave the Box: MuJoCo clamps the control but
        # charges its cost on the action as given.
        self._to_env = ClipToBounds(action_spec)

    def rollout_step(self, time_step, state):
        # The info records the action: offline, train_step gets the file's recorded one there.
        params = self._head(self._encoder(time_step.observation))
        action = self._head.sample(params)
        return AlgStep(output=self._to_env(action), info={"action": action})

    def predict_step(self, time_step, state):
        params = self._head(self._encoder(time_step.observation))
        return AlgStep(output=self._to_env(self._head.sample(params, greedy=True)))

    def train_step(self, time_step, state, rollout_info):
        params = self._head(self._encoder(time_step.observation))
        log_prob = self._head.log_prob(params, rollout_info["action"])
        # Every step whose action reached the environment counts (not a LAST one), also the
        # last of a sampled sequence: the loop's default mask (steps that start a transition
        # inside the sequence) would leave nothing of sequences of one step.
        executed = (time_step.step_type != StepType.LAST).float()
        return AlgStep(info={"log_prob": log_prob, "executed": executed})

    def calc_loss(self, info):
        return LossInfo(loss=-info["log_prob"], mask=ReplacingMask(info["executed"]),
                        extra={"neg_log_likelihood": -info["log_prob"]})
