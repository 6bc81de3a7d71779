"""IQLAlgorithm: the expectile loss and the advantage weights on hand-computed cases, the
three losses against a float64 transcription of the paper's equations, each term training
only its own optimizer, purely offline training on ALF's Pendulum file with no override, and
exact resume."""

import functools
import math
from pathlib import Path

import pytest
import torch

from rlf.algorithms import IQLAlgorithm, TrainerConfig, build_training
from rlf.algorithms.iql import IQLInfo, awr_weights, expectile_loss
from rlf.data_structures import StepType, TimeStep
from rlf.environments import load
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from tests.algorithms._learners import learner_of

from tests.algorithms._loss_terms import assert_each_term_trains_only_its_own
from tests.algorithms._resume import assert_resumes_exactly, sampled_experience

M, L = StepType.MID, StepType.LAST
ADAM = functools.partial(torch.optim.Adam, lr=1e-3)
ALF_FILE = Path(__file__).resolve().parents[1] / "data" / "alf_pendulum_sac_replay_buffer.pt"
OPTIMIZERS = dict(actor_optimizer=ADAM, critic_optimizer=ADAM, value_optimizer=ADAM)


def test_expectile_loss_weighs_the_two_signs_by_tau_and_one_minus_tau():
    u = torch.tensor([2.0, -2.0, 0.5, 0.0])
    # tau = 0.7: 0.7 * 4, 0.3 * 4, 0.7 * 0.25, 0
    assert torch.allclose(expectile_loss(u, 0.7), torch.tensor([2.8, 1.2, 0.175, 0.0]))
    assert torch.allclose(expectile_loss(u, 0.5), 0.5 * u ** 2)  # the symmetric case


def test_awr_weights_exponentiate_the_advantage_and_clip():
    a = torch.tensor([0.0, 1.0, -1.0, 10.0], requires_grad=True)
    w = awr_weights(a, 3.0, max_weight=100.0)
    assert torch.allclose(w, torch.tensor([1.0, math.exp(3.0), math.exp(-3.0), 100.0]))
    assert not w.requires_grad


def _alg(**kw):
    obs = TensorSpec((3,))
    act = BoundedTensorSpec((2,), torch.float32, -2.0, 2.0)
    return IQLAlgorithm(obs, act, **{**OPTIMIZERS, **kw})


def test_losses_against_a_float64_transcription_and_each_term_trains_its_own_part():
    torch.manual_seed(0)
    alg = _alg(gamma=0.9, expectile=0.8, temperature=2.0)
    with torch.no_grad():
        alg.target_critics[0].net[0].bias += 0.3
        alg._log_std.fill_(-0.5)
    ts = TimeStep(step_type=torch.tensor([M, M, M, M, L, M], dtype=torch.int32),
                  reward=torch.tensor([0.0, 0.0, 0.0, 1.0, -2.0, 0.5]),
                  discount=torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0]),
                  observation=torch.randn(6, 3))
    info = alg.train_step(ts, (), IQLInfo(action=torch.rand(6, 2) * 4 - 2)).info
    info = IQLInfo(*[x.view(2, 3, *x.shape[1:]) for x in info])  # [T=2, B=3]
    loss = alg.calc_loss(info)
    with torch.no_grad():
        x, a = info.observation, info.action
        q_t = torch.minimum(*[c(x[0], a[0]) for c in alg.target_critics]).double()
        v = alg.value(x[0]).double()
        u = q_t - v
        value = torch.where(u < 0, 0.2, 0.8) * u ** 2
        y = info.reward[1].double() + 0.9 * info.discount[1].double() * alg.value(x[1]).double()
        critic = sum((c(x[0], a[0]).double() - y) ** 2 for c in alg.critics)
        mu, sigma = alg._actor(x[0]).double(), math.exp(-0.5)
        log_pi = (-0.5 * ((a[0].double() - mu) / sigma) ** 2 - math.log(sigma)
                  - 0.5 * math.log(2 * math.pi)).sum(-1)
        actor = -torch.exp(2.0 * u).clamp(max=100.0) * log_pi
    for term, expected in (("value", value), ("critic", critic), ("actor", actor)):
        assert torch.allclose(loss.loss[term][0].double(), expected, rtol=1e-5, atol=1e-6), term
    assert_each_term_trains_only_its_own(
        alg, loss, {"value": "_value.", "critic": "_critics.", "actor": ("_actor.", "_log_std")},
        1e-6)
    assert learner_of(alg).optimizer_steps == {"actor": 1, "critic": 1, "value": 1}


def test_iql_trains_purely_offline_on_alfs_pendulum_file_without_an_override():
    env = load("Pendulum-v1", 1)
    config = TrainerConfig(unroll_length=0, offline_buffer_dir=str(ALF_FILE),
                           offline_normalized_actions=True, mini_batch_size=32,
                           mini_batch_length=2, num_iterations=20)
    alg = IQLAlgorithm(env.observation_spec(), env.action_spec(), config=config, **OPTIMIZERS)
    loop = build_training(alg)
    data = loop.offline_replay_buffer.gather_all()
    assert torch.equal(data.rollout_info.action, data.action)  # ALF's rollout_info|rl|action
    for _ in range(20):
        alg.train_iter()
    assert alg.num_updates == 20
    assert all(bool(torch.isfinite(p).all()) for p in alg.parameters())
    env.close()


def _pendulum():
    env = load("Pendulum-v1", 1, seed=0)
    config = TrainerConfig(unroll_length=1, mini_batch_size=32, mini_batch_length=2,
                           initial_collect_steps=50, replay_buffer_length=1000,
                           num_iterations=10)
    alg = IQLAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       **OPTIMIZERS)
    return alg, env


def test_iql_resumes_exactly():
    assert_resumes_exactly(_pendulum, 60, sampled_experience)


def test_bad_settings_are_refused():
    with pytest.raises(ValueError, match="value_optimizer is not set"):
        IQLAlgorithm(TensorSpec((3,)), BoundedTensorSpec((2,), torch.float32, -1.0, 1.0),
                     actor_optimizer=ADAM, critic_optimizer=ADAM)
    with pytest.raises(ValueError, match=r"expectile must be in \(0, 1\)"):
        _alg(expectile=1.0)
