"""ImpalaAlgorithm: episode boundaries in V-trace targets, learning CartPole, one Pong
iteration, bad action specs."""

import functools
import re

import pytest
import torch

from rlf.algorithms import ExperienceSource, ImpalaAlgorithm, TrainerConfig, loop_of
from rlf.algorithms.impala import ImpalaInfo
from rlf import nest
from rlf.data_structures import RowSource, StepType, TimeStep, experience_like
from rlf.environments import load
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from tests.algorithms._learners import learner_of

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST


def test_vtrace_targets_at_termination_and_truncation():
    g = 0.5
    alg = ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                          gamma=g)
    # env 0: F M L(truncated: discount 1) F M;  env 1: M L(terminated: discount 0) F M M
    step_type = torch.tensor([[F, M], [M, L], [L, F], [F, M], [M, M]], dtype=torch.int32)
    discount = torch.tensor([[1., 1.], [1., 0.], [1., 1.], [1., 1.], [1., 1.]])
    reward = torch.tensor([[0., 9.], [1., 2.], [3., 0.], [0., 5.], [6., 7.]])
    value = torch.tensor([[10., 20.], [11., 21.], [12., 22.], [13., 23.], [14., 24.]])
    logits = torch.zeros(5, 2, 2)
    info = ImpalaInfo(reward=reward, step_type=step_type, discount=discount,
                      action=torch.zeros(5, 2, dtype=torch.int64), behaviour_params=logits,
                      target_params=logits, value=value)
    returns, _, valid, _ = alg.vtrace_returns(info)
    v = value
    e0_3 = reward[4, 0] + g * v[4, 0]
    e0_1 = reward[2, 0] + g * v[2, 0]        # truncated: bootstrap from the last state's value
    e0 = [reward[1, 0] + g * e0_1, e0_1, v[2, 0], e0_3]  # LAST starts no transition
    e1_3 = reward[4, 1] + g * v[4, 1]
    e1 = [reward[1, 1], v[1, 1], reward[3, 1] + g * e1_3, e1_3]  # terminated: no bootstrap
    torch.testing.assert_close(returns.vs, torch.tensor([e0, e1]).T)
    assert valid.tolist() == [[True, True], [True, False], [False, True], [True, True]]
    assert returns.pg_advantages[2, 0] == 0 and returns.pg_advantages[1, 1] == 0


def test_box_actions_are_clipped_for_the_environment_and_trained_unclipped():
    # Before, IMPALA handed the environment Normal samples outside the Box.
    act = BoundedTensorSpec((2,), torch.float32, -0.1, 0.1)
    alg = ImpalaAlgorithm(TensorSpec((3,)), act, optimizer=torch.optim.Adam)
    ts = TimeStep(step_type=torch.full((64,), StepType.MID, dtype=torch.int32),
                  observation=torch.randn(64, 3))
    with torch.no_grad():
        step = alg.rollout_step(ts, ())
        greedy = alg.predict_step(ts, ()).output
    assert float(step.output.abs().max()) <= 0.1 + 1e-7
    assert float(step.info.action.abs().max()) > 0.1  # the Normal's own sample (std 1)
    assert torch.equal(step.output, step.info.action.clamp(-0.1, 0.1))
    assert float(greedy.abs().max()) <= 0.1 + 1e-7


def test_unsupported_action_spec_is_named():
    with pytest.raises(ValueError, match="no policy head for action spec"):
        ImpalaAlgorithm(TensorSpec((2,)), TensorSpec((3, 3), torch.int64))


def test_experience_replay_mixes_the_configured_fraction_with_max_use():
    seen = []

    class Probe(ImpalaAlgorithm):
        def calc_loss(self, info):
            returns, log_rhos, valid, _ = self.vtrace_returns(info)
            seen.append((info.value.shape, log_rhos[valid],
                         loop_of(self).learner.row_sources.tolist()))
            return super().calc_loss(info)

    torch.manual_seed(0)
    env = load("CartPole-v1", 4, seed=0)
    config = TrainerConfig(unroll_length=8, whole_replay_buffer_training=True,
                           clear_replay_buffer=True, num_iterations=1)
    alg = Probe(env.observation_spec(), env.action_spec(), env=env, config=config,
                experience_replay_fraction=0.5, experience_replay_length=50, max_use=2,
                optimizer=functools.partial(torch.optim.Adam, lr=1e-2))
    for _ in range(12):
        alg.train_iter()
    env.close()
    # 4 online + round(4 * 0.5 / 0.5) = 4 replayed sequences of unroll_length + 1 steps
    assert all(shape == (9, 8) for shape, _, _ in seen)
    # the rows mix_experience appended are marked as such, after the sampled ones
    assert seen[-1][2] == [RowSource.SAMPLED] * 4 + [RowSource.MIXED] * 4
    assert learner_of(alg).row_sources is None  # outside an update
    assert seen[-1][1].abs().max() > 1e-4  # replayed steps were acted by older policies
    memory = alg.experience_replay_memory
    assert int(memory._use_count.max()) <= 2 and int(memory._use_count.sum()) > 0
    with pytest.raises(ValueError, match="experience_replay_fraction"):
        ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                        experience_replay_fraction=1.0)


def test_memory_states_are_all_checked_before_any_is_loaded():
    """A restore of two memories whose second does not fit leaves the first as it was."""
    env = load("CartPole-v1", 4, seed=0)
    config = TrainerConfig(unroll_length=8, whole_replay_buffer_training=True,
                           clear_replay_buffer=True, num_iterations=1)
    alg = ImpalaAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                          experience_replay_fraction=0.5, experience_replay_length=50,
                          optimizer=functools.partial(torch.optim.Adam, lr=1e-2))
    alg.train_iter()
    env.close()
    loop = loop_of(alg)
    first = loop.memories["experience_replay"]
    saved = {k: v.clone() for k, v in first.state_dict().items()}
    assert int(saved["_current_size"].sum()) > 0
    second = alg._make_memory(first.data_spec, first.num_environments)
    loop.data_path.memories["second"] = second  # a second source's memory, as if declared
    empty = {k: v.clone() for k, v in second.state_dict().items()}
    bad = dict(empty, **{"_current_size": empty["_current_size"] + 1})
    with pytest.raises(ValueError, match="_current_size .* the buffer was not changed"):
        loop.load_memory_state_dicts({"experience_replay": empty, "second": bad})
    assert all(torch.equal(v, saved[k]) for k, v in first.state_dict().items())
    assert loop.load_memory_state_dicts({"experience_replay": empty, "second": empty}) == []
    assert int(first.state_dict()["_current_size"].sum()) == 0


@pytest.mark.parametrize("on_policy", [True, False])
def test_amp_autocast_path_runs_on_cpu(on_policy):
    # enable_amp: bfloat16 autocast on CPU (float16 + GradScaler on CUDA, not testable here)
    env = load("CartPole-v1", 4, seed=0)
    config = TrainerConfig(unroll_length=8, whole_replay_buffer_training=not on_policy,
                           clear_replay_buffer=not on_policy, enable_amp=True, num_iterations=3)
    alg = ImpalaAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                          is_on_policy=on_policy,
                          optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    before = [p.detach().clone() for p in alg.parameters()]
    for _ in range(3):
        alg.train_iter()
    assert all(p.dtype == torch.float32 for p in alg.parameters())
    assert any(not torch.equal(a, b) for a, b in zip(before, alg.parameters()))
    env.close()


def test_entropy_schedule_is_linear_in_environment_steps_and_weights_the_loss():
    env = load("CartPole-v1", 2, seed=0)
    config = TrainerConfig(unroll_length=5, num_iterations=10)
    alg = ImpalaAlgorithm(env.observation_spec(), env.action_spec(), env=env, config=config,
                          is_on_policy=True, optimizer=functools.partial(torch.optim.Adam),
                          entropy_regularization=[(0, 0.01), (20, 0.002), (40, 0.0)])
    seen = []
    try:
        for _ in range(6):
            seen.append((alg.get_env_steps(), alg.entropy_regularization))
            alg.train_iter()
    finally:
        env.close()
    def by_hand(s):  # the three points, joined by straight lines, constant after the last
        return 0.01 - 0.008 * s / 20 if s <= 20 else max(0.0, 0.002 - 0.002 * (s - 20) / 20)

    steps = [s for s, _ in seen]
    assert steps[0] == 0 and any(0 < s < 20 for s in steps) and any(
        20 < s < 40 for s in steps) and steps[-1] > 40  # every piece is visited
    assert [w for _, w in seen] == pytest.approx([by_hand(s) for s in steps], abs=1e-12)
    # The loss uses the current weight (0 now): loss = pg + 0.5 * value (- 0 * entropy).
    T, B = 3, 2
    logits = torch.zeros(T, B, 2)  # uniform: entropy log(2), so a non-zero weight would show
    g = torch.Generator().manual_seed(0)
    info = ImpalaInfo(reward=torch.rand(T, B, generator=g),
                      step_type=torch.full((T, B), int(M)), discount=torch.ones(T, B),
                      action=torch.zeros(T, B, dtype=torch.int64), behaviour_params=logits,
                      target_params=logits, value=torch.rand(T, B, generator=g))
    out = alg.calc_loss(info)
    torch.testing.assert_close(out.loss, out.extra["pg_loss"] + 0.5 * out.extra["value_loss"])


@pytest.mark.parametrize("schedule", [[], [(10, 0.01), (5, 0.0)], [(-1, 0.01)], "0.01x",
                                      [(0, 0.01, 3)]])
def test_bad_entropy_schedule_is_named(schedule):
    with pytest.raises(ValueError, match="entropy_regularization"):
        ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                        entropy_regularization=schedule)


def _one_transition(reward):
    """T = 2, B = 1: pi(a=0|x_0) = 0.6 and mu(a=0|x_0) = 0.4, so r_0 = 1.5."""
    target = torch.log(torch.tensor([[[0.6, 0.4]], [[0.5, 0.5]]])).requires_grad_()
    behaviour = torch.log(torch.tensor([[[0.4, 0.6]], [[0.5, 0.5]]]))
    return target, ImpalaInfo(
        reward=torch.tensor([[0.0], [reward]]), step_type=torch.full((2, 1), int(M)),
        discount=torch.ones(2, 1), action=torch.zeros(2, 1, dtype=torch.int64),
        behaviour_params=behaviour, target_params=target, value=torch.tensor([[0.2], [0.4]]))


@pytest.mark.parametrize("reward,loss,grad", [
    # A = r + gamma * V(x_1) - V(x_0) = +-1 + 0.5 * 0.4 - 0.2 = +-1 (by hand).
    (1.0, -1.2, [0.0, 0.0]),   # A > 0 and r = 1.5 > 1 + 0.2: clipped, no gradient
    (-1.0, 1.5, [0.6, -0.6]),  # A < 0: min picks the unclipped r A; d/dlogits = -A r (1 - pi)
])
def test_clipped_surrogate_by_hand(reward, loss, grad):
    alg = ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                          gamma=0.5, importance_ratio_clipping=0.2)
    target, info = _one_transition(reward)
    pg_loss = alg.calc_loss(info).extra["pg_loss"]
    assert pg_loss.detach()[:, 0].tolist() == pytest.approx([loss, 0.0])
    pg_loss.sum().backward()
    torch.testing.assert_close(target.grad[0, 0], torch.tensor(grad))
    assert not target.grad[1].any()


def test_clipped_surrogate_has_impalas_gradient_when_pi_equals_mu():
    # r_t = rho_t = 1: PPO's gradient -A grad(log pi) is IMPALA's, LAST steps included.
    torch.manual_seed(0)
    T, B = 6, 3
    logits, reward, value = torch.randn(T, B, 4), torch.randn(T, B), torch.randn(T, B)
    action = torch.randint(0, 4, (T, B))
    step_type = torch.full((T, B), int(M))
    step_type[2, 1], step_type[3, 1] = int(L), int(F)
    grads = []
    for clipping in (None, 0.1):
        alg = ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 3),
                              importance_ratio_clipping=clipping)
        target = logits.clone().requires_grad_()
        info = ImpalaInfo(reward=reward, step_type=step_type, discount=torch.ones(T, B),
                          action=action, behaviour_params=logits, target_params=target,
                          value=value)
        alg.calc_loss(info).extra["pg_loss"].sum().backward()
        grads.append(target.grad)
    torch.testing.assert_close(grads[0], grads[1])
    assert grads[0][:-1].abs().sum() > 0 and not grads[0][2, 1].any()  # LAST: no gradient


@pytest.mark.parametrize("prox,reward,loss,grad", [
    # pi(a=0) = 0.6, mu = 0.4, gamma 0.5, A = +-1 (_one_transition); epsilon 0.3.
    # pi_prox = 0.5: r = pi / pi_prox = 1.2 inside the clip range; weight min(1, 1.25) = 1;
    # d/dlogits of -w r A = -w A r (onehot - pi) = -1.2 A [0.4, -0.4].
    (0.5, 1.0, -1.2, [-0.48, 0.48]),
    # pi_prox = 0.3: r = 2 and weight min(1, 0.75) = 0.75. A > 0: clipped at 1.3, no gradient.
    (0.3, 1.0, -0.75 * 1.3, [0.0, 0.0]),
    # A < 0: min picks r A = -2; loss 0.75 * 2; gradient -0.75 * (-1) * 2 * [0.4, -0.4].
    (0.3, -1.0, 1.5, [0.6, -0.6]),
])
def test_proximal_policy_surrogate_by_hand(prox, reward, loss, grad):
    alg = ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                          gamma=0.5, importance_ratio_clipping=0.3, proximal_policy=True)
    target, info = _one_transition(reward)
    info = info._replace(proximal_params=torch.log(torch.tensor(
        [[[prox, 1 - prox]], [[0.5, 0.5]]])))
    pg_loss = alg.calc_loss(info).extra["pg_loss"]
    assert pg_loss.detach()[:, 0].tolist() == pytest.approx([loss, 0.0])
    pg_loss.sum().backward()
    torch.testing.assert_close(target.grad[0, 0], torch.tensor(grad))


def test_proximal_policy_surrogate_matches_a_float64_transcription():
    """Hilton et al. 2022's decoupled objective with V-trace's advantage and truncated weight:
    -min(rho_bar, pi_prox / mu) * min(r A, clip(r, 1 - eps, 1 + eps) A), r = pi / pi_prox;
    0 where the step starts no transition. With pi_prox = mu it is the plain surrogate."""
    torch.manual_seed(1)
    T, B, N, g, eps = 7, 4, 3, 0.9, 0.2
    logits = {k: torch.randn(T, B, N) for k in ("pi", "mu", "prox")}
    reward, value = torch.randn(T, B), torch.randn(T, B)
    action = torch.randint(0, N, (T, B))
    step_type = torch.full((T, B), int(M))
    step_type[3, 2], step_type[4, 2] = int(L), int(F)
    alg = ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, N - 1),
                          gamma=g, importance_ratio_clipping=eps, proximal_policy=True)
    info = ImpalaInfo(reward=reward, step_type=step_type, discount=torch.ones(T, B),
                      action=action, behaviour_params=logits["mu"],
                      target_params=logits["pi"], value=value,
                      proximal_params=logits["prox"])
    pg_loss = alg.calc_loss(info).extra["pg_loss"]
    vs = alg.vtrace_returns(info)[0].vs.double()

    def p(name, t, b):
        return torch.softmax(logits[name][t, b].double(), -1)[action[t, b]].item()

    expected = torch.zeros(T, B, dtype=torch.float64)
    for t in range(T - 1):
        for b in range(B):
            if step_type[t, b] == L:
                continue
            next_vs = vs[t + 1, b] if t + 1 < T - 1 else value[T - 1, b].double()
            adv = reward[t + 1, b].double() + g * next_vs - value[t, b].double()
            r = p("pi", t, b) / p("prox", t, b)
            weight = min(1.0, p("prox", t, b) / p("mu", t, b))
            expected[t, b] = -weight * min(r * adv, min(max(r, 1 - eps), 1 + eps) * adv)
    torch.testing.assert_close(pg_loss.double(), expected, rtol=1e-5, atol=1e-6)
    plain = ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, N - 1),
                            gamma=g, importance_ratio_clipping=eps)
    same = info._replace(proximal_params=logits["mu"])
    torch.testing.assert_close(alg.calc_loss(same).extra["pg_loss"],
                               plain.calc_loss(info).extra["pg_loss"])


def test_proximal_policy_is_the_policy_each_iteration_acted_with():
    """pi_prox is refreshed after each iteration: on the unroll's own rows it is mu (the
    sync unroller acts with the last iteration's parameters); replayed rows are older."""
    seen = []

    class Probe(ImpalaAlgorithm):
        def calc_loss(self, info):
            rows = loop_of(self).learner.row_sources
            same = torch.isclose(info.proximal_params, info.behaviour_params, atol=1e-5)[1:]
            seen.append([bool(same[:, b].all()) for b in range(rows.numel())])
            return super().calc_loss(info)

    torch.manual_seed(0)
    env = load("CartPole-v1", 4, seed=0)
    config = TrainerConfig(unroll_length=8, whole_replay_buffer_training=True,
                           clear_replay_buffer=True, num_iterations=1, mini_batch_size=2,
                           num_updates_per_train_iter=2)
    alg = Probe(env.observation_spec(), env.action_spec(), env=env, config=config,
                importance_ratio_clipping=0.3, proximal_policy=True,
                experience_replay_fraction=0.5, experience_replay_length=50,
                optimizer=functools.partial(torch.optim.Adam, lr=1e-2))
    for _ in range(6):
        alg.train_iter()
    env.close()
    # 2 online rows (pi_prox = mu; each sequence's first step is the unroll before's last,
    # acted with older parameters: compared from the second step on) then 2 replayed ones
    assert len(seen) > 4 and all(len(rows) == 4 for rows in seen[-4:])
    assert all(rows[:2] == [True, True] for rows in seen)
    assert not any(rows[2] and rows[3] for rows in seen[-4:])
    state = alg.state_dict()
    assert any(k.startswith("_proximal_network.") for k in state)


@pytest.mark.parametrize("kw,match", [
    (dict(), "needs importance_ratio_clipping and is_on_policy=False"),
    (dict(importance_ratio_clipping=0.3, is_on_policy=True), "is_on_policy=False"),
])
def test_a_proximal_policy_that_would_do_nothing_is_refused(kw, match):
    with pytest.raises(ValueError, match=match):
        ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                        proximal_policy=True, **kw)


def test_memory_settings_without_experience_replay_are_refused():
    # They changed nothing: the memory is made only with experience_replay_fraction > 0.
    with pytest.raises(ValueError, match=re.escape(
            "ImpalaAlgorithm: max_use = 2, experience_replay_stacked_frames = "
            "{'time_step.observation': 4} take effect only with experience replay: set "
            "experience_replay_fraction > 0 too, or remove them")):
        ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1), max_use=2,
                        experience_replay_stacked_frames={"time_step.observation": 4})


def test_a_proximal_policy_of_a_recurrent_network_is_refused():
    from rlf.networks import ActorCriticNetwork
    with pytest.raises(ValueError, match="proximal_policy needs a feed-forward network"):
        ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                        network_ctor=functools.partial(ActorCriticNetwork, lstm_size=8),
                        importance_ratio_clipping=0.3, proximal_policy=True)


def test_bad_importance_ratio_clipping_is_named():
    with pytest.raises(ValueError, match="importance_ratio_clipping"):
        ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                        importance_ratio_clipping=0.0)


def test_vtrace_cuts_an_episode_that_restarts_without_a_last_step():
    # A replayed sequence can hold a MID step followed by FIRST: the environment was restarted
    # (a resume with a saved replay buffer, a restarted actor) without ending the episode.
    # x_1 -> x_2 is then no transition; the episode was truncated at x_1, as if x_1 were LAST
    # with discount 1.
    g = 0.5
    alg = ImpalaAlgorithm(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                          gamma=g)
    reward = torch.tensor([[0.], [1.], [0.], [3.]])
    value = torch.tensor([[10.], [11.], [12.], [13.]])
    logits = torch.zeros(4, 1, 2)

    def returns_of(step_type):
        info = ImpalaInfo(reward=reward, step_type=torch.tensor(step_type, dtype=torch.int32),
                          discount=torch.ones(4, 1), action=torch.zeros(4, 1, dtype=torch.int64),
                          behaviour_params=logits, target_params=logits, value=value)
        return alg.vtrace_returns(info)

    cut, _, cut_valid, _ = returns_of([[F], [M], [F], [M]])
    truncated, _, _, _ = returns_of([[F], [L], [F], [M]])
    e2 = reward[3, 0] + g * value[3, 0]
    e0 = reward[1, 0] + g * value[1, 0]       # bootstrap from the cut state's own value
    torch.testing.assert_close(cut.vs, torch.tensor([[e0], [value[1, 0]], [e2]]))
    assert cut_valid[:, 0].tolist() == [True, False, True]
    assert cut.pg_advantages[1, 0] == 0
    torch.testing.assert_close(cut.vs, truncated.vs)
    torch.testing.assert_close(cut.pg_advantages, truncated.pg_advantages)


def test_old_parameter_names_are_aliases_that_warn_once():
    import warnings

    spec = (TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        old = ImpalaAlgorithm(*spec, discount=0.5, value_weight=0.25, lambda_=0.9)
        ImpalaAlgorithm(*spec, discount=0.5)
    assert (old._gamma, old._td_loss_weight, old._td_lambda) == (0.5, 0.25, 0.9)
    messages = [str(w.message) for w in caught if issubclass(w.category, FutureWarning)]
    assert sorted(messages) == sorted([
        "ImpalaAlgorithm.discount is deprecated; use ImpalaAlgorithm.gamma (the same "
        "quantity, ALF's name)",
        "ImpalaAlgorithm.value_weight is deprecated; use ImpalaAlgorithm.td_loss_weight (the "
        "same quantity, ALF's name)",
        "ImpalaAlgorithm.lambda_ is deprecated; use ImpalaAlgorithm.td_lambda (the same "
        "quantity, ALF's name)"])  # once each, though discount was given twice
    with pytest.raises(ValueError, match="discount \\(deprecated\\) and gamma are both set"):
        ImpalaAlgorithm(*spec, discount=0.5, gamma=0.9)


def test_a_negative_td_loss_weight_is_refused():
    # Accepted before: the value loss was maximised.
    spec = (TensorSpec((4,)), BoundedTensorSpec((), torch.int64, 0, 1))
    with pytest.raises(ValueError, match=re.escape(
            "ImpalaAlgorithm: td_loss_weight must be >= 0 (a negative weight would maximise "
            "the value error), got -0.5")):
        ImpalaAlgorithm(*spec, td_loss_weight=-0.5)


def test_one_step_unrolls_on_the_rollout_graph_are_refused_and_train_in_epochs():
    # Before, each one-step unroll had no transition: the run went on learning nothing.
    env = load("CartPole-v1", 2, seed=0)
    one_step = ImpalaAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                               config=TrainerConfig(unroll_length=1), is_on_policy=True,
                               optimizer=torch.optim.Adam)
    with pytest.raises(ValueError, match=re.escape(
            "ImpalaAlgorithm trains on each unroll's own graph, where a loss over transitions "
            "needs 2 steps of the same unroll: TrainerConfig.unroll_length must be >= 2, "
            "got 1")):
        one_step.train_iter()
    alg = ImpalaAlgorithm(env.observation_spec(), env.action_spec(), env=env,
                          config=TrainerConfig(unroll_length=1, mini_batch_size=2),
                          is_on_policy=True, optimizer=torch.optim.Adam)
    assert alg.train_iter() == 0  # the step is carried over
    assert alg.train_iter() == 2 * 2
    env.close()


def test_sequences_made_by_experience_like_train_as_mixed_rows():
    # A Dyna-style experience source: made sequences in the mini-batch's layout (here copies
    # of real rows' fields), a third of each mini-batch (2 to its 4 rows); they train and
    # are marked MIXED.
    seen = []

    class Dyna(ImpalaAlgorithm):
        def experience_sources(self):
            return (ExperienceSource("model", self._made, fraction=1 / 3),)

        def _made(self, experience, k):
            first = functools.partial(nest.map_structure, lambda x: x[:k])
            return experience_like(experience, k,
                                   observation=first(experience.time_step.observation),
                                   reward=first(experience.time_step.reward),
                                   action=first(experience.action),
                                   rollout_info=first(experience.rollout_info))

        def calc_loss(self, info):
            seen.append((loop_of(self).learner.row_sources.tolist(),
                         info.step_type[:, -2:].T.tolist()))
            return super().calc_loss(info)

    env = load("CartPole-v1", 4, seed=0)
    config = TrainerConfig(unroll_length=4, whole_replay_buffer_training=True,
                           clear_replay_buffer=True, num_iterations=2)
    alg = Dyna(env.observation_spec(), env.action_spec(), env=env, config=config,
               optimizer=functools.partial(torch.optim.Adam, lr=1e-2))
    before = [p.detach().clone() for p in alg.parameters()]
    alg.train_iter()
    alg.train_iter()
    env.close()
    sources, made_step_types = seen[-1]
    assert sources == [RowSource.SAMPLED] * 4 + [RowSource.MIXED] * 2
    assert made_step_types == [[F, M, M, M, M]] * 2  # one episode through each made row
    assert any(not torch.equal(a, b) for a, b in zip(before, alg.parameters()))


def test_a_source_observes_each_stored_step_and_the_old_hook_warns_and_runs_after_it():
    """A source's ``observe`` fills its memory from each stored step (one of ``fraction`` 0
    mixes nothing); a deprecated ``observe_for_replay`` override still runs after it, warned
    once; on an on-policy path, where nothing is stored, the source is refused in one line."""
    from rlf.utils.errors import UserError
    calls = []

    class Watches(ImpalaAlgorithm):
        def experience_sources(self):
            return (ExperienceSource("watch", lambda experience, k: None, 0.0,
                                     observe=lambda step: calls.append("source")),)

        def observe_for_replay(self, exp):
            calls.append("hook")

    env = load("CartPole-v1", 2, seed=0)
    config = TrainerConfig(unroll_length=3, whole_replay_buffer_training=True,
                           clear_replay_buffer=True)
    alg = Watches(env.observation_spec(), env.action_spec(), env=env, config=config,
                  optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    with pytest.warns(DeprecationWarning, match=r"^Watches.observe_for_replay is deprecated"):
        alg.train_iter()
    assert calls == ["source", "hook"] * 3
    on_policy = Watches(env.observation_spec(), env.action_spec(), env=env, config=config,
                        is_on_policy=True, optimizer=functools.partial(torch.optim.Adam, lr=1e-3))
    with pytest.raises(UserError, match=r"^ImpalaAlgorithm's experience sources \['watch'\] "
                                        r"fill their memory from the steps stored in the "
                                        r"replay buffer, which its data path '\w+' has not"):
        on_policy.train_iter()
    env.close()
