"""A GPU-ready learner, checked without a GPU: the learner of each algorithm trains on the
``meta`` device (tensors with shapes and devices but no data) from experience collected on
CPU. Any tensor the learner makes on CPU and combines with its own raises there (as it would
on CUDA), and afterwards every parameter, buffer and optimizer state is on the learner's
device. With ``RLF_TEST_DEVICE`` set (``cuda``; ``bench/device_checks.py`` sets it) or a
CUDA device present, the same tests also train on that device."""

import functools
import os

import pytest
import torch

from rlf import nest
from rlf.algorithms import (DQNAlgorithm, ImpalaAlgorithm, PPOAlgorithm, R2D2Algorithm,
                            SACAlgorithm, TD3Algorithm, TrainerConfig, build_training)
from rlf.environments import load
from rlf.networks import (ActorCriticNetwork, ActorNetwork, CriticNetwork, MLPEncoder,
                          RecurrentQNetwork)
from rlf.unrollers import SyncUnroller
from rlf.unrollers.actor_params import actor_state_dict

ADAM = functools.partial(torch.optim.Adam, lr=1e-3)

CASES = {
    "impala": ("CartPole-v1", ImpalaAlgorithm, dict(optimizer=ADAM, gradient_clipping=0.5),
               dict(unroll_length=8, whole_replay_buffer_training=True,
                    clear_replay_buffer=True, mini_batch_size=2)),
    # experience replay: sequences from a CPU memory join each mini-batch on the device
    "impala_replay": ("CartPole-v1", ImpalaAlgorithm,
                      dict(optimizer=ADAM, experience_replay_fraction=0.5),
                      dict(unroll_length=8, whole_replay_buffer_training=True,
                           clear_replay_buffer=True, mini_batch_size=2,
                           mini_batch_length=4)),
    "ppo": ("CartPole-v1", PPOAlgorithm, dict(optimizer=ADAM, value_clipping=0.2),
            dict(unroll_length=8, num_updates_per_train_iter=2, mini_batch_size=16,
                 mini_batch_length=1)),
    "sac": ("Pendulum-v1", SACAlgorithm, dict(actor_optimizer=ADAM, critic_optimizer=ADAM,
                                              alpha_optimizer=ADAM),
            dict(unroll_length=8, mini_batch_size=8, mini_batch_length=2)),
    # observation normalizers updated from CPU experience, in the policy and the critics
    "sac_normalized": ("Pendulum-v1", SACAlgorithm, dict(
        actor_optimizer=ADAM, critic_optimizer=ADAM, alpha_optimizer=ADAM,
        actor_network_ctor=functools.partial(ActorNetwork, encoder_ctor=functools.partial(
            MLPEncoder, normalize_observations=True)),
        critic_network_ctor=functools.partial(CriticNetwork, normalize_observations=True)),
        dict(unroll_length=8, mini_batch_size=8, mini_batch_length=2)),
    "td3": ("Pendulum-v1", TD3Algorithm, dict(actor_optimizer=ADAM, critic_optimizer=ADAM),
            dict(unroll_length=8, mini_batch_size=8, mini_batch_length=2)),
    "dqn": ("CartPole-v1", DQNAlgorithm, dict(optimizer=ADAM, n_step=3, gradient_clipping=1.0),
            # (prioritised replay copies the priorities to the CPU buffer: no data on meta)
            dict(unroll_length=8, mini_batch_size=8, mini_batch_length=4)),
    "r2d2": ("CartPole-v1", R2D2Algorithm,
             dict(optimizer=ADAM, n_step=2, q_network_ctor=functools.partial(
                 RecurrentQNetwork, lstm_size=8)),
             dict(unroll_length=8, mini_batch_size=2, mini_batch_length=6, burn_in_steps=2,
                  use_rollout_state=True)),
    "ppo_lstm": ("CartPole-v1", PPOAlgorithm,
                 dict(optimizer=ADAM, network_ctor=functools.partial(
                     ActorCriticNetwork, lstm_size=8, shared_encoder=False)),
                 dict(unroll_length=8, num_updates_per_train_iter=2, mini_batch_size=2,
                      mini_batch_length=8, use_rollout_state=True)),
}


def _build(name, device):
    env_name, ctor, kwargs, config = CASES[name]
    env = load(env_name, 2, seed=0)
    trainer_config = TrainerConfig(num_iterations=10, **config)
    # past RunConfig's check, which refuses 'meta' to users
    object.__setattr__(trainer_config.run, "device", device)
    alg = ctor(env.observation_spec(), env.action_spec(), env=env, config=trainer_config,
               **kwargs)
    alg.to(device)
    return build_training(alg, SyncUnroller(env, alg)), env


#: The learner's devices: meta always, and a real one when there is one.
DEVICES = ["meta"] + [d for d in [os.environ.get("RLF_TEST_DEVICE") or (
    "cuda" if torch.cuda.is_available() else None)] if d]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CASES))
def test_the_learner_keeps_every_tensor_on_its_device(name, device):
    kind = torch.device(device).type
    actor, env = _build(name, "cpu")  # acts on CPU, as actors do
    loop, learner_env = _build(name, device)  # moved before its loop, as the Trainer
    # does: its metrics stay on CPU, where the time steps are
    learner = loop.algorithm
    with torch.no_grad():  # two unrolls: whole-buffer training starts at the second
        experience = nest.utils.cat_nests([actor.unroll(8), actor.unroll(8)])
    loop.data_path.observe(experience)  # every path: observe, then one update per batch
    steps = sum(loop.learner.update(batch) for batch in loop.data_path.batches())
    assert steps > 0
    loop.update_observation_normalizers(experience.time_step.observation)  # CPU data
    stray = [n for n, t in learner.state_dict(keep_vars=True).items()
             if isinstance(t, torch.Tensor) and t.device.type != kind]
    for i, opt in enumerate(loop.learner.optimizers):
        stray += [f"optimizer {i}: {k}" for s in opt.state.values() for k, v in s.items()
                  if isinstance(v, torch.Tensor) and v.device.type != kind and v.ndim > 0]
    assert not stray
    assert all(t.device.type == "cpu" for m in loop.metrics
               for t in m.state_dict().values())
    env.close()
    learner_env.close()


def test_actor_copies_are_built_on_cpu_with_the_learners_parameter_names():
    from rlf.unrollers.actor_unroller import build_actor
    loop, learner_env = _build("impala", "meta")
    learner = loop.algorithm
    ctor = functools.partial(ImpalaAlgorithm, observation_spec=learner.observation_spec,
                             action_spec=learner.action_spec, optimizer=ADAM)
    env, actor, params = build_actor(ctor, lambda num_envs, seed: load("CartPole-v1", num_envs,
                                                                       seed=seed), 2, 0)
    assert set(params) == set(actor_state_dict(learner))
    assert all(p.device.type == "cpu" for p in params.values())
    env.close()
    learner_env.close()
