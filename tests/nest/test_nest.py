import collections

import pytest
import torch

from rlf import nest

NT = collections.namedtuple("NT", ["b", "a"])  # field order deliberately not alphabetical
Other = collections.namedtuple("Other", ["b", "a"])


def sample_nest():
    return NT(b={"y": 1, "x": [2, 3]}, a=(4, None, ()))


def test_flatten_order_namedtuple_fields_dict_sorted_keys():
    # namedtuple: definition order (b before a); dict: sorted keys (x before y)
    assert nest.flatten(sample_nest()) == [2, 3, 1, 4]


def test_none_and_empty_are_leafless_nests():
    assert nest.flatten(None) == []
    assert nest.flatten(()) == []
    assert nest.flatten(5) == [5]
    out = nest.map_structure(lambda x: x * 10, sample_nest())
    assert out == NT(b={"y": 10, "x": [20, 30]}, a=(40, None, ()))


def test_pack_sequence_as_roundtrip_and_count_error():
    n = sample_nest()
    assert nest.pack_sequence_as(n, nest.flatten(n)) == n
    assert nest.pack_sequence_as(n, ["p", "q", "r", "s"]) == NT(
        b={"y": "r", "x": ["p", "q"]}, a=("s", None, ()))
    with pytest.raises(ValueError, match="4 leaves but 3 values"):
        nest.pack_sequence_as(n, [1, 2, 3])


def test_map_structure_two_nests():
    a, b = sample_nest(), nest.map_structure(lambda x: x + 1, sample_nest())
    assert nest.map_structure(lambda x, y: y - x, a, b) == NT(
        b={"y": 1, "x": [1, 1]}, a=(1, None, ()))


@pytest.mark.parametrize("other, path", [
    (NT(b={"y": 1, "z": [2, 3]}, a=(4, None, ())), "b"),            # different dict keys
    (NT(b={"y": 1, "x": [2, 3, 9]}, a=(4, None, ())), "b.x"),        # different list length
    (NT(b={"y": 1, "x": (2, 3)}, a=(4, None, ())), "b.x"),           # list vs tuple
    (NT(b={"y": 1, "x": [2, [3]]}, a=(4, None, ())), "b.x.1"),       # leaf vs nest
    (NT(b={"y": 1, "x": [2, 3]}, a=(4, 5, ())), "a.1"),              # None vs leaf
    (Other(b={"y": 1, "x": [2, 3]}, a=(4, None, ())), "<root>"),     # other namedtuple
])
def test_structure_mismatch_names_first_differing_path(other, path):
    for fn in (lambda: nest.assert_same_structure(sample_nest(), other),
               lambda: nest.map_structure(lambda x, y: x, sample_nest(), other),
               lambda: nest.map_structure_with_path(lambda p, x, y: x, sample_nest(), other)):
        with pytest.raises(ValueError, match=f"path '{path}'"):
            fn()


def test_map_structure_is_strict_not_prefix():
    # a leaf in the first nest must not swallow a subtree of the second
    with pytest.raises(ValueError, match="path '1'"):
        nest.map_structure(lambda x, y: x, (1, 2), (1, (2, 3)))


def test_paths():
    n = sample_nest()
    assert nest.flatten_with_path(n) == [("b.x.0", 2), ("b.x.1", 3), ("b.y", 1), ("a.0", 4)]
    out = nest.map_structure_with_path(lambda p, x: p, n)
    assert out == NT(b={"y": "b.y", "x": ["b.x.0", "b.x.1"]}, a=("a.0", None, ()))
    assert nest.flatten_with_path(7) == [("", 7)]


def test_map_structure_up_to():
    shallow = NT(b=0, a=(0, None, ()))
    deep = sample_nest()
    out = nest.map_structure_up_to(shallow, lambda s: s, deep)
    assert out.b == {"y": 1, "x": [2, 3]}  # the whole subtree at shallow's leaf
    counts = nest.map_structure_up_to(shallow, lambda s: len(nest.flatten(s)), deep)
    assert counts == NT(b=3, a=(1, None, ()))
    with pytest.raises(ValueError, match="path 'a.0'"):
        nest.map_structure_up_to(NT(b=0, a=([0], None, ())), lambda s: s, deep)


def test_get_set_find_field():
    n = sample_nest()
    assert nest.get_field(n, "b.x.1") == 3
    assert nest.get_field(n, "b.y") == 1
    assert nest.get_field(n, "") is n
    with pytest.raises(KeyError, match="no field 'c'"):
        nest.get_field(n, "c")
    with pytest.raises(KeyError, match="no key 'q'"):
        nest.get_field(n, "b.q")
    m = nest.set_field(n, "b.x.1", "new")
    assert nest.get_field(m, "b.x.1") == "new"
    assert nest.get_field(n, "b.x.1") == 3  # original untouched
    assert m.a is n.a  # containers off the path are shared
    m2 = nest.set_field(n, "a.0", {"k": 1})
    assert m2.a == ({"k": 1}, None, ()) and isinstance(m2.a, tuple)
    deep = {"x": NT(b=1, a={"x": 2})}
    assert nest.find_field(deep, "x") == [NT(b=1, a={"x": 2})]
    assert nest.find_field(deep, "x", ignore_nested_field=False) == [NT(b=1, a={"x": 2}), 2]
    assert nest.find_field(deep, "a") == [{"x": 2}]
    assert nest.find_field(deep, "zzz") == []


def test_is_nested():
    assert nest.is_nested(()) and nest.is_nested([1]) and nest.is_nested({"a": 1})
    assert nest.is_nested(NT(1, 2))
    assert not nest.is_nested(None)
    assert not nest.is_nested(torch.zeros(2))
    assert not nest.is_nested(torch.Size([2, 3]))


def test_stack_nests_and_outer_rank():
    from rlf.tensor_specs import TensorSpec
    spec = {"o": TensorSpec((3,)), "r": TensorSpec(())}
    steps = [{"o": torch.full((2, 3), float(t)), "r": torch.full((2,), float(t))}
             for t in range(4)]
    stacked = nest.utils.stack_nests(steps)
    assert stacked["o"].shape == (4, 2, 3) and stacked["r"].shape == (4, 2)
    assert torch.equal(stacked["r"][:, 0], torch.arange(4.0))
    assert nest.utils.stack_nests(steps, dim=1)["o"].shape == (2, 4, 3)
    assert nest.utils.get_outer_rank(steps[0], spec) == 1
    assert nest.utils.get_outer_rank(stacked, spec) == 2
    with pytest.raises(ValueError, match="'o'"):
        nest.utils.get_outer_rank({"o": torch.zeros(2, 4), "r": torch.zeros(2)}, spec)
    with pytest.raises(ValueError, match="'r' has 2 outer dims"):
        nest.utils.get_outer_rank({"o": torch.zeros(2, 3), "r": torch.zeros(2, 2)}, spec)
    with pytest.raises(ValueError):
        nest.utils.stack_nests([])


def test_cat_nests():
    a = {"o": torch.zeros(2, 3, 4), "r": torch.zeros(2, 3)}
    b = {"o": torch.ones(1, 3, 4), "r": torch.ones(1, 3)}
    out = nest.utils.cat_nests([a, b])
    assert out["o"].shape == (3, 3, 4) and out["r"].shape == (3, 3)
    assert torch.equal(out["r"][:, 0], torch.tensor([0.0, 0.0, 1.0]))
    assert nest.utils.cat_nests([a, a], dim=1)["o"].shape == (2, 6, 4)
    with pytest.raises(ValueError):
        nest.utils.cat_nests([a, {"o": torch.zeros(1, 3, 4)}])
    with pytest.raises(ValueError):
        nest.utils.cat_nests([])


def test_convert_device():
    n = {"t": torch.zeros(2), "s": "keep"}
    out = nest.utils.convert_device(n, "meta")
    assert out["t"].device.type == "meta" and out["s"] == "keep"
    same = nest.utils.convert_device(n, "cpu")
    assert same["t"] is n["t"]  # no copy when already there


def test_batch_apply_equals_the_module_applied_at_each_step_and_keeps_t_b():
    from rlf.nest.utils import batch_apply
    torch.manual_seed(0)
    critic = torch.nn.Bilinear(3, 2, 1)
    obs, act = torch.randn(4, 5, 3), torch.randn(4, 5, 2)  # [T, B, ...]
    out = batch_apply(lambda o, a: {"q": critic(o, a).squeeze(-1)}, {"x": obs}["x"], act)
    assert out["q"].shape == (4, 5)
    expected = torch.stack([critic(obs[t], act[t]).squeeze(-1) for t in range(4)])
    assert torch.allclose(out["q"], expected)
    with pytest.raises(ValueError, match=r"outer dims \(4, 5\) and \(3, 5\)"):
        batch_apply(critic, obs, act[:3])
