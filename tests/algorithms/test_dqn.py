"""DQNAlgorithm: double-Q targets and the Huber loss on hand-computed cases, epsilon-greedy
schedule, target-network updates, prioritised replay, a short CartPole run, exact resume."""

import functools

import pytest
import torch

from rlf.algorithms import DQNAlgorithm, TrainerConfig
from rlf.algorithms.dqn import DQNInfo, double_q_bootstrap
from rlf.data_structures import StepType
from rlf.environments import load
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from rlf.unrollers import SyncUnroller

from tests.algorithms._resume import assert_resumes_exactly, sampled_experience

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST


def test_double_q_selects_with_the_online_and_evaluates_with_the_target_network():
    online = torch.tensor([[1.0, 3.0, 2.0]])
    target = torch.tensor([[10.0, 20.0, 30.0]])
    assert torch.equal(double_q_bootstrap(online, target), torch.tensor([20.0]))  # not 30


def _alg(**kw):
    obs, act = TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 2)
    return DQNAlgorithm(obs, act, optimizer=torch.optim.Adam, **kw)


@pytest.mark.parametrize("double_q,bootstrap", [(True, 20.0), (False, 30.0)])
def test_loss_against_hand_computed_targets(double_q, bootstrap):
    alg = _alg(gamma=0.9, double_q=double_q, huber_delta=1.0)
    q = torch.tensor([1.0, 3.0, 2.0]).expand(2, 2, 3)  # [T=2, B=2, N=3]
    target_q = torch.tensor([10.0, 20.0, 30.0]).expand(2, 2, 3)
    info = DQNInfo(reward=torch.tensor([[0.0, 0.0], [1.0, 1.0]]),
                   step_type=torch.tensor([[F, M], [M, L]], dtype=torch.int32),
                   discount=torch.tensor([[1.0, 1.0], [1.0, 0.0]]),
                   action=torch.tensor([[0, 1], [0, 0]]), q_values=q, target_q_values=target_q)
    loss = alg.calc_loss(info)
    # env 0: y = 1 + 0.9 * bootstrap, Q(x_0, a=0) = 1; env 1 terminates: y = 1, Q = 3.
    td = torch.tensor([1 + 0.9 * bootstrap - 1.0, 1.0 - 3.0])
    huber = torch.where(td.abs() <= 1, 0.5 * td ** 2, td.abs() - 0.5)
    assert loss.loss.shape == (1, 2)  # [T-1, B]: one transition per sequence
    assert torch.allclose(loss.loss[0], huber)
    assert torch.allclose(loss.priority, td.abs())


def test_n_step_targets_sum_discounted_rewards_within_the_sequence():
    alg = _alg(gamma=0.5, n_step=2, double_q=False, huber_delta=None)
    q = torch.zeros(3, 1, 3)
    target_q = torch.tensor([0.0, 0.0, 8.0]).expand(3, 1, 3)
    info = DQNInfo(reward=torch.tensor([[0.0], [1.0], [2.0]]),
                   step_type=torch.full((3, 1), M, dtype=torch.int32),
                   discount=torch.ones(3, 1), action=torch.zeros(3, 1, dtype=torch.int64),
                   q_values=q, target_q_values=target_q)
    loss = alg.calc_loss(info)
    # t=0: 1 + 0.5 * 2 + 0.25 * 8 = 4; t=1: 2 + 0.5 * 8 = 6 (one step: the sequence ends)
    assert torch.allclose(loss.loss[:, 0], 0.5 * torch.tensor([4.0, 6.0]) ** 2)


def test_epsilon_schedule_and_greedy_evaluation():
    alg = _alg(epsilon_greedy=[(0, 1.0), (100, 0.0)])
    assert alg._epsilon(50) == pytest.approx(0.5)
    assert alg._epsilon(1000) == 0.0
    obs = torch.randn(64, 2)
    greedy = alg.q_network(obs).argmax(-1)
    assert torch.equal(alg._epsilon_greedy(obs, 0.0), greedy)
    assert not torch.equal(alg._epsilon_greedy(obs, 1.0), greedy)


def test_target_network_is_copied_every_period_or_averaged():
    alg = _alg(target_update_period=2)
    with torch.no_grad():
        alg.q_network.head.bias.fill_(1.0)
    alg.after_update(None, None)
    assert not torch.equal(alg.target_q_network.head.bias, alg.q_network.head.bias)
    alg.after_update(None, None)
    assert torch.equal(alg.target_q_network.head.bias, alg.q_network.head.bias)
    polyak = _alg(target_update_tau=0.25, target_update_period=1)
    before = polyak.target_q_network.head.bias.clone()
    with torch.no_grad():
        polyak.q_network.head.bias.add_(4.0)
    polyak.after_update(None, None)
    assert torch.allclose(polyak.target_q_network.head.bias, before + 1.0)


def _cartpole(priority_replay=False):
    env = load("CartPole-v1", 1, seed=0)
    config = TrainerConfig(unroll_length=128, num_updates_per_train_iter=64,
                           mini_batch_size=64, mini_batch_length=2, initial_collect_steps=500,
                           replay_buffer_length=20000, num_iterations=100,
                           priority_replay=priority_replay)
    alg = DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       epsilon_greedy=[(0, 1.0), (4000, 0.04)], target_update_period=64,
                       optimizer=functools.partial(torch.optim.Adam, lr=2.3e-3),
                       gradient_clipping=10.0)
    alg.set_unroller(SyncUnroller(env, alg))
    return alg, env


def test_dqn_learns_cartpole_with_prioritised_replay(one_torch_thread):
    torch.manual_seed(0)
    alg, env = _cartpole(priority_replay=True)
    best = 0.0
    for i in range(120):
        alg.train_iter()
        if i % 10 == 9:
            best = max(best, float(alg.get_metrics()[2].result()))
    # A random policy averages ~22; priorities left the initial ones.
    assert best >= 100
    priority = alg.replay_buffer._priority[:, :alg.replay_buffer.total_size]
    assert float(priority.min()) < float(priority.max())
    env.close()


def test_dqn_resumes_exactly():
    assert_resumes_exactly(_cartpole, 6, sampled_experience)


def test_n_step_longer_than_the_sampled_sequences_is_refused_with_the_fix():
    obs, act = TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 2)
    with pytest.raises(ValueError, match=r"mini_batch_length = 4 \(it is 2\)"):
        DQNAlgorithm(obs, act, optimizer=torch.optim.Adam, n_step=3,
                     config=TrainerConfig(mini_batch_length=2))


def test_actors_receive_the_scheduled_epsilon_with_the_parameters():
    alg, env = _cartpole()
    for _ in range(10):
        alg.train_iter()
    expected = 1.0 - 0.96 * alg.get_env_steps() / 4000
    assert 0.04 < expected < 0.9
    assert float(alg.actor_state_dict()["_behaviour_epsilon"]) == pytest.approx(expected)
    env.close()


def test_target_updates_follow_parameters_replaced_by_a_load():
    alg = _alg(target_update_period=1)
    state = {k: v.clone() + 1.0 if k.startswith("_q_network.") else v.clone()
             for k, v in alg.state_dict().items() if isinstance(v, torch.Tensor)}
    alg.load_state_dict(state, strict=False, assign=True)  # new Parameter objects
    alg.after_update(None, None)
    assert torch.equal(alg.target_q_network.head.bias, alg.q_network.head.bias)
