"""PPOAlgorithm: the clipped objective and value clipping on hand-computed cases, GAE in
preprocessing, bounded actions, a short CartPole run that learns, and exact resume."""

import functools
import re

import pytest
import torch

from rlf.algorithms import PPOAlgorithm, TrainerConfig, build_training
from rlf.algorithms import value_ops
from rlf.algorithms.ppo import PPOInfo, ppo_clipped_surrogate
from rlf.data_structures import StepType, TimeStep, valid_step_mask
from rlf.environments import load
from rlf import nest
from rlf.networks import ActorCriticNetwork, NormalHead, TanhNormalHead
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from rlf.unrollers import SyncUnroller
from rlf.utils import summary
from rlf.utils.tensorboard_reader import read_scalar_tags
from tests.algorithms._learners import learner_of

from tests.algorithms._resume import assert_resumes_exactly

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST


def test_clipped_surrogate_above_and_below_the_clip():
    eps = 0.2
    old = torch.zeros(4)
    log_prob = torch.log(torch.tensor([1.5, 1.5, 0.5, 0.5])).requires_grad_()
    adv = torch.tensor([1.0, -1.0, 1.0, -1.0])
    loss = ppo_clipped_surrogate(log_prob, old, adv, eps)
    # r=1.5, A=+1: min(1.5, 1.2) = 1.2 (clipped); A=-1: min(-1.5, -1.2) = -1.5 (unclipped);
    # r=0.5, A=+1: min(0.5, 0.8) = 0.5 (unclipped); A=-1: min(-0.5, -0.8) = -0.8 (clipped).
    assert torch.allclose(loss, torch.tensor([-1.2, 1.5, -0.5, 0.8]))
    loss.sum().backward()
    # d(-r A)/d log r = -r A where unclipped, 0 where the clip is active.
    assert torch.allclose(log_prob.grad, torch.tensor([0.0, 1.5, -0.5, 0.0]))


def _alg(**kw):
    obs, act = TensorSpec((3,)), BoundedTensorSpec((), torch.int64, 0, 1)
    return PPOAlgorithm(obs, act, optimizer=torch.optim.Adam, **kw)


def test_value_clipping_takes_the_larger_error():
    alg = _alg(value_clipping=0.2, normalize_advantages=False, td_loss_weight=1.0)
    params = torch.zeros(1, 1, 2)
    info = PPOInfo(action=torch.zeros(1, 1, dtype=torch.int64),
                   log_prob=torch.log(torch.full((1, 1), 0.5)), value=torch.ones(1, 1),
                   advantage=torch.zeros(1, 1), returns=torch.full((1, 1), 3.0),
                   valid=torch.ones(1, 1), params=params, new_value=torch.full((1, 1), 2.0))
    loss = alg.calc_loss(info)
    # unclipped 0.5 (3 - 2)^2 = 0.5; clipped value 1 + 0.2 = 1.2: 0.5 (1.8)^2 = 1.62
    assert float(loss.extra["td_loss"]) == pytest.approx(1.62)
    assert float(loss.extra["pg_loss"]) == pytest.approx(0.0)



def test_approx_kl_and_clip_fraction_summaries_cover_the_valid_steps_only(tmp_path):
    # Action 0 taken at every step, behaviour probability 0.5; the new policy's p(0) gives
    # the ratios r = 2 p: 1.0, 1.16, 1.3, 0.6 on the valid steps, 1.9 on the masked one.
    p0 = torch.tensor([0.5, 0.58, 0.65, 0.3, 0.95], dtype=torch.float64)
    alg = _alg()
    info = PPOInfo(action=torch.zeros(5, 1, dtype=torch.int64),
                   log_prob=torch.log(torch.full((5, 1), 0.5)), value=torch.zeros(5, 1),
                   advantage=torch.arange(5.0).view(5, 1), returns=torch.zeros(5, 1),
                   valid=torch.tensor([[1.0], [1.0], [1.0], [1.0], [0.0]]),
                   params=torch.stack([p0.log(), (1 - p0).log()], -1).float().view(5, 1, 2),
                   new_value=torch.zeros(5, 1))
    writer = summary.create_summary_writer(str(tmp_path))
    summary.set_default_writer(writer)
    try:
        with summary.record_if(lambda: True):
            alg.calc_loss(info)
        writer.flush()
    finally:
        summary.set_default_writer(None)
        writer.close()
    series = read_scalar_tags(tmp_path)
    ratio = 2 * p0[:4]
    # Schulman's low-variance estimator of KL(pi_old || pi): E[(r - 1) - log r]
    assert series["PPOAlgorithm/approx_kl"][1] == pytest.approx(
        [float(((ratio - 1) - ratio.log()).mean())], rel=1e-5)
    assert series["PPOAlgorithm/clip_fraction"][1] == pytest.approx([0.5])  # 1.3 and 0.6
    assert "PPOAlgorithm/importance_ratio_clipping" not in series  # a constant clip range

def test_preprocess_computes_gae_per_environment_over_the_whole_batch_major_experience():
    alg = _alg(gamma=0.9, td_lambda=0.8)
    step_type = torch.tensor([[F, M, M, L], [M, L, F, M]], dtype=torch.int32)  # [B, T]
    reward = torch.tensor([[0.0, 1.0, 2.0, 3.0], [1.0, -1.0, 0.0, 0.5]])
    discount = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 1.0, 1.0]])
    value = torch.tensor([[0.5, 1.0, 1.5, 2.0], [0.2, 0.4, 0.6, 0.8]])
    ts = TimeStep(step_type=step_type, reward=reward, discount=discount)
    _, info = alg.preprocess_experience(ts, PPOInfo(value=value), None)
    tm = lambda x: x.transpose(0, 1)  # noqa: E731
    adv = value_ops.generalized_advantage_estimation(tm(reward), tm(value), tm(step_type),
                                                     0.9 * tm(discount), 0.8)
    assert torch.allclose(info.advantage[:, :-1], tm(adv))
    assert torch.equal(info.advantage[:, -1], torch.zeros(2))
    assert torch.allclose(info.returns, info.advantage + value)
    assert torch.equal(info.valid, tm(valid_step_mask(tm(step_type))).float())
    # hand-computed: env 0, step 2 -> 3 terminates: A_2 = r_3 - V_2 = 3 - 1.5
    assert float(info.advantage[0, 2]) == pytest.approx(1.5)


def test_box_actions_are_clipped_for_the_environment_and_trained_unclipped():
    obs = TensorSpec((3,))
    act = BoundedTensorSpec((2,), torch.float32, -0.1, 0.1)
    alg = PPOAlgorithm(obs, act, optimizer=torch.optim.Adam)
    ts = TimeStep(step_type=torch.full((64,), M, dtype=torch.int32),
                  observation=torch.randn(64, 3))
    with torch.no_grad():
        step = alg.rollout_step(ts, ())
    assert float(step.output.abs().max()) <= 0.1 + 1e-7
    assert float(step.info.action.abs().max()) > 0.1  # the Normal's own sample (std 1)
    squashed = PPOAlgorithm(obs, act, optimizer=torch.optim.Adam, network_ctor=functools.partial(
        ActorCriticNetwork, tanh_squash=True))
    assert isinstance(squashed.network.policy_head, TanhNormalHead)
    with torch.no_grad():
        step = squashed.rollout_step(ts, ())
    assert torch.equal(step.output, step.info.action)
    assert float(step.output.abs().max()) <= 0.1


def test_a_box_without_finite_bounds_gets_an_unbounded_normal():
    # Before, an unbounded Box (gymnasium's Box(-inf, inf)) had no policy head at all.
    obs, act = TensorSpec((3,)), TensorSpec((2,))
    alg = PPOAlgorithm(obs, act, optimizer=torch.optim.Adam)
    assert isinstance(alg.network.policy_head, NormalHead)
    ts = TimeStep(step_type=torch.full((64,), M, dtype=torch.int32),
                  observation=torch.randn(64, 3))
    with torch.no_grad():
        step = alg.rollout_step(ts, ())
    assert step.output.shape == (64, 2) and torch.equal(step.output, step.info.action)
    with pytest.raises(ValueError, match=r"TanhNormalHead squashes actions into finite bounds; "
                                         r"the action space has none"):
        PPOAlgorithm(obs, act, optimizer=torch.optim.Adam, network_ctor=functools.partial(
            ActorCriticNetwork, tanh_squash=True))


def _cartpole(num_env_steps=25_000, **kwargs):
    env = load("CartPole-v1", 8, seed=0)
    config = TrainerConfig(unroll_length=32, num_updates_per_train_iter=10,
                           mini_batch_size=64, mini_batch_length=1, num_iterations=0,
                           num_env_steps=num_env_steps)
    alg = PPOAlgorithm(
        env.observation_spec(), env.action_spec(), env=env, config=config, gamma=0.98,
        td_lambda=0.8, network_ctor=functools.partial(ActorCriticNetwork,
                                                      shared_encoder=False),
        optimizer=functools.partial(torch.optim.Adam, lr=1e-3), gradient_clipping=0.5,
        **kwargs)
    return alg, env


def _unrolled_experience(loop, steps):
    """``experience_for_update`` of PPO: one batch-major unroll of the loop, preprocessed,
    and its mask."""
    with torch.no_grad():
        unroll = loop.unroll(steps)
    bm = nest.map_structure(lambda x: x.transpose(0, 1), unroll)
    ts, info = loop.algorithm.preprocess_experience(bm.time_step, bm.rollout_info, None)
    valid = valid_step_mask(unroll.time_step.step_type).transpose(0, 1)
    return bm._replace(rollout_info=info), valid


def test_ppo_resumes_exactly():
    assert_resumes_exactly(_cartpole, 3, functools.partial(_unrolled_experience, steps=4))


@pytest.mark.parametrize("action_spec,tanh_squash", [
    (BoundedTensorSpec((), torch.int64, 0, 3), False),
    (BoundedTensorSpec((3,), torch.int64, 0, [1, 2, 4]), False),
    (BoundedTensorSpec((2,), torch.float32, -1.0, 1.0), False),
    (BoundedTensorSpec((2,), torch.float32, -1.0, 1.0), True),
    (TensorSpec((2,)), False),
    (BoundedTensorSpec((2, 2), torch.int8, 0, 1), False),
], ids=["discrete", "multi_discrete", "box_clipped", "box_tanh", "box_unbounded",
        "multi_binary_2d"])
def test_every_policy_kind_goes_through_a_whole_update(action_spec, tanh_squash):
    obs = TensorSpec((3,))
    alg = PPOAlgorithm(obs, action_spec, optimizer=torch.optim.Adam,
                       network_ctor=functools.partial(ActorCriticNetwork,
                                                      tanh_squash=tanh_squash))
    t_len, b = 5, 4
    steps = []
    with torch.no_grad():
        for t in range(t_len):
            ts = TimeStep(step_type=torch.full((b,), F if t == 0 else M, dtype=torch.int32),
                          reward=torch.randn(b), discount=torch.ones(b),
                          observation=torch.randn(b, 3))
            steps.append((ts, alg.rollout_step(ts, ()).info))
    stack = lambda xs: nest.map_structure(lambda *x: torch.stack(x, 1), *xs)  # noqa: E731
    ts, info = stack([s[0] for s in steps]), stack([s[1] for s in steps])  # [B, T]
    ts, info = alg.preprocess_experience(ts, info, None)
    flat = nest.map_structure(lambda x: x.transpose(0, 1).reshape(t_len * b, *x.shape[2:]),
                              (ts, info))
    train_info = alg.train_step(flat[0], (), flat[1]).info
    train_info = nest.map_structure(lambda x: x.reshape(t_len, b, *x.shape[1:]), train_info)
    before = [p.detach().clone() for p in alg.parameters()]
    loss = alg.calc_loss(train_info)
    assert loss.loss.shape == (t_len, b)
    learner_of(alg).update_with_gradient(loss, train_info.valid)
    assert any(not torch.equal(p0, p) for p0, p in zip(before, alg.parameters()))


def test_a_carried_step_that_does_not_fit_is_dropped_with_a_warning(caplog):
    from rlf.algorithms.training_loop import RunCheckpoint
    alg, env = _cartpole()
    loop = build_training(alg, SyncUnroller(env, alg))
    loop.train_iter()
    state = RunCheckpoint(alg, loop).state_dict()
    other, other_env = _cartpole()
    other_loop = build_training(other, SyncUnroller(other_env, other))
    carried = state["_extra_state"]["last_unroll_step"]
    state["_extra_state"]["last_unroll_step"] = [x[:, :4] for x in carried]  # 4 of 8 envs
    RunCheckpoint(other, other_loop).load_state_dict(state)
    with caplog.at_level("WARNING"):
        other_loop.train_iter()
    assert "carried unroll step does not fit" in caplog.text
    env.close()
    other_env.close()


@pytest.mark.parametrize("kw, message", [
    (dict(importance_ratio_clipping=0.0),
     "importance_ratio_clipping must be > 0 (a schedule's values >= 0), got 0.0"),
    (dict(importance_ratio_clipping=[(0, 0.2), (100, -0.1)]),
     "importance_ratio_clipping must be > 0 (a schedule's values >= 0), got [(0, 0.2), "
     "(100, -0.1)]"),
    (dict(value_clipping=-0.1), "value_clipping must be > 0 or None (no clipping), got -0.1"),
    (dict(td_lambda=1.2), "td_lambda must be in [0, 1], got 1.2"),
    (dict(td_loss_weight=-1.0), "td_loss_weight must be >= 0 (a negative weight would "
                                "maximise the value error), got -1.0"),
])
def test_out_of_range_clipping_and_lambda_are_refused(kw, message):
    # A non-positive value clipping was accepted: a clip range of width <= 0; so was a
    # negative value-loss weight.
    obs, act = TensorSpec((4,)), BoundedTensorSpec((), torch.int64, 0, 1)
    with pytest.raises(ValueError, match=re.escape(f"PPOAlgorithm: {message}")):
        PPOAlgorithm(obs, act, optimizer=torch.optim.Adam, **kw)


@pytest.mark.slow  # (actors or a long run)
def test_a_clip_range_schedule_follows_the_environment_steps():
    # SB3's linear clip-range decay: epsilon interpolated over EnvironmentSteps, down to 0
    # (a clip range of 0 keeps the surrogate's gradient only where the ratio moved against
    # the advantage). An iteration takes 8 x 32 = 256 steps; EnvironmentSteps leaves out the
    # FIRST ones (8 resets and one per finished episode).
    alg, env = _cartpole(importance_ratio_clipping=[(0, 0.2), (1024, 0.0)])
    assert alg.importance_ratio_clipping == 0.2
    alg.train_iter()
    steps = alg.get_env_steps()
    assert 200 < steps <= 256
    assert alg.importance_ratio_clipping == pytest.approx(0.2 * (1 - steps / 1024))
    for _ in range(4):
        alg.train_iter()
    assert alg.importance_ratio_clipping == 0.0
    assert all(torch.isfinite(p).all() for p in alg.parameters())
    env.close()


@pytest.mark.parametrize("unroll_length", [8, 1])
def test_without_mini_batch_settings_ppo_trains_one_epoch_over_the_whole_unroll(unroll_length):
    # Before, TrainerConfig's defaults sent PPO down the one-update-on-the-rollout's-graph
    # path, whose infos have no recomputed policy: an AttributeError at the first update.
    # And the first unroll of one step reached GAE, which needs T >= 2: a ValueError.
    env = load("CartPole-v1", 2, seed=0)
    alg = PPOAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                       config=TrainerConfig(unroll_length=unroll_length, num_iterations=3),
                       optimizer=torch.optim.Adam)
    loop = build_training(alg, SyncUnroller(env, alg))
    before = [p.detach().clone() for p in alg.parameters()]
    assert loop.data_path.name == "unroll_epochs"
    if unroll_length == 1:
        assert alg.train_iter() == 0  # one step, no transition: carried over
        assert all(torch.equal(a, b) for a, b in zip(before, alg.parameters()))
    else:
        assert alg.train_iter() == 8 * 2  # one batch of every step of the unroll
    # With the previous unroll's last step.
    assert alg.train_iter() == (unroll_length + 1) * 2
    assert any(not torch.equal(a, b) for a, b in zip(before, alg.parameters()))
    env.close()


def _recurrent_cartpole(use_rollout_state=True, shared_encoder=True):
    env = load("CartPole-v1", 4, seed=0, masked_observation_indices=[1, 3])
    config = TrainerConfig(unroll_length=8, num_updates_per_train_iter=2, mini_batch_size=2,
                           mini_batch_length=8, use_rollout_state=use_rollout_state,
                           num_iterations=10)
    alg = PPOAlgorithm(
        env.observation_spec(), env.action_spec(), env=env, config=config,
        network_ctor=functools.partial(ActorCriticNetwork, lstm_size=8,
                                       shared_encoder=shared_encoder),
        optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    return alg, env


def test_recurrent_ppo_trains_sequences_from_the_stored_state():
    torch.manual_seed(0)
    with pytest.raises(ValueError, match="use_rollout_state = True"):
        alg, env = _recurrent_cartpole(use_rollout_state=False)
        build_training(alg, SyncUnroller(env, alg))
    alg, env = _recurrent_cartpole()
    loop = build_training(alg, SyncUnroller(env, alg))
    seen = []
    train_step = alg.train_step
    alg.train_step = lambda ts, state, info: (seen.append(state), train_step(ts, state,
                                                                              info))[1]
    for _ in range(2):  # the second unroll starts where the first left its LSTM state
        with torch.no_grad():
            unroll = loop.unroll(8)
        seen.clear()
        path = loop.data_path  # unroll_epochs: observe, then its mini-batches
        path.observe(unroll)
        for batch in path.batches():
            learner_of(alg).update(batch)
    stored_h = unroll.state[0][0]  # h before the unroll's first step, [B, 8]
    assert bool(stored_h.abs().sum() > 0)
    # Each sequence (the unroll's 8 steps, after the carried step is cut off) starts from the
    # state the actor had at its first step: 2 epochs x 2 mini-batches of 2 sequences.
    starts = torch.cat([h for h, _ in seen[::8]])
    assert starts.shape == (8, 8)
    assert all(any(torch.allclose(row, stored) for stored in stored_h) for row in starts)
    assert alg.num_updates == 2 * 2 * 2
    env.close()


@pytest.mark.parametrize("shared_encoder", [True, False], ids=["one_core", "value_core"])
def test_recurrent_ppo_resumes_exactly(shared_encoder):
    assert_resumes_exactly(functools.partial(_recurrent_cartpole, shared_encoder=shared_encoder),
                           3, functools.partial(_unrolled_experience, steps=8))


def test_a_value_core_of_its_own_keeps_the_value_loss_out_of_the_policy_memory():
    torch.manual_seed(0)
    net = ActorCriticNetwork(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                             lstm_size=4, shared_encoder=False)
    assert net.state_spec == ((TensorSpec((4,)),) * 2, (TensorSpec((4,)),) * 2)
    state = ((torch.randn(3, 4), torch.randn(3, 4)), (torch.randn(3, 4), torch.randn(3, 4)))
    x = torch.randn(3, 2)
    params, value, (policy_state, value_state) = net(x, state)
    assert torch.equal(policy_state[0], net.lstm(net.encoder(x), state[0])[0])
    assert torch.equal(value_state[0], net.value_lstm(net.value_encoder(x), state[1])[0])
    value.sum().backward()
    assert all(p.grad is None for p in [*net.lstm.parameters(), *net.encoder.parameters()])
    assert all(p.grad is not None for p in net.value_lstm.parameters())
