"""SACAlgorithm: the soft target with its entropy term, the losses on a hand-computed case,
each network evaluated at the step of the transition it belongs to, gradients kept to their
own networks, the tanh-squashed policy's density, the temperature's
update, a short Pendulum run, exact resume."""

import functools
import math

import pytest
import torch

from rlf.algorithms import SACAlgorithm, TrainerConfig
from rlf.algorithms.sac import SACInfo, SACTransitions, sac_losses, soft_q_target
from rlf.data_structures import StepType, TimeStep
from rlf.environments import load
from rlf.networks import TanhNormalHead
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from tests.algorithms._learners import learner_of

from tests.algorithms._loss_terms import assert_each_term_trains_only_its_own
from tests.algorithms._resume import assert_resumes_exactly, sampled_experience

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST
ADAM = functools.partial(torch.optim.Adam, lr=1e-3)


def test_soft_q_target_subtracts_the_entropy_term():
    # y = r + gamma d (min Q' - alpha log pi) = 1 + 0.99 (2 - 0.5 * -1) = 3.475
    y = soft_q_target(torch.tensor(1.0), torch.tensor(0.99), torch.tensor(2.0),
                      torch.tensor(-1.0), 0.5)
    assert float(y) == pytest.approx(3.475)


def _alg(**kw):
    obs = TensorSpec((3,))
    act = BoundedTensorSpec((2,), torch.float32, -2.0, 2.0)
    optimizers = dict(actor_optimizer=ADAM, critic_optimizer=ADAM, alpha_optimizer=ADAM)
    return SACAlgorithm(obs, act, **{**optimizers, **kw})


def test_a_discrete_action_spec_or_a_discount_or_temperature_out_of_range_is_refused():
    with pytest.raises(ValueError, match=r"needs a continuous action space \(a Box\)"):
        SACAlgorithm(TensorSpec((3,)), BoundedTensorSpec((), torch.int64, 0, 1),
                     actor_optimizer=ADAM, critic_optimizer=ADAM, alpha_optimizer=ADAM)
    with pytest.raises(ValueError, match=r"squashes actions into the Box's bounds and needs "
                                         r"finite ones; the action space has none"):
        SACAlgorithm(TensorSpec((3,)), TensorSpec((2,)),
                     actor_optimizer=ADAM, critic_optimizer=ADAM, alpha_optimizer=ADAM)
    with pytest.raises(ValueError, match=r"SACAlgorithm: gamma must be in \[0, 1\], got 1.01"):
        _alg(gamma=1.01)
    with pytest.raises(ValueError, match=r"SACAlgorithm: initial_alpha \(the temperature, "
                                         r"learned as its log\) must be > 0, got 0.0"):
        _alg(initial_alpha=0.0)  # was math.log's "math domain error"
    with pytest.raises(ValueError, match=r"SACAlgorithm.critic_optimizer: optimizer must be a "
                                         r"torch.optim.Optimizer class or factory"):
        _alg(critic_optimizer=0.001)  # was a TypeError at the first update


def test_losses_on_a_hand_computed_transition():
    # One transition (T-1 = 1) in each of B = 2 environments; env 1's terminates (discount 0).
    transitions = SACTransitions(
        reward=torch.tensor([[1.0, 2.0]]), discount=torch.tensor([[0.9, 0.0]]),
        critics=torch.tensor([[[1.0, 2.0], [0.0, 0.0]]]), next_q=torch.tensor([[2.5, 7.0]]),
        next_log_pi=torch.tensor([[-1.0, 0.0]]), q_new=torch.tensor([[4.0, 6.0]]),
        log_pi=torch.tensor([[-1.0, 1.0]]))
    loss = sac_losses(transitions, torch.tensor(math.log(0.5)), target_entropy=-2.0)
    # env 0: y = 1 + 0.9 (2.5 - 0.5 * -1) = 3.7; critic 0.5 ((1 - 3.7)^2 + (2 - 3.7)^2) = 5.09
    # env 1: y = 2 (terminated);     critic 0.5 ((0 - 2)^2 + (0 - 2)^2) = 4
    assert torch.allclose(loss.extra["critic_loss"], torch.tensor([[5.09, 4.0]]))
    # actor: alpha log pi - min Q = 0.5 * -1 - 4 and 0.5 * 1 - 6
    assert torch.allclose(loss.extra["actor_loss"], torch.tensor([[-4.5, -5.5]]))
    # temperature: -log alpha (log pi - |A|), |A| = 2
    assert torch.allclose(loss.extra["alpha_loss"],
                          -math.log(0.5) * torch.tensor([[-3.0, -1.0]]))
    assert {k: v.shape for k, v in loss.loss.items()} == {  # [T-1, B] each
        "critic": (1, 2), "actor": (1, 2), "alpha": (1, 2)}


def test_calc_loss_evaluates_each_network_at_its_step_of_the_transition():
    # Eqs. 5, 7 and 18 transcribed in float64 on the networks' own values: the critics at
    # (x_0, a_0) and (x_0, a'_0), the target critics at (x_1, a'_1), for T=2, B=3.
    torch.manual_seed(0)
    alg = _alg(gamma=0.9, initial_alpha=0.7)
    with torch.no_grad():  # the target critics differ from the critics
        alg.target_critics[0].net[0].bias += 1.0
    ts = TimeStep(step_type=torch.tensor([M, M, M, M, L, M], dtype=torch.int32),
                  reward=torch.tensor([0.0, 0.0, 0.0, 1.0, -2.0, 0.5]),
                  discount=torch.tensor([1.0, 1.0, 1.0, 1.0, 0.0, 1.0]),
                  observation=torch.randn(6, 3))
    info = alg.train_step(ts, (), SACInfo(action=torch.rand(6, 2) * 4 - 2)).info
    info = SACInfo(*[x.view(2, 3, *x.shape[1:]) for x in info])  # [T=2, B=3]
    loss = alg.calc_loss(info)

    with torch.no_grad():
        def min_q(critics, x, a):
            return torch.minimum(critics[0](x, a), critics[1](x, a)).double()

        x, a, a_new = info.observation, info.action, info.new_action
        log_pi = info.log_pi.double()
        y = info.reward[1].double() + 0.9 * info.discount[1].double() * (
            min_q(alg.target_critics, x[1], a_new[1]) - 0.7 * log_pi[1])
        critic = 0.5 * sum((c(x[0], a[0]).double() - y) ** 2 for c in alg.critics)
        actor = 0.7 * log_pi[0] - min_q(alg.critics, x[0], a_new[0])
        alpha = -math.log(0.7) * (log_pi[0] - 2.0)  # target entropy -|A| = -2
    assert torch.allclose(loss.extra["critic_loss"][0].double(), critic, rtol=1e-5)
    assert torch.allclose(loss.extra["actor_loss"][0].double(), actor, rtol=1e-5)
    assert torch.allclose(loss.extra["alpha_loss"][0].double(), alpha, rtol=1e-5)


def test_each_loss_reaches_only_its_own_parameters():
    alg = _alg()
    ts = TimeStep(step_type=torch.full((8,), M, dtype=torch.int32),
                  reward=torch.zeros(8), discount=torch.ones(8),
                  observation=torch.randn(8, 3))
    info = alg.train_step(ts, (), SACInfo(action=torch.rand(8, 2) * 4 - 2)).info
    info = SACInfo(*[x.view(2, 4, *x.shape[1:]) for x in info])  # [T=2, B=4]
    loss = alg.calc_loss(info)
    # The actor's term passes through the critics, yet the critics' gradients are their
    # own term's alone: no requires_grad toggling.
    assert_each_term_trains_only_its_own(
        alg, loss, {"critic": "_critics.", "actor": "_actor.", "alpha": "_log_alpha"}, 1e-7)
    assert learner_of(alg).optimizer_steps == {"actor": 1, "critic": 1, "alpha": 1}
    assert len(learner_of(alg).optimizers) == 3
    assert all(not p.requires_grad for p in alg.target_critics.parameters())


def test_tanh_normal_density_is_the_change_of_variables_of_the_normal():
    spec = BoundedTensorSpec((2,), torch.float32, [-1.0, 0.0], [3.0, 1.0])
    head = TanhNormalHead(4, spec)
    params = head(torch.randn(5, 4))
    action, log_prob = head.rsample_with_log_prob(params)
    assert bool(((action >= torch.tensor([-1.0, 0.0])) & (action <= torch.tensor([3.0, 1.0])))
                .all())
    loc, scale = params
    reference = torch.distributions.TransformedDistribution(
        torch.distributions.Normal(loc.double(), scale.double()),
        [torch.distributions.TanhTransform(),
         torch.distributions.AffineTransform(torch.tensor([1.0, 0.5]).double(),
                                             torch.tensor([2.0, 0.5]).double())])
    expected = reference.log_prob(action.double()).sum(-1)
    assert torch.allclose(log_prob.double(), expected, atol=1e-3)
    assert torch.allclose(head.log_prob(params, action).double(), expected, atol=1e-3)


def test_temperature_falls_when_the_policy_is_more_random_than_the_target():
    alg = _alg(initial_alpha=1.0)
    zeros = torch.zeros(1, 4)
    transitions = SACTransitions(
        reward=zeros, discount=torch.ones(1, 4), critics=torch.zeros(1, 4, 2), next_q=zeros,
        next_log_pi=zeros, q_new=zeros, log_pi=torch.full((1, 4), -5.0))  # entropy 5 > -2
    learner_of(alg).update_with_gradient(sac_losses(transitions, alg._log_alpha, -2.0),
                                     torch.ones(1, 4))
    assert float(alg.alpha.detach()) < 1.0


def _pendulum(num_iterations=10):
    env = load("Pendulum-v1", 1, seed=0)
    config = TrainerConfig(unroll_length=1, mini_batch_size=128, mini_batch_length=2,
                           initial_collect_steps=200, replay_buffer_length=10000,
                           num_iterations=num_iterations)
    alg = SACAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       actor_optimizer=ADAM, critic_optimizer=ADAM, alpha_optimizer=ADAM)
    return alg, env


def test_sac_resumes_exactly():
    assert_resumes_exactly(_pendulum, 210, sampled_experience)
