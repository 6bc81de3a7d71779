"""DQNAlgorithm: double-Q targets and the Huber loss on hand-computed cases, epsilon-greedy
schedule, target-network updates, prioritised replay, a short CartPole run, exact resume."""

import functools
import re

import pytest
import torch

from rlf.algorithms import DQNAlgorithm, TrainerConfig, build_training
from rlf.algorithms.dqn import DQNInfo, double_q_bootstrap, dqn_loss
from rlf.data_structures import StepType, TimeStep
from rlf.environments import load
from rlf.replay import ReplayBuffer
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from rlf.unrollers import SyncUnroller
from rlf.unrollers.actor_params import actor_state_dict
from rlf.utils.errors import UserError
from rlf.algorithms import loop_of

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
    q = torch.tensor([1.0, 3.0, 2.0]).expand(2, 2, 3)  # [T=2, B=2, N=3]
    next_target_q = torch.tensor([10.0, 20.0, 30.0]).expand(1, 2, 3)  # [T-1, B, N]
    loss, td_error = dqn_loss(
        q, torch.tensor([[0, 1], [0, 0]]), next_target_q,
        reward=torch.tensor([[0.0, 0.0], [1.0, 1.0]]),
        step_type=torch.tensor([[F, M], [M, L]], dtype=torch.int32),
        discount=0.9 * torch.tensor([[1.0, 1.0], [1.0, 0.0]]), n_step=1, double_q=double_q,
        huber_delta=1.0)
    # env 0: y = 1 + 0.9 * bootstrap, Q(x_0, a=0) = 1; env 1 terminates: y = 1, Q = 3.
    td = torch.tensor([1 + 0.9 * bootstrap - 1.0, 1.0 - 3.0])
    huber = torch.where(td.abs() <= 1, 0.5 * td ** 2, td.abs() - 0.5)
    assert loss.shape == (1, 2)  # [T-1, B]: one transition per sequence
    assert torch.allclose(loss[0], huber)
    assert torch.allclose(td_error[0], td)


def test_n_step_targets_sum_discounted_rewards_within_the_sequence():
    next_target_q = torch.tensor([0.0, 0.0, 8.0]).expand(2, 1, 3)
    loss, _ = dqn_loss(torch.zeros(3, 1, 3), torch.zeros(3, 1, dtype=torch.int64),
                       next_target_q, reward=torch.tensor([[0.0], [1.0], [2.0]]),
                       step_type=torch.full((3, 1), M, dtype=torch.int32),
                       discount=torch.full((3, 1), 0.5), n_step=2, double_q=False,
                       huber_delta=None)
    # t=0: 1 + 0.5 * 2 + 0.25 * 8 = 4; t=1: 2 + 0.5 * 8 = 6 (one step: the sequence ends)
    assert torch.allclose(loss[:, 0], 0.5 * torch.tensor([4.0, 6.0]) ** 2)


def test_a_step_that_starts_no_transition_gets_no_td_error():
    # Step 0 is LAST: its return is its own value, whatever the next episode holds.
    q = torch.tensor([[[5.0, 1.0]], [[2.0, 7.0]]])
    loss, td_error = dqn_loss(q, torch.tensor([[0], [1]]), torch.full((1, 1, 2), 100.0),
                              reward=torch.tensor([[1.0], [0.0]]),
                              step_type=torch.tensor([[L], [F]], dtype=torch.int32),
                              discount=torch.tensor([[0.0], [0.99]]), n_step=1)
    assert float(td_error) == 0.0 and float(loss) == 0.0


def test_calc_loss_evaluates_the_target_network_at_the_next_steps():
    # Double-DQN's 2-step target transcribed in float64 on the networks' own values, for
    # T=3, B=2: the online network selects at x_{t+m}, the target network evaluates there.
    torch.manual_seed(0)
    alg = _alg(gamma=0.9, n_step=2, huber_delta=None,
               config=TrainerConfig(mini_batch_length=3))
    with torch.no_grad():  # the target network differs from the online one
        alg.target_q_network.head.bias.copy_(torch.tensor([3.0, -1.0, 0.5]))
        alg.target_q_network.head.weight.mul_(-2.0)
    ts = TimeStep(step_type=torch.tensor([M, M, M, L, M, F], dtype=torch.int32),
                  reward=torch.tensor([0.0, 0.0, 1.0, -2.0, 0.5, 0.0]),
                  discount=torch.tensor([1.0, 1.0, 1.0, 0.0, 1.0, 1.0]),
                  observation=torch.randn(6, 2))
    action = torch.tensor([0, 2, 1, 1, 2, 0])
    info = alg.train_step(ts, (), DQNInfo(action=action)).info
    info = DQNInfo(*[x.view(3, 2, *x.shape[1:]) if isinstance(x, torch.Tensor) else x
                     for x in info])  # [T=3, B=2]
    loss = alg.calc_loss(info)

    with torch.no_grad():
        x, a = info.observation, info.action
        r, d = info.reward.double(), 0.9 * info.discount.double()

        def boot(t, b):
            greedy = alg.q_network(x[t, b:b + 1])[0].argmax()
            return alg.target_q_network(x[t, b:b + 1])[0, greedy].double()

        def q(t, b):
            return alg.q_network(x[t, b:b + 1])[0, a[t, b]].double()

        # env 0 (M, M, M): t=0 sums two rewards and bootstraps at x_2, t=1 one reward. env 1
        # (M, L, F): t=0 ends at the termination (d_1 = 0).
        y = {(0, 0): r[1, 0] + d[1, 0] * (r[2, 0] + d[2, 0] * boot(2, 0)),
             (1, 0): r[2, 0] + d[2, 0] * boot(2, 0),
             (0, 1): r[1, 1] + d[1, 1] * boot(1, 1)}
        for (t, b), target in y.items():
            expected = 0.5 * (target - q(t, b)) ** 2
            assert torch.allclose(loss.loss[t, b].double(), expected, rtol=1e-5), (t, b)
    assert float(loss.loss[1, 1].detach()) == 0.0  # step 1 of env 1 is LAST: no transition


def test_epsilon_schedule_and_greedy_evaluation():
    alg = _alg(epsilon_greedy=[(0, 1.0), (100, 0.0)])
    assert alg._epsilon(50) == pytest.approx(0.5)
    assert alg._epsilon(1000) == 0.0
    obs = torch.randn(64, 2)
    greedy = alg.q_network(obs).argmax(-1)
    assert torch.equal(alg._epsilon_greedy(alg.q_network(obs), 0.0), greedy)
    assert not torch.equal(alg._epsilon_greedy(alg.q_network(obs), 1.0), greedy)


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
    return alg, env


def test_dqn_resumes_exactly():
    assert_resumes_exactly(_cartpole, 6, sampled_experience)


def test_n_step_longer_than_the_sampled_sequences_is_refused_with_the_fix():
    obs, act = TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 2)
    alg = DQNAlgorithm(obs, act, optimizer=torch.optim.Adam, n_step=3,
                       config=TrainerConfig(mini_batch_length=2))
    assert alg.data_needs.min_sequence_length == 4
    with pytest.raises(UserError, match=r"^DQNAlgorithm: n_step = 3 needs sequences of "
                                        r"burn_in_steps \+ 4 steps; set TrainerConfig."
                                        r"mini_batch_length = 4 \(it is 2\)$"):
        build_training(alg)  # make_data_path checks the declared needs


@pytest.mark.parametrize("kw, message", [
    (dict(huber_delta=0.0), "huber_delta must be > 0 (or None for the squared error), got 0.0"),
    (dict(eval_epsilon=2.0), "eval_epsilon must be in [0, 1], got 2.0"),
    (dict(epsilon_greedy=[(0, 1.5), (100, 0.1)]),
     "epsilon_greedy's values must be in [0, 1], got [(0, 1.5), (100, 0.1)]"),
    (dict(epsilon_greedy=-0.1), "epsilon_greedy's values must be in [0, 1], got -0.1"),
])
def test_out_of_range_exploration_and_huber_delta_are_refused(kw, message):
    # Accepted before: a Huber delta of 0 failed in the first update; an epsilon above 1
    # explored at random and an eval_epsilon of 2 evaluated a random policy, silently.
    obs, act = TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 2)
    with pytest.raises(ValueError, match=re.escape(f"DQNAlgorithm: {message}")):
        DQNAlgorithm(obs, act, optimizer=torch.optim.Adam, **kw)


@pytest.mark.slow  # (actors or a long run)
def test_actors_receive_the_scheduled_epsilon_with_the_parameters():
    alg, env = _cartpole()
    for _ in range(10):
        alg.train_iter()
    expected = 1.0 - 0.96 * alg.get_env_steps() / 4000
    assert 0.04 < expected < 0.9
    assert float(actor_state_dict(alg)["_behaviour_epsilon"]) == pytest.approx(expected)
    env.close()


def test_target_updates_follow_parameters_replaced_by_a_load():
    alg = _alg(target_update_period=1)
    state = {k: v.clone() + 1.0 if k.startswith("_q_network.") else v.clone()
             for k, v in alg.state_dict().items() if isinstance(v, torch.Tensor)}
    alg.load_state_dict(state, strict=False, assign=True)  # new Parameter objects
    alg.after_update(None, None)
    assert torch.equal(alg.target_q_network.head.bias, alg.q_network.head.bias)


def test_sampled_training_waits_for_a_whole_sequence_whatever_initial_collect_steps():
    # Before, initial_collect_steps = 0 with sequences of 4 steps failed in the first
    # iteration, whose buffer held one step per environment.
    env = load("CartPole-v1", 2, seed=0)
    config = TrainerConfig(unroll_length=1, mini_batch_size=8, mini_batch_length=4,
                           initial_collect_steps=0, num_iterations=10)
    alg = DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       n_step=3, optimizer=torch.optim.Adam)
    held, trained = [], []
    for _ in range(6):
        trained.append(alg.train_iter())
        held.append(loop_of(alg).replay_buffer.current_size.tolist())
    first = next(i for i, n in enumerate(trained) if n)
    assert held[first] == [4, 4] and held[first - 1] == [3, 3]
    assert trained[first:] == [8 * 4] * (6 - first)
    env.close()


@pytest.mark.parametrize("path, when, message", [
    # A field of the time step is known before the first step: refused by set_unroller.
    ("time_step.obs", "set_unroller", "stacked_frames paths ['time_step.obs'] are not leaves"),
    # rollout_info is known only after the first rollout_step: the buffer built then refuses.
    ("rollout_info.action", "train_iter",
     "stacked field 'rollout_info.action' has spec shape ()"),
])
def test_replay_buffer_settings_are_checked_as_soon_as_the_spec_is_known(path, when, message):
    env = load("CartPole-v1", 1, seed=0)
    config = TrainerConfig(unroll_length=1, mini_batch_size=8, mini_batch_length=2,
                           initial_collect_steps=0, num_iterations=10)
    ctor = functools.partial(ReplayBuffer, stacked_frames={path: 4})
    alg = DQNAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                       optimizer=torch.optim.Adam, replay_buffer_ctor=ctor)
    unroller = SyncUnroller(env, alg)
    with pytest.raises(UserError, match=re.escape(message)):
        build_training(alg, unroller)
        assert when == "train_iter"
        alg.train_iter()
    env.close()
