import numpy as np
import pytest

from rlf.replay import SumTree


@pytest.mark.parametrize("capacity", [1, 5, 8, 37])
def test_find_matches_cumsum(capacity):
    rng = np.random.default_rng(capacity)
    tree = SumTree(capacity)
    values = rng.random(capacity)
    values[rng.random(capacity) < 0.3] = 0.0
    values[0] = 0.5
    tree.update(np.arange(capacity), values)
    assert tree.total == pytest.approx(values.sum())
    u = rng.random(1000) * values.sum()
    expected = np.searchsorted(np.cumsum(values), u, side="right")
    np.testing.assert_array_equal(tree.find(u), expected)
    assert (values[tree.find(u)] > 0).all()


def test_incremental_updates_equal_rebuild():
    rng = np.random.default_rng(0)
    tree = SumTree(20)
    for _ in range(50):
        idx = rng.integers(0, 20, size=4)
        tree.update(idx, rng.random(4))
    before = tree._tree.copy()
    tree.rebuild()
    np.testing.assert_allclose(tree._tree, before)


def test_bad_input():
    tree = SumTree(4)
    with pytest.raises(ValueError, match="indices"):
        tree.update([4], [1.0])
    with pytest.raises(ValueError, match="finite"):
        tree.update([0], [-1.0])
    with pytest.raises(ValueError):
        SumTree(0)
