import pickle

import numpy as np
import pytest
import torch

from rlf.tensor_specs import BoundedTensorSpec, TensorSpec, spec_from_tensors, validate_nest


def test_tensor_spec_basics():
    s = TensorSpec((4, 84, 84), "uint8")
    assert s.dtype == torch.uint8 and s.shape == (4, 84, 84)
    assert s.ndim == 3 and s.numel == 4 * 84 * 84
    assert s.is_discrete and not s.is_continuous
    assert s.zeros((2, 3)).shape == (2, 3, 4, 84, 84)
    assert s.zeros(5).dtype == torch.uint8
    assert s.ones().sum() == s.numel
    assert TensorSpec(3).shape == (3,)
    assert TensorSpec(()).randn((7,)).shape == (7,)
    with pytest.raises(ValueError, match="floating-point"):
        s.randn()
    with pytest.raises(TypeError, match="Unsupported dtype"):
        TensorSpec((), "not_a_dtype")


def test_from_tensor_and_array():
    t = torch.zeros(5, 2, 3, dtype=torch.int16)
    assert TensorSpec.from_tensor(t) == TensorSpec((5, 2, 3), torch.int16)
    assert TensorSpec.from_tensor(t, from_dim=1) == TensorSpec((2, 3), torch.int16)
    assert TensorSpec.from_array(np.zeros((4, 2), np.float64), 1) == TensorSpec((2,), torch.float64)


def test_spec_from_tensors_drops_outer_dims():
    batch = {"o": torch.zeros(5, 2, 3, dtype=torch.uint8), "r": torch.zeros(5, 2)}
    assert spec_from_tensors(batch) == {"o": TensorSpec((2, 3), torch.uint8),
                                        "r": TensorSpec((2,))}
    assert spec_from_tensors(batch, outer_rank=2) == {"o": TensorSpec((3,), torch.uint8),
                                                      "r": TensorSpec(())}


def test_equality_hash_pickle():
    a = BoundedTensorSpec((2,), torch.float32, [-1, 0], 1)
    assert a == BoundedTensorSpec((2,), "float32", [-1.0, 0.0], 1.0)
    assert a != BoundedTensorSpec((2,), torch.float32, -1, 1)
    assert a != TensorSpec((2,), torch.float32)
    assert TensorSpec((2,)) != BoundedTensorSpec((2,), torch.float32, -1, 1)
    assert len({TensorSpec((2,)), TensorSpec((2,)), TensorSpec((3,))}) == 2
    for s in (a, TensorSpec((3, 1), torch.uint8)):
        assert pickle.loads(pickle.dumps(s)) == s


def test_bounded_discrete_sample_covers_all_values():
    torch.manual_seed(0)
    s = BoundedTensorSpec((), torch.int64, 2, 5)
    x = s.sample((40000,))
    assert x.dtype == torch.int64
    counts = torch.bincount(x - 2, minlength=4).double() / x.numel()
    assert set(x.unique().tolist()) == {2, 3, 4, 5}
    assert torch.allclose(counts, torch.full((4,), 0.25, dtype=torch.float64), atol=0.01)
    assert s.num_values == 4


def test_bounded_continuous_sample_respects_bounds():
    torch.manual_seed(0)
    s = BoundedTensorSpec((3,), torch.float32, [-1, 0, -np.inf], [1, np.inf, np.inf])
    x = s.sample((10000,))
    assert x.shape == (10000, 3) and x.dtype == torch.float32
    assert x[:, 0].min() >= -1 and x[:, 0].max() <= 1 and abs(x[:, 0].mean()) < 0.05
    assert x[:, 1].min() >= 0 and abs(x[:, 1].mean() - 1) < 0.05  # Exp(1)
    assert abs(x[:, 2].std() - 1) < 0.05  # N(0, 1)
    assert torch.isfinite(x).all()


def test_bounded_errors():
    with pytest.raises(ValueError, match="does not broadcast"):
        BoundedTensorSpec((3,), torch.float32, [0, 0], 1)
    with pytest.raises(ValueError, match="exceeds maximum"):
        BoundedTensorSpec((), torch.float32, 2, 1)
    with pytest.raises(ValueError, match="discrete"):
        BoundedTensorSpec((), torch.float32, 0, 1).num_values  # noqa: B018


def test_validate_nest_messages():
    spec = {"obs": TensorSpec((3,), torch.float32), "a": TensorSpec((), torch.int64)}
    ok = {"obs": torch.zeros(2, 3), "a": torch.zeros(2, dtype=torch.int64)}
    validate_nest(ok, spec, (2,), "x")
    with pytest.raises(ValueError, match=r"'obs' expected shape \(2, 3\) dtype torch.float32.*"
                                         r"got shape \(2, 4\)"):
        validate_nest({**ok, "obs": torch.zeros(2, 4)}, spec, (2,), "x")
    with pytest.raises(ValueError, match=r"'a' expected .*torch.int64.*got .*torch.int32"):
        validate_nest({**ok, "a": torch.zeros(2, dtype=torch.int32)}, spec, (2,), "x")
    with pytest.raises(ValueError, match="structure does not match"):
        validate_nest({"obs": ok["obs"]}, spec, (2,), "x")


def test_bounds_are_tensors_of_the_shape_and_dtype():
    spec = BoundedTensorSpec((2, 3), torch.float32, -1.0, [1.0, 2.0, 3.0])
    low, high = spec.bounds(torch.float64)
    assert low.dtype == high.dtype == torch.float64
    assert torch.equal(low, torch.full((2, 3), -1.0, dtype=torch.float64))
    assert torch.equal(high[1], torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
    low[0, 0] = 5.0  # a copy: the spec is unchanged
    assert spec.bounds()[0][0, 0] == -1.0


def test_from_spec_is_deprecated_and_still_answers():
    with pytest.warns(DeprecationWarning, match=r"^BoundedTensorSpec.from_spec is deprecated"):
        spec = BoundedTensorSpec.from_spec(TensorSpec((2,), torch.int64), 0, 3)
    assert spec == BoundedTensorSpec((2,), torch.int64, 0, 3)
