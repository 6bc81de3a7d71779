"""Base-class training features: the loss mask, preprocessing of the whole experience before
it is split, on-policy epochs over shuffled transitions, and several optimizers in one
algorithm ([T-1, B] transition losses: test_algorithm.py, beside the per-step masking)."""

import functools
import re

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
from torch import nn

from rlf.algorithms import Algorithm, RLAlgorithm, TrainerConfig, build_training
from rlf.algorithms.reserved import set_framework_state
from rlf.data_structures import AlgStep, LossInfo, StepType, valid_step_mask
from rlf.environments import load
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from rlf.unrollers import SyncUnroller
from rlf.utils import summary
from rlf.utils.tensorboard_reader import read_scalar_tags
from tests.algorithms._learners import learner_of

F, M, L = StepType.FIRST, StepType.MID, StepType.LAST
SGD = functools.partial(torch.optim.SGD, lr=1.0)


def test_valid_step_mask_removes_last_steps_steps_before_a_cut_and_the_final_step():
    # env 0: F M L F M ; env 1: M M F M M (the FIRST after a MID: a cut at step 2)
    step_type = torch.tensor([[F, M], [M, M], [L, F], [F, M], [M, M]], dtype=torch.int32)
    expected = torch.tensor([[1, 1], [1, 0], [0, 1], [1, 1], [0, 0]], dtype=torch.bool)
    assert torch.equal(valid_step_mask(step_type), expected)


class Recorder(RLAlgorithm):
    """Records what preprocess_experience and calc_loss see; action always 0."""

    def __init__(self, observation_spec, action_spec, **kw):
        super().__init__(observation_spec, action_spec, optimizer=SGD, **kw)
        self.w = nn.Parameter(torch.zeros(()))
        self.preprocessed, self.batches = [], []

    def rollout_step(self, time_step, state):
        b = time_step.step_type.shape[0]
        return AlgStep(output=torch.zeros(b, dtype=torch.int64), state=state,
                       info={"t": time_step.observation[:, 0].clone()})

    def preprocess_experience(self, root_inputs, rollout_info, batch_info):
        self.preprocessed.append(root_inputs.step_type.shape)
        return root_inputs, dict(rollout_info, whole_len=torch.full_like(
            rollout_info["t"], root_inputs.step_type.shape[1]))

    def train_step(self, time_step, state, rollout_info):
        return AlgStep(output=(), state=state, info=dict(rollout_info,
                                                         env_id=time_step.env_id))

    def calc_loss(self, info):
        self.batches.append(info)
        return LossInfo(loss=self.w * torch.ones_like(info["t"]))


def _recorder(**config):
    env = load("CartPole-v1", 4, seed=0)
    alg = Recorder(env.observation_spec(), env.action_spec(), env=env,
                   config=TrainerConfig(**config))
    return alg, env


def test_on_policy_epochs_preprocess_the_whole_unroll_then_shuffle_transitions():
    alg, env = _recorder(unroll_length=6, num_updates_per_train_iter=3, mini_batch_size=5,
                         mini_batch_length=1)
    set_framework_state(alg, _rlf_is_on_policy=True)
    loop = build_training(alg, SyncUnroller(env, alg))  # (the path follows the policy flag)
    assert loop.data_path.name == "unroll_epochs"
    steps = loop.train_iter()
    # One preprocess call on the whole [B=4, T=6] unroll. Each environment's final step has
    # no successor and is dropped, so each of the 3 epochs goes through 20 transitions in 4
    # mini-batches of 5 single steps ([T=1, B=5] in calc_loss), not 5 with a last one of 4.
    assert alg.preprocessed == [torch.Size([4, 6])]
    assert len(alg.batches) == 12 and steps == 60
    assert all(b["t"].shape == (1, 5) for b in alg.batches)
    assert all(bool((b["whole_len"] == 6).all()) for b in alg.batches)
    epoch = torch.cat([b["env_id"].flatten() for b in alg.batches[:4]])
    assert sorted(epoch.tolist()) == sorted(list(range(4)) * 5)  # every transition once
    first = torch.cat([torch.stack([b["env_id"].flatten(), b["t"].flatten()], -1)
                       for b in alg.batches[:4]])
    assert not all(first[i, 0] == first[i + 1, 0] for i in range(len(first) - 1)), \
        "mini-batches are drawn across environments, not environment by environment"
    # The next unroll is preceded by this one's last step: 7 steps per environment.
    alg.preprocessed.clear()
    loop.train_iter()
    assert alg.preprocessed == [torch.Size([4, 7])]
    env.close()


def _train_summaries(tmp_path, iterations, on_policy=False, **config):
    """The loss points of ``iterations`` iterations, and each update's loss (``w`` before
    the step, times the mini-batch's weight)."""
    from rlf.utils import summary
    alg, env = _recorder(**config)
    set_framework_state(alg, _rlf_is_on_policy=on_policy)
    loop = build_training(alg, SyncUnroller(env, alg))  # (the path follows the policy flag)
    summary.set_default_writer(summary.create_summary_writer(str(tmp_path), flush_secs=1))
    summary.set_summary_interval(1)
    summary.set_global_counter(0)
    losses = []
    update = loop.learner._update_rows
    loop.learner._update_rows = lambda batch: losses.append(
        float(alg.w.detach()) * batch.weight) or update(batch)
    try:
        for _ in range(iterations):
            loop.train_iter()
    finally:
        summary.close()
        env.close()
    # Every event, as TensorBoard's reader sees them (rlf's reader keeps one per step).
    acc = EventAccumulator(str(tmp_path), size_guidance={"scalars": 0})
    acc.Reload()
    events = acc.Scalars("loss/RLAlgorithm")
    return [e.step for e in events], [e.value for e in events], losses


def test_training_summaries_describe_the_last_mini_batch_of_the_iteration(tmp_path):
    # ALF's semantics: one loss point per iteration, from its last update. 3 epochs of 4
    # mini-batches of 5 transitions, then (7 steps per environment with the carried one) 3
    # epochs of 5, the last of 4 (weight 0.8). SGD at rate 1 lowers w by each weight.
    steps, values, losses = _train_summaries(
        tmp_path, 2, on_policy=True, unroll_length=6, num_updates_per_train_iter=3,
        mini_batch_size=5, mini_batch_length=1)
    assert len(losses) == 12 + 15
    assert steps == [1, 2]
    assert values == pytest.approx([losses[11], losses[26]])
    assert values[0] == -11.0 and losses[26] != losses[25]


def test_a_counter_per_mini_batch_gives_each_mini_batch_its_summaries(tmp_path):
    steps, values, losses = _train_summaries(
        tmp_path, 2, unroll_length=5, whole_replay_buffer_training=True,
        clear_replay_buffer=True, mini_batch_length=1, mini_batch_size=8,
        update_counter_every_mini_batch=True)
    assert len(steps) == len(losses) > 2
    assert steps == list(range(1, len(losses) + 1))
    assert values == pytest.approx(losses)


def test_whole_buffer_split_into_single_steps_keeps_the_whole_experiences_mask(monkeypatch):
    alg, env = _recorder(unroll_length=5, whole_replay_buffer_training=True,
                         clear_replay_buffer=True, mini_batch_length=1, mini_batch_size=6)
    masks = []
    loop = build_training(alg, SyncUnroller(env, alg))  # (alg.train_iter trains through it)
    update = loop.learner._update_rows
    monkeypatch.setattr(loop.learner, "_update_rows", lambda batch: masks.append(
        (batch.experience.time_step.env_id, batch.valid)) or update(batch))
    alg.train_iter()
    alg.train_iter()  # trains on the 6-step ring (the previous unroll's last step included)
    assert alg.preprocessed == [torch.Size([4, 6])]
    whole = loop.replay_buffer.gather_all()
    expected = valid_step_mask(whole.time_step.step_type.transpose(0, 1)).transpose(0, 1)
    assert sum(int(v.sum()) for _, v in masks) == int(expected.sum())
    env.close()


class TwoParts(Algorithm):
    """Two sub-modules with their own optimizer and a default optimizer for the rest."""

    def __init__(self, **kw):
        super().__init__(optimizer=functools.partial(torch.optim.SGD, lr=1.0), **kw)
        self.a = nn.Linear(1, 1, bias=False)
        self.b = nn.Linear(1, 1, bias=False)
        self.c = nn.Parameter(torch.zeros(()))
        for m in (self.a, self.b):
            nn.init.zeros_(m.weight)
        self.add_optimizer(functools.partial(torch.optim.SGD, lr=0.1), self.a,
                           lr_scheduler=functools.partial(
                               torch.optim.lr_scheduler.StepLR, step_size=1, gamma=0.5))
        self.add_optimizer(functools.partial(torch.optim.SGD, lr=0.01), [self.b],
                           gradient_clipping=0.5)

    def loss(self):
        x = torch.ones(1, 1)
        return LossInfo(loss=-(self.a(x).sum() * 4 + self.b(x).sum() * 4 + self.c * 4))


def test_added_optimizers_have_their_own_rate_schedule_and_clipping_and_are_checkpointed():
    alg = TwoParts()
    assert len(learner_of(alg).optimizers) == 3  # a, b (added, in order), then the default for c
    learner_of(alg).update_with_gradient(alg.loss())
    # a: lr 0.1, gradient -4 -> +0.4; b: gradient clipped to norm 0.5, lr 0.01 -> +0.005;
    # c: the default optimizer, lr 1 -> +4.
    assert float(alg.a.weight.detach()) == pytest.approx(0.4)
    assert float(alg.b.weight.detach()) == pytest.approx(0.005)
    assert float(alg.c.detach()) == pytest.approx(4.0)
    learner_of(alg).update_with_gradient(alg.loss())  # a's schedule halved its rate: +0.2
    assert float(alg.a.weight.detach()) == pytest.approx(0.6)
    state = alg.state_dict()
    assert len(state["_optimizers"]) == 3
    assert state["_lr_schedulers"][0] is not None and state["_lr_schedulers"][2] is None
    other = TwoParts()
    other.load_state_dict(state)
    learner_of(other).update_with_gradient(other.loss())  # a's rate is now 0.025 (resumed)
    assert float(other.a.weight.detach()) == pytest.approx(0.7)
    with pytest.raises(RuntimeError, match="before the optimizers are created"):
        other.add_optimizer(torch.optim.SGD, other.c)


def test_optimizer_settings_that_could_only_fail_at_the_first_update_are_refused():
    # Before, these were called (or, for a negative clipping norm, flipped the gradients'
    # sign) only at the first update, after the run had started.
    for kw, message in ((dict(optimizer=3), "Algorithm: optimizer must be a "
                         "torch.optim.Optimizer class or factory"),
                        (dict(optimizer=torch.optim.SGD, lr_scheduler="linear"),
                         "Algorithm: lr_scheduler must be a torch.optim.lr_scheduler class"),
                        (dict(optimizer=torch.optim.SGD, gradient_clipping=-1.0),
                         "Algorithm: gradient_clipping must be > 0 or None (no clipping), got "
                         "-1.0")):
        with pytest.raises(ValueError, match=re.escape(message)):
            Algorithm(**kw)
    alg = Algorithm()
    alg.a = nn.Linear(1, 1)
    with pytest.raises(ValueError, match=re.escape(
            "Algorithm.add_optimizer: gradient_clipping must be > 0 or None (no clipping), "
            "got 0.0")):
        alg.add_optimizer(torch.optim.SGD, alg.a, gradient_clipping=0.0)


def test_summarize_grads_and_vars_writes_each_parameters_norm_and_its_gradients(tmp_path):
    def make(flag):
        alg = Recorder(TensorSpec((1,)), BoundedTensorSpec((), torch.int64, 0, 1),
                       config=TrainerConfig(num_iterations=1, summarize_grads_and_vars=flag))
        alg.v = nn.Parameter(torch.tensor([3.0, 4.0]))  # no gradient
        alg.w.data.fill_(-2.0)
        alg.w.grad = torch.tensor(0.5)
        return alg

    writer = summary.create_summary_writer(str(tmp_path))
    summary.set_default_writer(writer)
    counter = summary.get_global_counter()
    try:
        with summary.record_if(lambda: True):
            learner_of(make(False)).summarize_train(None, None, None, [])
            summary.increment_global_counter()
            step = summary.get_global_counter()
            learner_of(make(True)).summarize_train(None, None, None, [])
        writer.flush()
    finally:
        summary.set_default_writer(None)
        summary.set_global_counter(counter)
        writer.close()
    series = read_scalar_tags(tmp_path)
    assert series["summarize_vars/w/norm"][:2] == ([step], [2.0])
    assert series["summarize_vars/v/norm"][:2] == ([step], [5.0])
    assert series["summarize_grads/w/norm"][:2] == ([step], [0.5])
    assert "summarize_grads/v/norm" not in series  # v has no gradient
