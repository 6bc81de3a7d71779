"""Algorithm/RLAlgorithm mechanics: masking, clipping, non-finite losses, checkpoints,
recurrent-state resets, replay-buffer length and training from the buffer."""

import functools
import re

import pytest
import torch
from torch import nn

from rlf.algorithms.algorithm_state import load_initial_checkpoint
from rlf.algorithms import (Algorithm, NonFiniteLossError, RLAlgorithm, TrainerConfig,
                            adjust_replay_buffer_length)
from rlf.algorithms.data_paths import Sequences, replay_buffer_length
from rlf.data_structures import AlgStep, LossInfo, StepType
from rlf.environments import load
from rlf.tensor_specs import TensorSpec
from rlf.utils.errors import UserError
from rlf.algorithms import loop_of
from tests.algorithms._learners import learner_of

SGD = functools.partial(torch.optim.SGD, lr=1.0)


class Linear(Algorithm):
    def __init__(self, **kw):
        super().__init__(optimizer=SGD, **kw)
        self.w = nn.Parameter(torch.zeros(()))


def test_update_masks_invalid_steps_and_averages_over_all():
    alg = Linear()
    loss = alg.w * torch.ones(4, 2)  # d(mean(loss*mask))/dw = sum(mask) / 8
    mask = torch.tensor([[1., 1.], [0., 1.], [1., 1.], [1., 0.]])
    learner_of(alg).update_with_gradient(LossInfo(loss=loss), mask)
    assert float(alg.w.detach()) == pytest.approx(-6 / 8)


def test_transition_loss_uses_the_first_t_minus_1_rows_and_averages_over_them():
    alg = Linear()
    mask = torch.tensor([[1., 1.], [0., 1.], [1., 1.], [0., 0.]])  # [T=4, B=2]
    loss = alg.w * torch.ones(3, 2)  # [T-1, B]: rows 0-2 of the mask, 5 valid of 6
    learner_of(alg).update_with_gradient(LossInfo(loss=loss), mask)
    assert float(alg.w.detach()) == pytest.approx(-5 / 6)
    with pytest.raises(ValueError, match=r"fits neither"):
        learner_of(alg).update_with_gradient(LossInfo(loss=alg.w * torch.ones(5, 2)), mask)


def test_gradient_clipping_by_global_norm_and_value():
    alg = Linear(gradient_clipping=0.5)
    learner_of(alg).update_with_gradient(LossInfo(loss=alg.w * 3.0))
    assert float(alg.w.detach()) == pytest.approx(-0.5)
    alg = Linear(gradient_clipping=0.25, clip_by_global_norm=False)
    learner_of(alg).update_with_gradient(LossInfo(loss=-alg.w * 3.0))
    assert float(alg.w.detach()) == pytest.approx(0.25)


def test_non_finite_loss_names_term_and_changes_nothing():
    alg = Linear()
    learner_of(alg).counters.train_iter_num = 7
    bad = alg.w * torch.tensor([1.0, float("nan")])
    with pytest.raises(NonFiniteLossError, match=r"iteration 7.*extra\.value_loss"):
        learner_of(alg).update_with_gradient(LossInfo(loss=bad, extra={"value_loss": bad,
                                                           "pg_loss": alg.w * torch.ones(2)}))
    assert float(alg.w.detach()) == 0.0


def test_missing_optimizer_is_named():
    class NoOpt(Algorithm):
        def __init__(self):
            super().__init__()
            self.net = nn.Linear(2, 2)
    with pytest.raises(ValueError, match=r"net\.weight.*optimizer"):
        learner_of(NoOpt()).update_with_gradient(LossInfo(loss=torch.zeros(())))


def test_state_dict_carries_optimizers_and_rejects_mismatch_untouched():
    class Net(Algorithm):
        def __init__(self, n):
            super().__init__(optimizer=functools.partial(torch.optim.Adam, lr=0.1))
            self.net = nn.Linear(n, 1)
    a = Net(3)
    learner_of(a).update_with_gradient(LossInfo(loss=a.net(torch.ones(1, 3)).sum()))
    sd = a.state_dict()
    assert len(sd["_optimizers"]) == 1 and sd["_optimizers"][0]["state"]
    b = Net(3)
    b.load_state_dict(sd)
    assert torch.equal(b.net.weight, a.net.weight)
    assert learner_of(b).optimizers[0].state_dict()["state"][0]["step"] == 1
    c = Net(4)
    before = c.net.weight.clone()
    with pytest.raises(ValueError, match=r"'net\.weight' expected \(1, 4\).*found \(1, 3\)"):
        c.load_state_dict(sd)
    assert torch.equal(c.net.weight, before)


def test_a_checkpoint_of_another_optimizer_class_is_refused_untouched():
    # Before, SGD loaded Adam's state and failed at its first step: KeyError 'momentum'.
    class Net(Algorithm):
        def __init__(self, optimizer):
            super().__init__(optimizer=optimizer)
            self.net = nn.Linear(3, 1)
    a = Net(functools.partial(torch.optim.Adam, lr=0.1))
    learner_of(a).update_with_gradient(LossInfo(loss=a.net(torch.ones(1, 3)).sum()))
    b = Net(functools.partial(torch.optim.SGD, lr=0.1))
    before = b.net.weight.clone()
    with pytest.raises(ValueError, match=re.escape(
            "optimizer 0 (SGD) has none of the checkpoint optimizer's hyperparameters "
            "['amsgrad', 'betas', ")):
        b.load_state_dict(a.state_dict())
    assert torch.equal(b.net.weight, before)
    learner_of(b).update_with_gradient(LossInfo(loss=b.net(torch.ones(1, 3)).sum()))  # still usable


def test_a_checkpoint_with_a_schedule_is_refused_without_one_as_a_schedule_mismatch():
    # It was also called a checkpoint of another optimizer, for the schedule's initial_lr.
    class Net(Algorithm):
        def __init__(self, lr_scheduler=None):
            super().__init__(optimizer=functools.partial(torch.optim.Adam, lr=0.1),
                             lr_scheduler=lr_scheduler)
            self.net = nn.Linear(3, 1)
    a = Net(functools.partial(torch.optim.lr_scheduler.LinearLR, total_iters=5))
    learner_of(a).update_with_gradient(LossInfo(loss=a.net(torch.ones(1, 3)).sum()))
    with pytest.raises(ValueError) as info:
        Net().load_state_dict(a.state_dict())
    assert str(info.value) == ("Algorithm: the checkpoint does not fit this algorithm: "
                               "learning-rate schedulers per optimizer: this algorithm "
                               "[False], the checkpoint [True] (nothing was loaded)")


def test_a_schedule_that_makes_the_rate_negative_is_refused():
    # torch's MultiStepLR takes gamma = -0.1; Adam then ascended the loss without a word.
    class Net(Algorithm):
        def __init__(self):
            super().__init__(optimizer=functools.partial(torch.optim.Adam, lr=0.1),
                             lr_scheduler=functools.partial(
                                 torch.optim.lr_scheduler.MultiStepLR, milestones=[2],
                                 gamma=-0.1))
            self.net = nn.Linear(3, 1)
    a = Net()
    learner_of(a).update_with_gradient(LossInfo(loss=a.net(torch.ones(1, 3)).sum()))
    with pytest.raises(UserError, match=re.escape(
            "Algorithm: the learning-rate schedule MultiStepLR of optimizer 0 set the learning "
            "rate to -0.010000000000000002 after 2 updates; a rate must be finite and >= 0")):
        learner_of(a).update_with_gradient(LossInfo(loss=a.net(torch.ones(1, 3)).sum()))


def test_the_hyperparameters_a_restore_replaced_are_named_and_can_be_put_back():
    # torch's Optimizer.load_state_dict restores the checkpoint's learning rate: a rate
    # changed in the conf before a resume would have no effect, silently.
    from rlf.trainers.optimizer_settings import (apply_optimizer_settings, optimizer_settings,
                                                replaced_hyperparameters)

    class Net(Algorithm):
        def __init__(self, lr, lr_scheduler=None):
            super().__init__(optimizer=functools.partial(torch.optim.Adam, lr=lr),
                             lr_scheduler=lr_scheduler)
            self.net = nn.Linear(3, 1)

    for sched in (None, functools.partial(torch.optim.lr_scheduler.LinearLR, start_factor=0.5,
                                          total_iters=5)):
        a = Net(0.1, sched)
        learner_of(a).update_with_gradient(LossInfo(loss=a.net(torch.ones(1, 3)).sum()))
        same = Net(0.1, sched)
        configured = optimizer_settings(learner_of(same).optimizers)
        same.load_state_dict(a.state_dict())
        assert replaced_hyperparameters(configured, learner_of(same).optimizers) == []
        assert apply_optimizer_settings(learner_of(same).optimizers, learner_of(same).schedules,
                                        configured) == []  # a plain resume stays exact
        resumed = Net(0.5, sched)
        configured = optimizer_settings(learner_of(resumed).optimizers)
        resumed.load_state_dict(a.state_dict())
        assert replaced_hyperparameters(configured, learner_of(resumed).optimizers) == [
            "optimizer 0 (Adam): lr = 0.1 (configured: 0.5)"]
        group = learner_of(resumed).optimizers[0].param_groups[0]
        checkpoint_lr = group["lr"]  # 0.1, or 0.1 * 0.6 one update into the schedule
        assert checkpoint_lr == pytest.approx(0.1 if sched is None else 0.06)
        (change,) = apply_optimizer_settings(learner_of(resumed).optimizers,
                                             learner_of(resumed).schedules, configured)
        # the configured base rate at the schedule's place: five times the checkpoint's
        assert group["lr"] == pytest.approx(5 * checkpoint_lr)
        assert change == f"optimizer 0 group 0: lr {checkpoint_lr} -> {group['lr']}"
        if sched is not None:
            assert group["initial_lr"] == 0.5
            assert learner_of(resumed).schedules[0].base_lrs == [0.5]


def test_initial_checkpoint_loads_parameters_by_prefix_and_refuses_in_one_line(tmp_path):
    from rlf.utils.checkpoint import atomic_save

    class Net(Algorithm):
        def __init__(self, n=3, checkpoint=None):
            super().__init__(optimizer=torch.optim.Adam, checkpoint=checkpoint)
            self.net = nn.Linear(n, 1)

    source = Net()
    path = tmp_path / "ckpt-1.pt"
    atomic_save({"algorithm": source.state_dict()}, path)
    loaded = Net(checkpoint=str(path))
    load_initial_checkpoint(loaded)
    assert torch.equal(loaded.net.weight, source.net.weight)

    class Outer(Algorithm):  # the same layer one level down: loaded through a prefix
        def __init__(self, checkpoint):
            super().__init__(optimizer=torch.optim.Adam, checkpoint=checkpoint)
            self.inner = nn.Module()
            self.inner.net = nn.Linear(3, 1)

    outer = Outer(checkpoint=None)
    atomic_save({"algorithm": outer.state_dict()}, tmp_path / "outer.pt")
    from_prefix = Net(checkpoint=f"inner@{tmp_path / 'outer.pt'}")
    load_initial_checkpoint(from_prefix)
    assert torch.equal(from_prefix.net.bias, outer.inner.net.bias)
    # Each mistake was a traceback (FileNotFoundError, ValueError), exit status 1.
    for checkpoint, message in [
            (str(tmp_path / "none.pt"), "checkpoint file .*none.pt does not exist"),
            (f"nothing@{path}", r".*ckpt-1.pt has no parameters under prefix 'nothing' "
                                r"\(its prefixes: net\)"),
            (str(path), r"Algorithm: the checkpoint does not fit this algorithm: "
                        r"'net.weight' expected \(1, 4\)")]:
        target = Net(n=4, checkpoint=checkpoint)
        before = target.net.weight.clone()
        with pytest.raises(UserError, match=f"Algorithm.checkpoint = .*: {message}"):
            load_initial_checkpoint(target)
        assert torch.equal(target.net.weight, before)


def test_lr_scheduler_steps_per_update_and_resumes_from_state_dict():
    # SGD at lr 1 on loss w: each update moves w by -lr. LinearLR from 1.0 to 0.5 over 2
    # updates gives rates 1.0, 0.75, 0.5, 0.5, ... (hand-computed).
    sched = functools.partial(torch.optim.lr_scheduler.LinearLR, start_factor=1.0,
                              end_factor=0.5, total_iters=2)
    a = Linear(lr_scheduler=sched)
    learner_of(a).update_with_gradient(LossInfo(loss=a.w * 1.0))
    learner_of(a).update_with_gradient(LossInfo(loss=a.w * 1.0))
    assert float(a.w.detach()) == pytest.approx(-1.75)
    assert learner_of(a).optimizers[0].param_groups[0]["lr"] == pytest.approx(0.5)
    sd = a.state_dict()
    assert sd["_lr_schedulers"][0]["last_epoch"] == 2
    b = Linear(lr_scheduler=sched)
    b.load_state_dict(sd)  # resumes at the schedule's end, not its start
    learner_of(b).update_with_gradient(LossInfo(loss=b.w * 1.0))
    assert float(b.w.detach()) == pytest.approx(-2.25)
    with pytest.raises(ValueError, match=r"learning-rate schedulers.*\[False\].*\[True\]"):
        Linear().load_state_dict(sd)
    assert "_lr_schedulers" not in Linear().state_dict()


def test_update_skipped_by_grad_scaler_does_not_step_the_schedule():
    # AMP's GradScaler skips optimizer.step() when the scaled gradients overflow; the
    # learning-rate schedule must then wait as well (same LinearLR as above).
    sched = functools.partial(torch.optim.lr_scheduler.LinearLR, start_factor=1.0,
                              end_factor=0.5, total_iters=2)
    a = Linear(lr_scheduler=sched)
    learner_of(a)._grad_scaler = torch.amp.GradScaler("cpu", init_scale=2.0 ** 127)
    learner_of(a).update_with_gradient(LossInfo(loss=a.w * 1e10))  # scaled gradient 1.7e48: inf
    assert float(a.w.detach()) == 0.0
    assert learner_of(a).schedules[0].last_epoch == 0
    assert learner_of(a)._grad_scaler.get_scale() == 2.0 ** 126  # the scaler did see the overflow
    learner_of(a).update_with_gradient(LossInfo(loss=a.w * 1.0))  # finite: a step at the first rate
    assert float(a.w.detach()) == pytest.approx(-1.0)
    assert learner_of(a).schedules[0].last_epoch == 1


def test_lr_scheduler_without_optimizer_is_named():
    class NoOpt(Algorithm):
        def __init__(self):
            super().__init__(lr_scheduler=torch.optim.lr_scheduler.LinearLR, name="sched")
            self.w = nn.Parameter(torch.zeros(()))
    with pytest.raises(ValueError, match=r"sched: lr_scheduler needs an optimizer"):
        learner_of(NoOpt()).update_with_gradient(LossInfo(loss=torch.zeros(())))


class Counter(RLAlgorithm):
    """A recurrent 'policy' whose state counts steps since the episode start; its action is
    always 0. train_step records the state it saw, to check the resets."""

    def __init__(self, observation_spec, action_spec, **kw):
        spec = TensorSpec((), torch.float32)
        super().__init__(observation_spec, action_spec, train_state_spec=spec,
                         optimizer=SGD, **kw)
        self.w = nn.Parameter(torch.zeros(()))
        self.seen = []

    def rollout_step(self, time_step, state):
        b = time_step.step_type.shape[0]
        return AlgStep(output=torch.zeros(b, dtype=torch.int64), state=state + 1,
                       info={"count": state})

    def train_step(self, time_step, state, rollout_info):
        return AlgStep(output=(), state=state + 1,
                       info={"count": state, "rollout_count": rollout_info["count"],
                             "step_type": time_step.step_type})

    def calc_loss(self, info):
        self.seen.append(info)
        return LossInfo(loss=self.w * info["count"])


def test_recurrent_state_resets_at_first_in_rollout_and_training():
    env = load("CartPole-v1", 3, seed=0)
    config = TrainerConfig(unroll_length=30, whole_replay_buffer_training=True,
                           clear_replay_buffer=True, num_iterations=2)
    alg = Counter(env.observation_spec(), env.action_spec(), env=env, config=config)
    alg.train_iter()
    assert alg.seen == []  # first iteration: buffer holds unroll_length < unroll_length + 1
    alg.train_iter()
    info = alg.seen[-1]
    st, count = info["step_type"], info["rollout_count"]
    assert st.shape == (31, 3)  # unroll_length + 1 steps: the previous unroll's last one too
    for b in range(3):
        n = None
        for t in range(31):
            if st[t, b] == StepType.FIRST:
                n = 0
            if n is not None:
                assert count[t, b] == n and info["count"][t, b] == n
                n += 1
    assert (st == StepType.FIRST).any()  # CartPole with action 0 ends within ~10 steps
    env.close()


def test_adjust_replay_buffer_length_and_fractional_unroll():
    c = TrainerConfig(unroll_length=20, whole_replay_buffer_training=True,
                      clear_replay_buffer=True, replay_buffer_length=1000)
    assert replay_buffer_length(c) == 21
    assert replay_buffer_length(c, 3) == 24
    c = TrainerConfig(unroll_length=20, replay_buffer_length=1000)
    assert replay_buffer_length(c) == 1000
    with pytest.warns(DeprecationWarning, match=r"^adjust_replay_buffer_length is deprecated "
                      r".*; use rlf.algorithms.data_paths.replay_buffer_length$"):
        assert adjust_replay_buffer_length(c) == 1000

    env = load("CartPole-v1", 2, seed=0)
    config = TrainerConfig(unroll_length=0.25, mini_batch_size=4, mini_batch_length=2,
                           initial_collect_steps=4, num_iterations=8)
    alg = Counter(env.observation_spec(), env.action_spec(), env=env, config=config)
    sizes = []
    for _ in range(8):
        alg.train_iter()
        buffer = loop_of(alg).replay_buffer
        sizes.append(buffer.total_size if buffer else 0)
    assert sizes == [0, 0, 0, 2, 2, 2, 2, 4]  # one step every 4 iterations
    assert len(alg.seen) == 1 and alg.seen[0]["count"].shape == (2, 4)  # [T, B] time-major
    env.close()


def test_sampled_batch_is_split_in_order_into_mini_batches(monkeypatch):
    # Not whole-buffer training: mini_batch_size * num_updates sequences are sampled once
    # and cut in order into num_updates mini-batches (views of the sampled batch).
    env = load("CartPole-v1", 2, seed=0)
    config = TrainerConfig(unroll_length=4, mini_batch_size=2, mini_batch_length=3,
                           num_updates_per_train_iter=3, initial_collect_steps=8)
    alg = Counter(env.observation_spec(), env.action_spec(), env=env, config=config)
    alg.train_iter()
    alg.train_iter()  # the buffer now holds 8 steps per environment
    sampled, updates = [], []
    get_batch = loop_of(alg).replay_buffer.get_batch
    monkeypatch.setattr(loop_of(alg).replay_buffer, "get_batch",
                        lambda *a: sampled.append(get_batch(*a)) or sampled[-1])
    monkeypatch.setattr(learner_of(alg), "_update_rows", lambda batch: updates.append(
        (batch.experience.time_step.observation, batch.batch_info.positions, batch.weight))
        or 0)
    for batch in loop_of(alg).data_path.batches():
        learner_of(alg).update(batch)
    (batch, info), = sampled
    assert batch.time_step.observation.shape[:2] == (6, 3)  # 2 x 3 sequences of 3 steps
    assert len(updates) == 3
    for k, (obs, positions, weight) in enumerate(updates):
        assert torch.equal(obs, batch.time_step.observation[2 * k:2 * k + 2])
        assert torch.equal(positions, info.positions[2 * k:2 * k + 2])
        assert weight == 1.0
    env.close()


def test_reward_weights_and_bad_specs():
    obs, act = TensorSpec((4,)), TensorSpec((), torch.int64)
    alg = RLAlgorithm(obs, act, reward_spec=TensorSpec((2,)), reward_weights=[1.0, -2.0])
    assert torch.equal(alg.weighted_reward(torch.tensor([[1.0, 1.0]])), torch.tensor([-1.0]))
    with pytest.raises(ValueError, match="3 reward_weights for a reward of 2"):
        RLAlgorithm(obs, act, reward_spec=TensorSpec((2,)), reward_weights=[1, 2, 3])
    with pytest.raises(ValueError, match="rank 0 or 1"):
        RLAlgorithm(obs, act, reward_spec=TensorSpec((2, 2)))
    scaled = RLAlgorithm(obs, act, reward_spec=TensorSpec((2,)), reward_weights=[1.0, -2.0],
                         reward_scale=0.1)
    assert torch.allclose(scaled.weighted_reward(torch.tensor([[1.0, 1.0]])),
                          torch.tensor([-0.1]))
    assert torch.equal(RLAlgorithm(obs, act, reward_scale=0.5).weighted_reward(
        torch.tensor([2.0, -4.0])), torch.tensor([1.0, -2.0]))
    with pytest.raises(ValueError, match="reward_scale must be > 0, got 0"):
        RLAlgorithm(obs, act, reward_scale=0)


@pytest.mark.parametrize("batch_major", [True, False])
def test_temporally_independent_train_step_pairs_each_step_with_its_own_info(batch_major):
    # train_step on [T*B] rows must return each row's info at its own [t, b] (the batch-major
    # flattening of replayed [B, T] data), matching T calls on [B].
    from rlf.data_structures import Experience, TimeStep

    class Tagger(Algorithm):
        def train_step(self, inputs, state, rollout_info):
            return AlgStep(state=state, info={"obs": inputs.observation * 10 + rollout_info,
                                              "first": inputs.is_first()})

    t_len, batch = 5, 3
    obs = torch.arange(batch * t_len * 2, dtype=torch.float32).reshape(batch, t_len, 2)
    info = torch.arange(batch * t_len, dtype=torch.float32).reshape(batch, t_len, 1) / 100
    step_type = torch.full((batch, t_len), int(StepType.MID), dtype=torch.int32)
    step_type[1, 2] = StepType.FIRST
    exp = Experience(time_step=TimeStep(step_type=step_type, observation=obs),
                     rollout_info=info)
    if batch_major:  # what replay gives: a [T, B] view of [B, T] storage
        exp = exp._replace(time_step=exp.time_step._replace(
            step_type=step_type.transpose(0, 1), observation=obs.transpose(0, 1)),
            rollout_info=info.transpose(0, 1))
    else:  # time-major storage
        exp = exp._replace(time_step=exp.time_step._replace(
            step_type=step_type.transpose(0, 1).contiguous(),
            observation=obs.transpose(0, 1).contiguous()),
            rollout_info=info.transpose(0, 1).contiguous())
    expected = obs.transpose(0, 1) * 10 + info.transpose(0, 1)
    results = []
    for independent in (True, False):
        alg = Tagger()
        got = Sequences((), False, 0, independent).train_info(alg, exp)
        assert got["obs"].shape == (t_len, batch, 2)
        assert torch.equal(got["obs"], expected)
        assert got["first"].tolist() == (step_type.transpose(0, 1) == StepType.FIRST).tolist()
        results.append(got)
    assert torch.equal(results[0]["obs"], results[1]["obs"])


@pytest.mark.parametrize("schedule, setting", [
    (functools.partial(torch.optim.lr_scheduler.CosineAnnealingLR, T_max=0), "T_max"),
    (functools.partial(torch.optim.lr_scheduler.StepLR, step_size=0), "step_size"),
    (functools.partial(torch.optim.lr_scheduler.ConstantLR, total_iters=-2), "total_iters")])
def test_a_schedule_shorter_than_one_update_is_refused_when_the_optimizers_are_made(
        schedule, setting):
    # torch accepts them: the first update divided by zero, or the rate never changed.
    alg = Linear(lr_scheduler=schedule)
    with pytest.raises(UserError, match=f": {setting} must be >= 1 \\(updates\\), got -?[02]"):
        learner_of(alg).build()


def test_a_subclass_taking_a_reserved_name_is_refused_at_construction_in_one_line():
    # A DQN variant written before the base class counted updates registered its own
    # `num_updates` buffer; torch then raised "KeyError: attribute 'num_updates' already
    # exists" deep in nn.Module.
    class OwnCounter(Linear):
        def __init__(self):
            super().__init__()
            self.register_buffer("num_updates", torch.zeros((), dtype=torch.int64))

    class OwnProperty(Linear):
        @property
        def learner(self):
            return None

    class OwnAttribute(Linear):
        def __init__(self):
            super().__init__()
            self.on_policy = True

    for cls, what, name, version in ((OwnCounter, "buffer", "num_updates", "0.1.0"),
                                     (OwnProperty, "member", "learner", "0.2.0"),
                                     (OwnAttribute, "attribute", "on_policy", "0.1.0")):
        with pytest.raises(UserError) as e:
            cls()
        message = str(e.value)
        assert "\n" not in message
        assert message.startswith(f"{cls.__name__}: the {what} '{name}' takes a name that "
                                  f"rlf's Algorithm reserves (since rlf {version}"), message

    class Hooks(Linear):  # hooks and private names stay the subclass's to define
        def after_update(self, root_inputs, info):
            pass

        def __init__(self):
            super().__init__()
            self.register_buffer("_num_updates", torch.zeros(()))

    Hooks()

