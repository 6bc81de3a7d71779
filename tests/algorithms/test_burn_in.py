"""Sequence training with a recurrent state: the stored rollout state starts each sequence
(``use_rollout_state``), the state resets at a FIRST inside a sequence, and a burn-in of
``k`` steps (``burn_in_steps``) sends no gradient and no loss through its steps."""

import copy
import functools

import pytest
import torch
from torch import nn

from rlf import nest
from rlf.algorithms import RLAlgorithm, TrainerConfig, build_training
from rlf.algorithms.data_paths import Batch
from rlf.data_structures import AlgStep, Experience, LossInfo, StepType, TimeStep
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec
from rlf.utils.errors import UserError
from tests.algorithms._learners import learner_of

F, M = StepType.FIRST, StepType.MID
H = 3


class Recurrent(RLAlgorithm):
    """``s_t = tanh(W x_t + U s_{t-1})``; its info records the state it was given."""

    def __init__(self, config):
        super().__init__(TensorSpec((2,)), BoundedTensorSpec((), torch.int64, 0, 1),
                         train_state_spec=TensorSpec((H,)), is_on_policy=False, config=config,
                         optimizer=functools.partial(torch.optim.SGD, lr=0.1))
        self.w = nn.Linear(2, H)
        self.u = nn.Linear(H, H, bias=False)
        self.given = []

    def train_step(self, time_step, state, rollout_info):
        self.given.append(state.detach().clone())
        new = torch.tanh(self.w(time_step.observation) + self.u(state))
        return AlgStep(output=(), state=new, info={"value": new.sum(-1)})

    def calc_loss(self, info):
        return LossInfo(loss=info["value"] ** 2)


def _experience(t_len=8, batch=2, first_at=None):
    step_type = torch.full((t_len, batch), M, dtype=torch.int32)
    if first_at is not None:
        step_type[first_at] = F
    ts = TimeStep(step_type=step_type, reward=torch.zeros(t_len, batch),
                  discount=torch.ones(t_len, batch),
                  observation=torch.randn(t_len, batch, 2, requires_grad=True),
                  prev_action=torch.zeros(t_len, batch, dtype=torch.int64),
                  env_id=torch.zeros(t_len, batch, dtype=torch.int32), env_info={})
    stored = torch.randn(t_len, batch, H)  # the rollout state before each step
    return Experience(time_step=ts, action=torch.zeros(t_len, batch, dtype=torch.int64),
                      rollout_info={}, state=stored)


def _config(**kw):
    return TrainerConfig(mini_batch_size=2, mini_batch_length=8, **kw)


def test_burn_in_steps_get_no_gradient_and_no_loss():
    torch.manual_seed(0)
    alg = Recurrent(_config(burn_in_steps=3, use_rollout_state=True))
    exp = _experience()
    info = build_training(alg).data_path.sequences.train_info(alg, exp)
    assert info["value"].shape == (5, 2)  # [T-k, B]: calc_loss never sees the burn-in
    alg.calc_loss(info).loss.sum().backward()
    grad = exp.time_step.observation.grad
    assert torch.equal(grad[:3], torch.zeros(3, 2, 2))  # no gradient reaches t < k
    assert bool((grad[3:].abs().sum(-1) > 0).all())
    # ... and the burn-in warmed the state: step k got the state the burn-in left, not zeros
    state = exp.state[0]
    with torch.no_grad():
        for t in range(3):
            state = torch.tanh(alg.w(exp.time_step.observation[t]) + alg.u(state))
    assert torch.allclose(alg.given[3], state)


def test_the_stored_state_starts_the_sequence_and_a_first_resets_it():
    torch.manual_seed(0)
    alg = Recurrent(_config(use_rollout_state=True))
    exp = _experience(first_at=4)
    build_training(alg).data_path.sequences.train_info(alg, exp)
    assert torch.equal(alg.given[0], exp.state[0])  # the actor's state at the first step
    assert torch.equal(alg.given[4], torch.zeros(2, H))  # reset at the FIRST at t = 4
    assert not torch.equal(alg.given[3], torch.zeros(2, H))
    zeros = Recurrent(_config())
    build_training(zeros).data_path.sequences.train_info(zeros, exp)
    assert torch.equal(zeros.given[0], torch.zeros(2, H))  # without it: the initial state


def test_an_update_with_burn_in_masks_the_trained_steps_with_their_own_rows():
    torch.manual_seed(0)
    alg = Recurrent(_config(burn_in_steps=3, use_rollout_state=True))
    exp = _experience()
    exp = exp._replace(time_step=exp.time_step._replace(
        observation=exp.time_step.observation.detach()))
    valid = torch.ones(8, 2)
    valid[5, 0] = valid[6, 1] = 0  # steps after the burn-in, masked
    valid[1] = 0  # a burn-in step: masks nothing that is trained
    # Expected: the mean over the [5, 2] trained steps of value^2 x the mask's rows 3..7.
    reference = copy.deepcopy(alg)
    info = build_training(reference).data_path.sequences.train_info(reference, exp)
    loss = (info["value"] ** 2 * valid[3:]).mean()
    grad = torch.autograd.grad(loss, reference.w.weight)[0]
    sequences = build_training(alg).data_path.sequences  # how train_step runs (burn-in)
    learner_of(alg).update(Batch(nest.map_structure(lambda x: x.transpose(0, 1), exp),
                             valid.transpose(0, 1), None, 1.0, False, sequences=sequences))
    assert torch.allclose(alg.w.weight.detach(), reference.w.weight.detach() - 0.1 * grad,
                          atol=1e-6)


@pytest.mark.parametrize("settings, message", [
    (dict(burn_in_steps=8), r"burn_in_steps = 8 leaves no step to train"),
    (dict(burn_in_steps=2, temporally_independent_train_step=True),
     r"burn_in_steps = 2 warms up a recurrent train_step state"),
])
def test_burn_in_settings_that_cannot_work_are_refused(settings, message):
    alg = Recurrent(_config(**settings))
    with pytest.raises(UserError, match=message):
        build_training(alg)
