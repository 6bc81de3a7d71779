"""Observation normalizers inside an algorithm: updated with each new unroll only after training
on it (a rollout and its training see the same statistics), identical in every network (target
networks included), sent to actors with the policy, fitted on an offline file, frozen in
evaluation, and restored exactly."""

import functools
from pathlib import Path

import numpy as np
import torch
from torch import nn

from rlf.algorithms import IQLAlgorithm, PPOAlgorithm, SACAlgorithm, TrainerConfig, build_training
from rlf.algorithms.training_loop import observation_normalizers
from rlf.environments import load
from rlf.networks import (ActorCriticNetwork, ActorNetwork, CriticNetwork,
                          DeterministicActorNetwork, MLPEncoder, ValueNetwork)
from rlf.trainers.evaluator import evaluate_episodes
from rlf.unrollers import SyncUnroller
from rlf.unrollers.actor_params import actor_state_dict

from tests.algorithms._resume import assert_resumes_exactly, sampled_experience
from tests.algorithms.test_ppo import _unrolled_experience

ADAM = functools.partial(torch.optim.Adam, lr=1e-3)
ALF_FILE = Path(__file__).resolve().parents[1] / "data" / "alf_pendulum_sac_replay_buffer.pt"
NORMALIZED_MLP = functools.partial(MLPEncoder, normalize_observations=True)


def _ppo_loop():
    env = load("CartPole-v1", 4, seed=0)
    config = TrainerConfig(unroll_length=16, num_updates_per_train_iter=2, mini_batch_size=2,
                           mini_batch_length=8, num_iterations=0, num_env_steps=10_000)
    alg = PPOAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       network_ctor=functools.partial(ActorCriticNetwork,
                                                      encoder_ctor=NORMALIZED_MLP,
                                                      shared_encoder=False),
                       optimizer=ADAM)
    return build_training(alg, SyncUnroller(env, alg)), env


def _ppo():
    loop, env = _ppo_loop()
    return loop.algorithm, env


def _stats(alg):
    return [(n.count.item(), n.mean.clone(), n.var.clone()) for n in observation_normalizers(alg)]


def test_a_rollout_and_the_training_on_it_standardise_with_the_same_statistics(monkeypatch):
    torch.manual_seed(0)
    loop, env = _ppo_loop()
    alg = loop.algorithm
    assert len(observation_normalizers(alg)) == 2  # the policy's and the value's encoders
    seen = {"rollout": [], "train": []}
    unrolls = []
    for hook, key in (("rollout_step", "rollout"), ("train_step", "train")):
        original = getattr(alg, hook)

        def recording(*args, _original=original, _key=key, **kwargs):
            seen[_key].append(int(observation_normalizers(alg)[0].count))
            return _original(*args, **kwargs)
        monkeypatch.setattr(alg, hook, recording)
    original_unroll = loop.unroll

    def recording_unroll(length):
        experience = original_unroll(length)
        unrolls.append(experience.time_step.observation.clone())
        return experience
    monkeypatch.setattr(loop, "unroll", recording_unroll)
    for it in range(3):
        seen["rollout"].clear()
        seen["train"].clear()
        loop.train_iter()
        # Iteration it acts and trains with the statistics of the it unrolls before it.
        assert set(seen["rollout"]) == set(seen["train"]) == {it * 16 * 4}
    data = torch.cat(unrolls).reshape(-1, 4).double().numpy()
    for count, mean, var in _stats(alg):
        assert count == 3 * 16 * 4
        np.testing.assert_allclose(mean.numpy(), data.mean(0), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(var.numpy(), data.var(0), rtol=1e-9)
    # Evaluation uses the statistics and leaves them as they are.
    eval_env = load("CartPole-v1", 2, seed=5)
    evaluate_episodes(alg, eval_env, 2)
    assert [s[0] for s in _stats(alg)] == [3 * 16 * 4] * 2
    eval_env.close()
    env.close()


def test_ppo_with_normalizers_resumes_exactly():
    assert_resumes_exactly(_ppo, 3, functools.partial(_unrolled_experience, steps=4))


def _sac():
    env = load("Pendulum-v1", 2, seed=0)
    config = TrainerConfig(unroll_length=1, mini_batch_size=16, mini_batch_length=2,
                           initial_collect_steps=20, replay_buffer_length=1000,
                           num_iterations=100)
    alg = SACAlgorithm(
        env.observation_spec(), env.action_spec(), env=env, config=config,
        actor_network_ctor=functools.partial(
            ActorNetwork, encoder_ctor=functools.partial(
                NORMALIZED_MLP, hidden=(32, 32), activation=nn.ReLU)),
        critic_network_ctor=functools.partial(CriticNetwork, hidden=(32, 32),
                                              normalize_observations=True),
        actor_optimizer=ADAM, critic_optimizer=ADAM, alpha_optimizer=ADAM)
    return alg, env


def test_every_network_holds_the_same_statistics_and_actors_get_the_policys():
    torch.manual_seed(0)
    alg, env = _sac()
    loop = build_training(alg, SyncUnroller(env, alg))
    # The actor, two critics and their two targets.
    assert len(observation_normalizers(alg)) == 5
    for _ in range(40):  # 20 updates, each followed by a soft target update
        loop.train_iter()
    stats = _stats(alg)
    for count, mean, var in stats:
        assert count == 40 * 2
        assert torch.equal(mean, stats[0][1]) and torch.equal(var, stats[0][2])
    sent = [k for k in actor_state_dict(alg) if "normalizer" in k]
    assert sent and all(k.startswith("_actor.") for k in sent), sent
    env.close()


def test_sac_with_normalizers_resumes_exactly():
    assert_resumes_exactly(_sac, 30, sampled_experience)


def test_a_purely_offline_run_fits_them_on_the_offline_file_once():
    env = load("Pendulum-v1", 1)
    config = TrainerConfig(unroll_length=0, offline_buffer_dir=str(ALF_FILE),
                           offline_normalized_actions=True, mini_batch_size=8,
                           mini_batch_length=2, num_iterations=3)
    normalized = functools.partial(ValueNetwork, normalize_observations=True)
    alg = IQLAlgorithm(env.observation_spec(), env.action_spec(), config=config,
                       value_network_ctor=normalized,
                       actor_network_ctor=functools.partial(DeterministicActorNetwork,
                                                            encoder_ctor=NORMALIZED_MLP),
                       actor_optimizer=ADAM, critic_optimizer=ADAM, value_optimizer=ADAM)
    loop = build_training(alg)
    data = loop.offline_replay_buffer.gather_all().time_step.observation
    data = data.reshape(-1, 3).double().numpy()
    for _ in range(3):
        loop.train_iter()
    assert len(observation_normalizers(alg)) == 2
    for count, mean, var in _stats(alg):
        assert count == len(data)
        np.testing.assert_allclose(mean.numpy(), data.mean(0), rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(var.numpy(), data.var(0), rtol=1e-9)
    env.close()

