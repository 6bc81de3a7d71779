"""Policy heads: sample dtypes and shapes follow the action spec, and log-probabilities of
independent Categoricals are the sums of hand-computed ones."""

import math

import pytest
import torch

from rlf.networks import CategoricalHead, MultiCategoricalHead, make_policy_head
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec


@pytest.mark.parametrize("spec", [
    BoundedTensorSpec((), torch.int64, 2, 5),                  # Discrete(4, start=2)
    BoundedTensorSpec((3,), torch.int8, 0, 1),                 # MultiBinary(3)
    BoundedTensorSpec((2, 2), torch.int8, 0, 1),               # MultiBinary((2, 2))
    BoundedTensorSpec((2, 2), torch.int64, 0, [[1, 2], [1, 1]]),  # MultiDiscrete([[2, 3], ..])
], ids=["discrete", "multi_binary", "multi_binary_2d", "multi_discrete_2d"])
def test_samples_have_the_specs_dtype_shape_and_bounds(spec):
    # Before, MultiBinary's int8 actions came out int64 (the environment refused them) and a
    # discrete action of rank 2 had no head.
    head = make_policy_head(5, spec)
    params = head(torch.randn(7, 5))
    for greedy in (False, True):
        a = head.sample(params, greedy=greedy)
        assert a.dtype == spec.dtype and a.shape == (7, *spec.shape)
        low, high = spec.bounds(torch.int64)
        assert bool(((a.long() >= low) & (a.long() <= high)).all())
        assert head.log_prob(params, a).shape == (7,)
    assert head.entropy(params).shape == (7,)


def test_multi_categorical_log_prob_is_the_sum_over_entries_in_row_major_order():
    head = MultiCategoricalHead(1, BoundedTensorSpec((2, 2), torch.int64, 0, [[1, 2], [1, 1]]))
    logits = (torch.tensor([[0.0, math.log(3.0)]]),            # p = 1/4, 3/4
              torch.tensor([[0.0, 0.0, math.log(2.0)]]),       # p = 1/4, 1/4, 1/2
              torch.tensor([[math.log(4.0), 0.0]]),            # p = 4/5, 1/5
              torch.tensor([[0.0, 0.0]]))                      # p = 1/2, 1/2
    action = torch.tensor([[[1, 2], [0, 1]]])
    expected = math.log(3 / 4) + math.log(1 / 2) + math.log(4 / 5) + math.log(1 / 2)
    assert head.log_prob(logits, action).item() == pytest.approx(expected, abs=1e-6)


def test_a_discrete_head_keeps_int64_for_gymnasiums_discrete():
    head = CategoricalHead(3, BoundedTensorSpec((), torch.int64, 0, 2))
    assert head.sample(head(torch.randn(4, 3))).dtype == torch.int64


def test_a_nest_of_action_specs_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"no policy head for action spec \{'a'.*each alone "
                                         r"\(not in a nest\)"):
        make_policy_head(3, {"a": BoundedTensorSpec((), torch.int64, 0, 1),
                             "b": TensorSpec((2,))})
