import numpy as np
import pytest
import torch
from gymnasium import spaces

from rlf.environments import spec_from_space
from rlf.tensor_specs import BoundedTensorSpec, TensorSpec


def test_box():
    s = spec_from_space(spaces.Box(0, 255, (4, 84, 84), np.uint8))
    assert s == BoundedTensorSpec((4, 84, 84), torch.uint8, 0, 255)
    s = spec_from_space(spaces.Box(np.array([-1.0, -2.0], np.float32),
                                   np.array([1.0, 2.0], np.float32)))
    assert np.array_equal(s.minimum, [-1, -2]) and s.dtype == torch.float32
    assert spec_from_space(spaces.Box(-np.inf, np.inf, (3,))) == TensorSpec((3,), torch.float32)


def test_discrete_and_multidiscrete():
    assert spec_from_space(spaces.Discrete(6)) == BoundedTensorSpec((), torch.int64, 0, 5)
    assert spec_from_space(spaces.Discrete(3, start=-1)) == BoundedTensorSpec(
        (), torch.int64, -1, 1)
    md = spec_from_space(spaces.MultiDiscrete([3, 5]))
    assert md.shape == (2,) and np.array_equal(md.maximum, [2, 4]) and md.minimum == 0
    assert spec_from_space(spaces.MultiBinary(4)) == BoundedTensorSpec((4,), torch.int8, 0, 1)


def test_dict_and_tuple():
    space = spaces.Dict({"pos": spaces.Box(-1, 1, (2,)),
                         "id": spaces.Tuple((spaces.Discrete(2), spaces.Discrete(3)))})
    s = spec_from_space(space)
    assert set(s) == {"pos", "id"} and isinstance(s["id"], tuple)
    assert s["id"][1] == BoundedTensorSpec((), torch.int64, 0, 2)


def test_unsupported_space():
    with pytest.raises(ValueError, match="no tensor spec"):
        spec_from_space(spaces.Text(5))
