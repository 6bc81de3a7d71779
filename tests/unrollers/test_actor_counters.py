"""Counters reach the actors: a ``rollout_step`` in an actor process or a Ray actor reads the
learner's ``num_updates``, optimizer steps, environment steps and iteration as of the parameters
it acts with (in the reproducible mode with lag 0: those after the previous iteration)."""

import gin
import pytest
import torch
from torch import nn

from rlf.algorithms import RLAlgorithm, TrainerConfig
from rlf.data_structures import AlgStep, LossInfo
from rlf.environments import load
from rlf.trainers import Trainer
from tests.algorithms._learners import learner_of

ENV = load("CartPole-v1", 1)
OBS, ACT = ENV.observation_spec(), ENV.action_spec()
ENV.close()


class CounterRecorder(RLAlgorithm):
    """An off-policy user algorithm whose ``rollout_step`` records the counters it sees, as a
    TD3 variant's start actions read ``num_updates``; the learner logs its own after each
    iteration."""

    def __init__(self, observation_spec=OBS, action_spec=ACT, **kw):
        super().__init__(observation_spec, action_spec, is_on_policy=False,
                         optimizer=lambda p: torch.optim.SGD(p, lr=0.01), **kw)
        self.w = nn.Parameter(torch.ones(()))
        self.learner_log = []

    def rollout_step(self, time_step, state):
        b = time_step.step_type.shape[0]
        seen = torch.tensor([self.num_updates, learner_of(self).optimizer_steps["default"],
                             self.get_env_steps(), learner_of(self).counters.train_iter_num])
        return AlgStep(output=torch.zeros(b, dtype=torch.int64),
                       info={"seen": seen.expand(b, 4).clone()})

    def train_step(self, time_step, state, rollout_info):
        return AlgStep(output=(), state=state, info=self.w * time_step.reward)

    def calc_loss(self, info):
        return LossInfo(loss=info ** 2)

    def after_train_iter(self, root_inputs, rollout_info=None):
        self.learner_log.append((rollout_info["seen"][0, 0].tolist(),
                                 [self.num_updates, learner_of(self).optimizer_steps["default"],
                                  self.get_env_steps(), learner_of(self).counters.train_iter_num]))


@pytest.fixture
def cartpole():
    gin.bind_parameter("load.env_name", "CartPole-v1")
    gin.bind_parameter("load.num_envs", 2)
    yield
    gin.clear_config()


@pytest.mark.parametrize("use_ray", [False, True], ids=["process", "ray"])
def test_rollout_step_on_an_actor_reads_the_learners_counters(tmp_path, use_ray, cartpole):
    if use_ray:
        pytest.importorskip("ray")
    config = TrainerConfig(
        algorithm_ctor=CounterRecorder, random_seed=0, torch_num_threads=1, unroll_length=4,
        num_iterations=6, mini_batch_size=2, mini_batch_length=2, initial_collect_steps=8,
        async_unroll=True, num_actors=1, deterministic=True, policy_lag=0, evaluate=False,
        summary_interval=1, **(dict(use_ray=True, ray_num_cpus_per_actor=0.5) if use_ray else {}))
    trainer = Trainer(config, tmp_path, progress=False)
    trainer.train()
    log = trainer.algorithm.learner_log
    seen = [s for s, _ in log]
    learner = [mine for _, mine in log]
    # unroll k acts with the parameters published after iteration k - 1
    assert seen == [[0, 0, 0, 0]] + learner[:-1]
    assert learner[-1][0] > 0 and learner[-1][2] > 0  # it trained and stepped
