import pytest
import torch

from rlf.data_structures import (AlgStep, Experience, LossInfo, StepType, TimeStep,
                                 experience_like, make_experience, time_step_spec)
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec


def test_step_type_values():
    assert (StepType.FIRST, StepType.MID, StepType.LAST) == (0, 1, 2)


def test_time_step_predicates():
    ts = TimeStep(step_type=torch.tensor([0, 1, 2, 0], dtype=torch.int32))
    assert ts.is_first().tolist() == [True, False, False, True]
    assert ts.is_mid().tolist() == [False, True, False, False]
    assert ts.is_last().tolist() == [False, False, True, False]


def test_make_experience_maps_fields():
    ts = TimeStep(reward=torch.ones(2))
    step = AlgStep(output="action", state="new_state", info="info")
    exp = make_experience(ts, step, state="old_state")
    assert exp == Experience(time_step=ts, action="action", rollout_info="info",
                             state="old_state")


def test_defaults_are_empty_nests():
    assert AlgStep() == ((), (), ())
    assert LossInfo().priority == ()


def test_time_step_spec():
    obs = TensorSpec((4,))
    act = BoundedTensorSpec((), torch.int64, 0, 1)
    spec = time_step_spec(obs, act, TensorSpec(()))
    assert spec.observation == obs and spec.prev_action == act
    assert spec.step_type.dtype == torch.int32
    assert spec.discount.dtype == torch.float32 and spec.env_info == {}


def test_starts_transition_at_episode_ends_and_cuts():
    from rlf.data_structures import starts_transition
    f, m, last = StepType.FIRST, StepType.MID, StepType.LAST
    per_env = [[f, m, last, f],   # an episode ends: LAST -> FIRST
               [m, m, f, m],   # cut: MID -> FIRST
               [f, f, m, m],   # cut right after a reset: FIRST -> FIRST
               [f, m, m, m]]   # unbroken
    step_type = torch.tensor(per_env, dtype=StepType.dtype).T  # [T, B]
    assert starts_transition(step_type).T.tolist() == [
        [True, True, False], [True, False, True], [False, True, True], [True, True, True]]


def test_experience_like_takes_the_template_layout_and_refuses_a_wrong_leaf():
    template = Experience(
        time_step=TimeStep(step_type=torch.zeros(3, 4, dtype=torch.int32),
                           reward=torch.zeros(3, 4), discount=torch.zeros(3, 4),
                           observation={"x": torch.zeros(3, 4, 2)},
                           prev_action=torch.zeros(3, 4, dtype=torch.int64),
                           env_id=torch.zeros(3, 4, dtype=torch.int32), env_info={}),
        action=torch.zeros(3, 4, dtype=torch.int64),
        rollout_info={"logits": torch.zeros(3, 4, 5)}, state=())
    made = experience_like(template, 2,
                           observation={"x": torch.ones(2, 4, 2, dtype=torch.float64)},
                           action=torch.tensor([[1, 0, 1, 0], [0, 0, 0, 1]]))
    assert made.time_step.observation["x"].dtype == torch.float32
    assert made.action.dtype == torch.int64 and made.action.tolist()[0] == [1, 0, 1, 0]
    assert made.time_step.step_type.tolist() == [[0, 1, 1, 1]] * 2  # FIRST, then MID
    assert made.time_step.discount.tolist() == [[1.0] * 4] * 2
    assert made.time_step.env_id.tolist() == [[-1] * 4] * 2
    logits = made.rollout_info["logits"]
    assert logits.shape == (2, 4, 5) and not logits.any()
    with pytest.raises(ValueError, match=r"action has a leaf of shape \(2, 3\) where the "
                                         r"template's gives \(2, 4\)"):
        experience_like(template, 2, action=torch.zeros(2, 3))
    with pytest.raises(ValueError, match="rollout_info is not of the template's structure"):
        experience_like(template, 2, rollout_info=torch.zeros(2, 4, 5))
    with pytest.raises(ValueError, match=r"\['obs'\] name no field"):
        experience_like(template, 2, obs=torch.zeros(2, 4, 2))
