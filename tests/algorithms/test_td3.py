"""TD3Algorithm: target policy smoothing and the clipped double-Q target on hand-computed
cases, the losses against a float64 transcription of the paper's equations, the delayed
actor, schedule and target updates, and exact resume."""

import functools

import pytest
import torch

from rlf.algorithms import TD3Algorithm, TrainerConfig
from rlf.algorithms.td3 import TD3Info, clipped_double_q_target, smoothed_target_action
from rlf.data_structures import StepType, TimeStep
from rlf.environments import load
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from tests.algorithms._learners import learner_of

from tests.algorithms._resume import assert_resumes_exactly, sampled_experience

M, L = StepType.MID, StepType.LAST
ADAM = functools.partial(torch.optim.Adam, lr=1e-3)


def test_smoothing_clips_the_noise_then_the_action():
    mu = torch.tensor([[0.5, -1.8], [1.9, 0.0]])
    noise = torch.tensor([[0.3, -0.2], [0.05, -2.0]])
    a = smoothed_target_action(mu, noise, torch.tensor([0.1, 1.0]), torch.tensor(-2.0),
                               torch.tensor(2.0))
    # noise clipped to +-0.1 in dim 0 and +-1.0 in dim 1, then the sum to [-2, 2]:
    # 0.5 + 0.1, -1.8 - 0.2 = -2.0, 1.9 + 0.05 = 1.95, 0 - 1.0
    assert torch.allclose(a, torch.tensor([[0.6, -2.0], [1.95, -1.0]]))


def test_clipped_double_q_target_takes_the_smaller_critic():
    y = clipped_double_q_target(torch.tensor([1.0, 2.0]), torch.tensor([0.9, 0.0]),
                                torch.tensor([3.0, 5.0]), torch.tensor([4.0, -1.0]))
    # 1 + 0.9 * min(3, 4) = 3.7; terminated: 2
    assert torch.allclose(y, torch.tensor([3.7, 2.0]))


def _alg(**kw):
    obs = TensorSpec((3,))
    act = BoundedTensorSpec((2,), torch.float32, -2.0, 2.0)
    return TD3Algorithm(obs, act, actor_optimizer=ADAM, critic_optimizer=ADAM, **kw)


def test_a_missing_optimizer_or_a_bad_setting_is_refused():
    obs, act = TensorSpec((3,)), BoundedTensorSpec((2,), torch.float32, -1.0, 1.0)
    with pytest.raises(ValueError, match="critic_optimizer is not set"):
        TD3Algorithm(obs, act, actor_optimizer=ADAM)
    with pytest.raises(ValueError, match="policy_delay must be an int >= 1"):
        _alg(policy_delay=0)
    with pytest.raises(ValueError, match="target_noise_clip must be >= 0"):
        _alg(target_noise_clip=-0.5)


def test_losses_against_a_float64_transcription_with_smoothing_noise():
    # Eqs. 10, 15 and 6 on the networks' own values, T = 2, B = 3, with the smoothing
    # noise drawn again from the same seed.
    torch.manual_seed(0)
    alg = _alg(gamma=0.9, target_policy_noise=0.4, target_noise_clip=0.3)
    with torch.no_grad():  # the targets differ from the online networks
        alg.target_critics[0].net[0].bias += 1.0
        alg.target_actor.layer.bias += 0.5
    ts = TimeStep(step_type=torch.tensor([M, M, M, M, L, M], dtype=torch.int32),
                  reward=torch.tensor([0.0, 0.0, 0.0, 1.0, -2.0, 0.5]),
                  discount=torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0]),
                  observation=torch.randn(6, 3))
    info = alg.train_step(ts, (), TD3Info(action=torch.rand(6, 2) * 4 - 2)).info
    info = TD3Info(*[x.view(2, 3, *x.shape[1:]) for x in info])  # [T=2, B=3]
    assert alg.is_due("actor") is False  # update 1 of policy_delay 2
    torch.manual_seed(7)
    loss = alg.calc_loss(info)
    assert set(loss.loss) == {"critic"}  # the actor's term only when its optimizer is due
    learner_of(alg).update_with_gradient(loss)
    assert alg.is_due("actor")
    torch.manual_seed(7)
    loss = alg.calc_loss(info)
    assert set(loss.loss) == {"critic", "actor"}

    torch.manual_seed(7)
    with torch.no_grad():
        x, a = info.observation, info.action
        mu_target = alg.target_actor(x[1]).double()
        eps = (torch.randn(3, 2).double() * 0.4 * 2.0).clamp(-0.6, 0.6)  # units: scale 2
        a_next = (mu_target + eps).clamp(-2.0, 2.0).float()
        q_next = torch.minimum(alg.target_critics[0](x[1], a_next),
                               alg.target_critics[1](x[1], a_next)).double()
        y = info.reward[1].double() + 0.9 * info.discount[1].double() * q_next
        critic = sum((c(x[0], a[0]).double() - y) ** 2 for c in alg.critics)
        actor = -alg.critics[0](x[0], alg.actor(x[0])).double()
    assert torch.allclose(loss.loss["critic"][0].double(), critic, rtol=1e-5, atol=1e-6)
    assert torch.allclose(loss.loss["actor"][0].double(), actor, rtol=1e-5)


def _pendulum(num_iterations=10, **kw):
    env = load("Pendulum-v1", 1, seed=0)
    config = TrainerConfig(unroll_length=1, mini_batch_size=64, mini_batch_length=2,
                           initial_collect_steps=100, replay_buffer_length=10000,
                           num_iterations=num_iterations)
    alg = TD3Algorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       actor_optimizer=ADAM, critic_optimizer=ADAM, **kw)
    return alg, env


def test_the_actor_and_the_targets_step_every_second_update(one_torch_thread):
    torch.manual_seed(0)
    alg, env = _pendulum()
    for _ in range(100):  # training starts at iteration 100 (a buffer of 100 steps)
        alg.train_iter()
    actor = [p.detach().clone() for p in alg.actor.parameters()]
    target = [p.detach().clone() for p in alg.target_critics.parameters()]
    critic = [p.detach().clone() for p in alg.critics.parameters()]
    alg.train_iter()  # update 2: the actor and the targets move
    assert learner_of(alg).optimizer_steps == {"actor": 1, "critic": 2}
    assert not all(torch.equal(a, b) for a, b in zip(actor, alg.actor.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(target, alg.target_critics.parameters()))
    actor = [p.detach().clone() for p in alg.actor.parameters()]
    target = [p.detach().clone() for p in alg.target_critics.parameters()]
    alg.train_iter()  # update 3: the critics only
    assert learner_of(alg).optimizer_steps == {"actor": 1, "critic": 3}
    assert all(torch.equal(a, b) for a, b in zip(actor, alg.actor.parameters()))
    assert all(torch.equal(a, b) for a, b in zip(target, alg.target_critics.parameters()))
    assert not all(torch.equal(a, b) for a, b in zip(critic, alg.critics.parameters()))
    # Adam's own step count agrees: the actor's optimizer stepped half as often.
    steps = [int(s["step"]) for s in learner_of(alg).optimizers[0].state.values()]
    assert steps and set(steps) == {1}
    env.close()


def test_td3_resumes_exactly():
    assert_resumes_exactly(_pendulum, 105, sampled_experience)
