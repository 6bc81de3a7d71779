"""The algorithm contract: ``RLAlgorithm``'s public members are the policy, its hooks, its specs,
the optimizer declarations and the counters; what rlf 0.1 had beside them still works for one
release, with a warning naming the replacement; code written for 0.1 trains as before."""

import functools
import warnings

import pytest
import torch
from torch import nn

from rlf.algorithms import DQNAlgorithm, RLAlgorithm, TrainerConfig, TrainingLoop
from rlf.algorithms.deprecated import DEPRECATED_MEMBERS
from rlf.data_structures import AlgStep, LossInfo
from rlf.environments import load
from rlf.unrollers import SyncUnroller
from rlf.utils import deprecation

CONTRACT = {
    # the policy
    "rollout_step", "predict_step", "train_step", "calc_loss",
    # the hooks
    "preprocess_experience", "mix_experience", "observe_for_replay", "after_update",
    "after_train_iter", "train_state_from_rollout_state", "get_initial_rollout_state",
    "get_initial_predict_state", "get_initial_train_state", "actor_modules", "offline_layout",
    # the specs
    "observation_spec", "action_spec", "reward_spec", "rollout_state_spec", "train_state_spec",
    "predict_state_spec",
    # optimizers and counters
    "add_optimizer", "is_due", "num_updates", "get_env_steps", "learner",
    # who it is
    "name", "on_policy", "actor_identity", "weighted_reward",
    # ALF's entry point, and the loop under it
    "train_iter", "training_loop",
}


def _public(cls):
    return ({n for n in dir(cls) if not n.startswith("_")} - set(dir(nn.Module))
            - DEPRECATED_MEMBERS.keys())


def test_rl_algorithm_has_32_public_members_and_the_old_ones_are_deprecated():
    assert _public(RLAlgorithm) == CONTRACT and len(CONTRACT) <= 32
    assert not CONTRACT & DEPRECATED_MEMBERS.keys()


def _dqn(**config):
    env = load("CartPole-v1", 2, seed=0)
    config = TrainerConfig(unroll_length=4, mini_batch_size=4, mini_batch_length=2,
                           initial_collect_steps=8, **config)
    torch.manual_seed(0)
    alg = DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    return alg, env


def test_every_deprecated_member_warns_once_naming_its_replacement():
    alg, env = _dqn()
    loop = TrainingLoop(alg, SyncUnroller(env, alg))
    loop.train_iter()
    for name, (replacement, _) in sorted(DEPRECATED_MEMBERS.items()):
        deprecation._warned.clear()
        with pytest.warns(DeprecationWarning) as record:
            getattr(alg, name)
        message = str(record[0].message)
        assert f".{name} is deprecated and will be removed in rlf 0.3; use {replacement}" \
            in message, message
        assert record[0].filename == __file__  # it points at the caller
    with pytest.raises(AttributeError, match="has no attribute 'no_such_member'"):
        alg.no_such_member  # noqa: B018
    assert not hasattr(alg, "no_such_member")
    env.close()


def test_a_script_written_for_0_1_trains_exactly_as_the_training_loop():
    deprecation._warned.clear()
    old, old_env = _dqn()
    with pytest.warns(DeprecationWarning, match="RLAlgorithm.set_unroller is deprecated"):
        old.set_unroller(SyncUnroller(old_env, old))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for _ in range(6):
            old.train_iter()
        old_steps, old_buffer = old.get_env_steps(), old.replay_buffer.total_size
    new, new_env = _dqn()
    loop = TrainingLoop(new, SyncUnroller(new_env, new))
    for _ in range(6):
        loop.train_iter()
    assert (new.get_env_steps(), loop.replay_buffer.total_size) == (old_steps, old_buffer)
    assert new.num_updates == old.num_updates > 0
    for (name, a), b in zip(old.state_dict().items(), new.state_dict().values()):
        if isinstance(a, torch.Tensor):
            assert torch.equal(a, b), name
    old_env.close()
    new_env.close()


class _OldStyle(RLAlgorithm):
    """An on-policy variant written for rlf 0.1: it overrides hooks that 0.2 replaced."""

    def __init__(self, env, config):
        super().__init__(env.observation_spec(), env.action_spec(), env=env, config=config,
                         is_on_policy=True,
                         optimizer=functools.partial(torch.optim.SGD, lr=0.1))
        self.w = nn.Parameter(torch.zeros(()))
        self.summarized = 0

    @property
    def trains_on_rollout_graph(self):
        return False  # always in epochs, through train_step

    def summarize_rollout(self, experience):
        self.summarized += 1

    def offline_replay_aliases(self):
        return {"rollout_info|action": "action"}

    def rollout_step(self, time_step, state):
        action = torch.zeros(time_step.step_type.shape, dtype=torch.int64)
        return AlgStep(output=action, info=())

    def train_step(self, time_step, state, rollout_info):
        return AlgStep(output=(), info=self.w * time_step.reward)

    def calc_loss(self, info):
        return LossInfo(loss=info)


def test_hooks_of_0_1_that_moved_are_still_called_with_a_warning():
    deprecation._warned.clear()
    env = load("CartPole-v1", 2, seed=0)
    alg = _OldStyle(env, TrainerConfig(unroll_length=4))
    with pytest.warns(DeprecationWarning, match="overriding RLAlgorithm.trains_on_rollout_graph "
                                                "is deprecated"):
        loop = TrainingLoop(alg, SyncUnroller(env, alg))
    assert loop.data_path.name == "unroll_epochs"  # the override decided it
    with pytest.warns(DeprecationWarning, match="overriding RLAlgorithm.summarize_rollout"):
        loop.train_iter()
    assert alg.summarized == 1 and alg.num_updates == 1
    with pytest.warns(DeprecationWarning, match="overriding RLAlgorithm.offline_replay_aliases"):
        assert alg._rlf_offline_layout().aliases == {"rollout_info|action": "action"}
    env.close()
