"""Offline data without overrides: an algorithm that records its action in ``rollout_info``
gets the recorded action in ``train_step`` from ALF's file (``rollout_info|rl|action``) and
from rlf's own files; a purely offline run writes its evaluations against updates."""

import functools
from pathlib import Path
from typing import Any, NamedTuple

import torch

from rlf.algorithms import RLAlgorithm, SACAlgorithm, TD3Algorithm, TrainerConfig, build_training
from rlf.data_structures import AlgStep, LossInfo
from rlf.environments import load
from rlf.networks import MLPEncoder
from rlf.replay.offline import export_replay_buffer, load_replay_checkpoint
from rlf.trainers import Trainer
from rlf.utils.tensorboard_reader import read_scalar_tags

ALF_FILE = Path(__file__).resolve().parents[1] / "data" / "alf_pendulum_sac_replay_buffer.pt"
ADAM = functools.partial(torch.optim.Adam, lr=1e-3)


class Info(NamedTuple):
    action: Any = ()


class Recorder(RLAlgorithm):
    """A user's algorithm with no offline override: it records its action and keeps every
    action ``train_step`` is given."""

    def __init__(self, observation_spec, action_spec, **kw):
        super().__init__(observation_spec, action_spec, is_on_policy=False,
                         optimizer=ADAM, name="Recorder", **kw)
        self._net = MLPEncoder(observation_spec, (8,))
        self.seen = []

    def rollout_step(self, time_step, state):
        action = torch.zeros(time_step.observation.shape[0], 1)
        return AlgStep(output=action, state=state, info=Info(action=action))

    def train_step(self, time_step, state, rollout_info):
        self.seen.append(rollout_info.action.detach().clone())
        return AlgStep(output=rollout_info.action, state=state,
                       info=self._net(time_step.observation).sum(-1))

    def calc_loss(self, info):
        return LossInfo(loss=info ** 2)


def _offline_config(files, **kw):
    return TrainerConfig(unroll_length=0, offline_buffer_dir=str(files), mini_batch_size=16,
                         mini_batch_length=2, num_iterations=3, **kw)


def _file_actions(path, key, scale=1.0):
    data = load_replay_checkpoint(path)
    return {round(float(a) * scale, 5) for a in data[key].flatten()}


def test_the_recorded_action_reaches_train_step_from_alfs_file():
    env = load("Pendulum-v1", 1)
    # ALF records Pendulum's actions normalised to [-1, 1]: rescaled to [-2, 2] on loading.
    config = functools.partial(_offline_config, ALF_FILE, offline_normalized_actions=True)
    alg = Recorder(env.observation_spec(), env.action_spec(), config=config())
    loop = build_training(alg)
    for _ in range(3):
        loop.train_iter()
    seen = torch.cat([a.flatten() for a in alg.seen])
    assert seen.numel() == 3 * 16 * 2 and bool((seen != 0).any())  # not the policy's zeros
    recorded = _file_actions(ALF_FILE, "rollout_info|rl|action", scale=2.0)
    assert {round(float(a), 5) for a in seen} <= recorded
    # SAC and TD3 read the same file with no override of theirs.
    for ctor, kw in ((SACAlgorithm, dict(alpha_optimizer=ADAM)), (TD3Algorithm, {})):
        other = ctor(env.observation_spec(), env.action_spec(), actor_optimizer=ADAM,
                     critic_optimizer=ADAM, config=config(), **kw)
        loop = build_training(other)
        data = loop.offline_replay_buffer.gather_all()
        assert torch.equal(data.rollout_info.action, data.action)
        assert loop.train_iter() > 0
    env.close()


def test_the_recorded_action_reaches_train_step_from_an_rlf_file_and_offline_eval_is_per_update(
        tmp_path):
    # A short TD3 run saves its buffer; SAC then trains on the exported file purely offline.
    import gin
    gin.parse_config("load.env_name = 'Pendulum-v1'\nload.num_envs = 1")
    try:
        online = TrainerConfig(
            algorithm_ctor=functools.partial(TD3Algorithm, actor_optimizer=ADAM,
                                             critic_optimizer=ADAM),
            unroll_length=1, mini_batch_size=8, mini_batch_length=2, initial_collect_steps=40,
            replay_buffer_length=200, num_iterations=60, save_replay_buffer=True,
            checkpoint_interval=60)
        Trainer(online, tmp_path / "td3", progress=False).train()
        path = export_replay_buffer(str(tmp_path / "td3"), str(tmp_path / "td3.pt"))
        config = _offline_config(
            path, algorithm_ctor=functools.partial(Recorder), evaluate=True, eval_interval=3,
            num_eval_episodes=1, summary_interval=1)
        trainer = Trainer(config, tmp_path / "offline", progress=False)
        trainer.train()
    finally:
        gin.clear_config()
    seen = torch.cat([a.flatten() for a in trainer.algorithm.seen])
    assert {round(float(a), 5) for a in seen} <= _file_actions(path, "rollout_info|action")
    tags = read_scalar_tags(tmp_path / "offline" / "train",
                            ["Eval_vs_Updates/AverageReturn",
                             "Eval_vs_EnvironmentSteps/AverageReturn"])
    assert tags["Eval_vs_Updates/AverageReturn"][0] == [3]  # 3 iterations of one update
    assert tags["Eval_vs_EnvironmentSteps/AverageReturn"][0] == []
