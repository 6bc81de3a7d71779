"""R2D2: the value rescaling and its inverse, the rescaled n-step double-Q target and the
sequence priority against hand computations, both networks started from the actor's stored
state and burnt in, the stored state being the actor's, and exact resume (recurrent states
and priorities included)."""

import functools
from pathlib import Path

import gin
import pytest
import torch

from rlf.algorithms import R2D2Algorithm, TrainerConfig, TrainingLoop
from rlf.algorithms.dqn import DQNInfo, dqn_loss
from rlf.algorithms.r2d2 import r2d2_priority
from rlf.algorithms.value_ops import inverse_value_rescaling, value_rescaling
from rlf.data_structures import Experience, StepType, TimeStep
from rlf.environments import load
from rlf.networks import MLPEncoder, QNetwork, RecurrentQNetwork
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from rlf.trainers import Trainer
from rlf.utils.checkpoint import load_checkpoint_file
from rlf.utils.common import reset_state_if_necessary
from rlf.utils.tensorboard_reader import read_scalars
from rlf.algorithms import loop_of

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST
EPS = 1e-3


def h(x):  # Pohlen et al. 2018, float64
    return (1 if x >= 0 else -1) * ((abs(x) + 1) ** 0.5 - 1) + EPS * x


def h_inv(x):
    root = ((1 + 4 * EPS * (abs(x) + 1 + EPS)) ** 0.5 - 1) / (2 * EPS)
    return (1 if x >= 0 else -1) * (root ** 2 - 1)


def test_value_rescaling_matches_hand_values_and_inverts():
    x = torch.tensor([3.0, -8.0], dtype=torch.float64)
    assert value_rescaling(x).tolist() == pytest.approx([1.003, -2.008], abs=1e-12)
    assert inverse_value_rescaling(torch.tensor([1.003, -2.008], dtype=torch.float64)
                                   ).tolist() == pytest.approx([3.0, -8.0], abs=1e-9)
    x = torch.cat([torch.linspace(-1e4, 1e4, 2001), torch.tensor([0.0, 1e-6, -1e-6])]).double()
    assert torch.allclose(inverse_value_rescaling(value_rescaling(x)), x, rtol=1e-10,
                          atol=1e-9)
    y = x / 100
    assert torch.allclose(value_rescaling(inverse_value_rescaling(y)), y, rtol=1e-10,
                          atol=1e-9)
    assert [h(v) for v in (3.0, -8.0)] == pytest.approx([1.003, -2.008])


def test_the_rescaled_n_step_double_q_target_by_hand():
    # B = 2, T = 4, n = 2, gamma = 0.9. Column 0: no boundary (the last transition has one
    # reward left before the sequence ends); column 1: terminates at step 2.
    torch.manual_seed(0)
    gamma = 0.9
    step_type = torch.tensor([[M, M], [M, M], [M, L], [M, F]], dtype=torch.int32)
    reward = torch.tensor([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 0.0]])
    d = torch.tensor([[1.0, 1.0], [1.0, 1.0], [1.0, 0.0], [1.0, 1.0]])
    q = torch.randn(4, 2, 3) * 2
    target = torch.randn(3, 2, 3) * 2  # Q'(x_t, .) for t = 1..3
    action = torch.tensor([[0, 1], [2, 2], [1, 0], [0, 0]])
    loss, td = dqn_loss(q, action, target, reward, step_type, gamma * d, n_step=2,
                        double_q=True, huber_delta=None, value_rescaling_epsilon=EPS)

    def boot(t, b):  # h^{-1}(Q'(x_t, argmax_a Q(x_t, a)))
        return h_inv(float(target[t - 1, b, int(q[t, b].argmax())]))

    r, g = reward.double(), gamma * d.double()
    expected = {
        (0, 0): h(r[1, 0] + g[1, 0] * r[2, 0] + g[1, 0] * g[2, 0] * boot(2, 0)),
        (1, 0): h(r[2, 0] + g[2, 0] * r[3, 0] + g[2, 0] * g[3, 0] * boot(3, 0)),
        (2, 0): h(r[3, 0] + g[3, 0] * boot(3, 0)),  # one step left in the sequence
        (0, 1): h(r[1, 1] + g[1, 1] * r[2, 1]),  # terminated at step 2: no bootstrap
        (1, 1): h(float(r[2, 1])),
    }
    for (t, b), y in expected.items():
        q_taken = float(q[t, b, action[t, b]])
        assert float(td[t, b]) == pytest.approx(float(y) - q_taken, abs=1e-5), (t, b)
        assert float(loss[t, b]) == pytest.approx(0.5 * (float(y) - q_taken) ** 2, abs=1e-4)
    assert float(td[2, 1]) == 0.0 and float(loss[2, 1]) == 0.0  # LAST starts no transition


def test_the_sequence_priority_mixes_max_and_mean_by_hand():
    td = torch.tensor([[1.0, -3.0, 5.0], [2.0, 0.0, 5.0], [-0.5, 9.0, 5.0]])
    mask = torch.tensor([[1, 1, 0], [1, 0, 0], [1, 0, 0]], dtype=torch.bool)
    p = r2d2_priority(td, mask, eta=0.9)
    assert p.tolist() == pytest.approx([0.9 * 2.0 + 0.1 * 3.5 / 3, 3.0, 1e-6])
    assert r2d2_priority(td, mask, eta=0.0).tolist() == pytest.approx([3.5 / 3, 3.0, 1e-6])


def _net(observation_spec, action_spec):
    return RecurrentQNetwork(observation_spec, action_spec, lstm_size=4,
                             encoder_ctor=functools.partial(MLPEncoder, hidden=(8,)))


def test_both_networks_start_from_the_stored_state_and_burn_in():
    torch.manual_seed(0)
    config = TrainerConfig(mini_batch_size=2, mini_batch_length=6, burn_in_steps=2,
                           use_rollout_state=True)
    alg = R2D2Algorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 2),
                        config=config, q_network_ctor=_net, n_step=1)
    with torch.no_grad():  # a target network unlike the online one
        for p in alg.target_q_network.parameters():
            p.add_(torch.randn_like(p))
    t_len, batch = 6, 2
    step_type = torch.full((t_len, batch), M, dtype=torch.int32)
    step_type[4, 1] = F  # a new episode inside the sequence
    obs = torch.randn(t_len, batch, 2, requires_grad=True)
    ts = TimeStep(step_type=step_type, reward=torch.ones(t_len, batch),
                  discount=torch.ones(t_len, batch), observation=obs,
                  prev_action=torch.zeros(t_len, batch, dtype=torch.int64),
                  env_id=torch.zeros(t_len, batch, dtype=torch.int32), env_info={})
    stored = (torch.randn(t_len, batch, 4), torch.randn(t_len, batch, 4))
    exp = Experience(time_step=ts, action=torch.zeros(t_len, batch, dtype=torch.int64),
                     rollout_info=DQNInfo(action=torch.randint(0, 3, (t_len, batch))),
                     state=stored)
    info = TrainingLoop(alg).data_path.sequences.train_info(alg, exp)
    assert info.q_values.shape == (4, 2, 3)  # [T-k, B, N]: the burn-in's 2 steps left out

    zeros = (torch.zeros(batch, 4), torch.zeros(batch, 4))
    with torch.no_grad():
        for net, got in ((alg.q_network, info.q_values), (alg.target_q_network,
                                                          info.target_q_values)):
            state = (stored[0][0], stored[1][0])  # the actor's state at the first step
            for t in range(t_len):
                state = reset_state_if_necessary(state, zeros, step_type[t] == F)
                q, state = net(obs[t], state)
                if t >= 2:
                    assert torch.allclose(got[t - 2], q, atol=1e-6), t
    alg.calc_loss(info).loss.sum().backward()
    assert torch.equal(obs.grad[:2], torch.zeros(2, batch, 2))  # no gradient in the burn-in
    assert bool((obs.grad[2:4, 0].abs().sum(-1) > 0).all()) and bool(obs.grad[2, 1].any())
    # Step 3 of column 1 precedes a FIRST (a cut): no loss, and the reset stops its state.
    assert torch.equal(obs.grad[3, 1], torch.zeros(2))


def test_a_feed_forward_network_is_refused():
    with pytest.raises(ValueError, match="needs a recurrent Q network"):
        R2D2Algorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 2),
                      q_network_ctor=QNetwork)


def test_the_stored_state_is_the_one_the_actor_had():
    # Nothing trains (initial_collect_steps = 400 is not reached): recomputing the LSTM over each
    # environment's stored steps from zeros, reset at every FIRST, gives every stored state.
    torch.manual_seed(0)
    env = load("CartPole-v1", 2, seed=0, masked_observation_indices=[1, 3])
    config = TrainerConfig(unroll_length=40, mini_batch_size=2, mini_batch_length=6,
                           burn_in_steps=2, use_rollout_state=True, initial_collect_steps=400,
                           replay_buffer_length=200, num_iterations=3)
    alg = R2D2Algorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                        q_network_ctor=_net, n_step=1, epsilon_greedy=0.5,
                        optimizer=torch.optim.Adam)
    for _ in range(3):
        alg.train_iter()
    exp = loop_of(alg).replay_buffer.gather_all(ignore_earliest_frames=False)  # [E, 120]
    step_type = exp.time_step.step_type
    assert int((step_type == L).sum()) >= 2  # episodes ended inside the stored steps
    zeros = (torch.zeros(2, 4), torch.zeros(2, 4))
    state = zeros
    with torch.no_grad():
        for t in range(step_type.shape[1]):
            state = reset_state_if_necessary(state, zeros, step_type[:, t] == F)
            assert torch.allclose(exp.state[0][:, t], state[0], atol=1e-6), t
            assert torch.allclose(exp.state[1][:, t], state[1], atol=1e-6), t
            _, state = alg.q_network(exp.time_step.observation[:, t], state)
    env.close()


def _trainer_config(num_iterations):
    ctor = functools.partial(R2D2Algorithm, q_network_ctor=_net, n_step=2,
                             epsilon_greedy=0.3, target_update_period=3,
                             optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    return TrainerConfig(algorithm_ctor=ctor, random_seed=3, unroll_length=4,
                         num_iterations=num_iterations, summary_interval=1,
                         num_updates_per_train_iter=2, mini_batch_size=4, mini_batch_length=6,
                         burn_in_steps=2, use_rollout_state=True, priority_replay=True,
                         initial_collect_steps=16, replay_buffer_length=100,
                         save_replay_buffer=True, checkpoint_interval=100)


def _losses(root: Path) -> dict:
    steps, values, _ = read_scalars(root / "train", "loss/R2D2Algorithm")
    return dict(zip(steps, values))


def test_r2d2_resumes_exactly(tmp_path):
    gin.parse_config("load.env_name = 'CartPole-v1'\nload.num_envs = 2\n"
                     "load_gym.masked_observation_indices = [1, 3]")
    try:
        Trainer(_trainer_config(12), tmp_path / "a", progress=False).train()
        Trainer(_trainer_config(6), tmp_path / "b", progress=False).train()
        Trainer(_trainer_config(12), tmp_path / "b", progress=False).train()
    finally:
        gin.clear_config()
    a, b = _losses(tmp_path / "a"), _losses(tmp_path / "b")
    assert [b[s] for s in range(7, 13)] == [a[s] for s in range(7, 13)]
    assert len(set(a[s] for s in range(7, 13))) > 1  # the losses change: not vacuous
    replay = [load_checkpoint_file(tmp_path / r / "ckpt" / "replay_buffer-12.pt")["algorithm"]
              for r in ("a", "b")]
    priority = [k for k in replay[0] if "priority" in k]
    assert priority
    for k in replay[0]:  # stored states and priorities included
        assert torch.equal(replay[0][k], replay[1][k]), k
    tree = replay[0][priority[0]]
    assert float(tree.max()) > float(tree[tree > 0].min())  # updated priorities differ
    model = [load_checkpoint_file(tmp_path / r / "ckpt" / "ckpt-12.pt")["algorithm"]
             for r in ("a", "b")]
    for k, v in model[0].items():
        if isinstance(v, torch.Tensor):
            assert torch.equal(v, model[1][k]), k
