import threading

import numpy as np
import pytest
import torch

from rlf.replay import PrioritizedSampler, ReplayBuffer, UniformSampler
from rlf.tensor_specs import TensorSpec

SPEC = {"x": TensorSpec((), torch.int64), "o": TensorSpec((3,), torch.float32)}


def step(values):
    """One step per env; every field encodes the same integer (to detect mixing)."""
    v = torch.as_tensor(values, dtype=torch.int64)
    return {"x": v, "o": v.float()[:, None].expand(-1, 3).clone()}


def fill(rb, steps, env_ids=None):
    """Writes value env * 1000 + position for each step (positions counted per env)."""
    ids = list(range(rb.num_environments)) if env_ids is None else list(env_ids)
    for _ in range(steps):
        pos = rb.current_pos[ids]
        rb.add_batch(step([e * 1000 + int(p) for e, p in zip(ids, pos)]),
                     None if env_ids is None else torch.tensor(ids))


def test_wrap_around_gather_all_returns_last_steps_in_order():
    rb = ReplayBuffer(SPEC, num_environments=2, max_length=5)
    fill(rb, 7)
    out = rb.gather_all()
    assert out["x"].tolist() == [[2, 3, 4, 5, 6], [1002, 1003, 1004, 1005, 1006]]
    assert out["o"].shape == (2, 5, 3)
    assert rb.current_pos.tolist() == [7, 7] and rb.current_size.tolist() == [5, 5]
    assert rb.total_size == 10
    rb.clear()
    assert rb.total_size == 0
    with pytest.raises(ValueError, match=r"steps held per environment: \[0, 0\]"):
        rb.get_batch(1)


def test_subset_env_ids_any_order_and_independence():
    rb = ReplayBuffer(SPEC, num_environments=3, max_length=4)
    fill(rb, 2, env_ids=[2, 0])
    fill(rb, 5, env_ids=[1])
    assert rb.current_pos.tolist() == [2, 5, 2]
    seq = rb.get_batch_by_indices(torch.tensor([0, 2, 1]), torch.tensor([0, 0, 1]), 2)["x"]
    assert seq.tolist() == [[0, 1], [2000, 2001], [1001, 1002]]
    with pytest.raises(ValueError, match="holds positions"):
        rb.get_batch_by_indices(torch.tensor([1]), torch.tensor([0]), 1)  # overwritten
    with pytest.raises(ValueError, match="different numbers of steps"):
        rb.gather_all()


def test_gather_held_reads_rings_of_different_sizes_whole():
    # Offline files of different lengths make such rings: ring 0 has wrapped (7 steps into
    # 5 slots), ring 1 holds 3, ring 2 none.
    rb = ReplayBuffer(SPEC, num_environments=3, max_length=5)
    fill(rb, 3, env_ids=[0, 1])
    fill(rb, 4, env_ids=[0])
    out = rb.gather_held()
    assert out["x"].tolist() == [2, 3, 4, 5, 6, 1000, 1001, 1002]
    assert out["o"].shape == (8, 3) and torch.equal(out["o"][:, 0], out["x"].float())


def test_add_batch_bad_input():
    rb = ReplayBuffer(SPEC, num_environments=3, max_length=4)
    with pytest.raises(ValueError, match="duplicate env_ids"):
        rb.add_batch(step([1, 2]), torch.tensor([1, 1]))
    with pytest.raises(ValueError, match="out of range"):
        rb.add_batch(step([1]), torch.tensor([3]))
    with pytest.raises(ValueError, match=r"'o' expected shape \(3, 3\) dtype torch.float32"):
        rb.add_batch({"x": torch.zeros(3, dtype=torch.int64), "o": torch.zeros(3, 2)})
    with pytest.raises(ValueError, match=r"'x' expected .*torch.int64.*got .*torch.int32"):
        rb.add_batch({"x": torch.zeros(3, dtype=torch.int32), "o": torch.zeros(3, 3)})
    with pytest.raises(ValueError, match="pass env_ids"):
        rb.add_batch(step([1, 2]))
    assert rb.total_size == 0  # nothing was written by the failed calls


@pytest.mark.parametrize("prioritized", [False, True])
def test_sequences_are_consecutive_and_never_cross_the_overwrite_point(prioritized):
    torch.manual_seed(0)
    rb = ReplayBuffer(SPEC, num_environments=3, max_length=10,
                      sampler=PrioritizedSampler() if prioritized else None,
                      num_earliest_frames_ignored=1)
    fill(rb, 23)
    fill(rb, 4, env_ids=[1])
    fill(rb, 6, env_ids=[2])  # env 2: 6 steps... of a fresh part of the ring
    batch, info = rb.get_batch(4000, 4)
    x = batch["x"]
    assert x.shape == (4000, 4) and batch["o"].shape == (4000, 4, 3)
    env, start = info.env_ids, info.positions
    expected = env[:, None] * 1000 + start[:, None] + torch.arange(4)
    assert torch.equal(x, expected)  # consecutive, from the right env
    assert torch.equal(batch["o"][..., 0].long(), x)
    pos = rb.current_pos[env]
    oldest = pos - rb.current_size[env]
    assert (start >= oldest + 1).all()  # never spans the overwrite point; +1 ignored
    assert (start + 4 <= pos).all()
    # every valid start is drawn, about uniformly (uniform case)
    n_valid = 10 - 1 - 4 + 1
    counts = torch.bincount(env * 100 + (start - oldest), minlength=300)
    drawn = counts[counts > 0]
    assert drawn.numel() == 3 * n_valid
    if not prioritized:
        assert drawn.min() > 4000 / (3 * n_valid) * 0.6


def test_get_batch_longer_than_stored_says_what_is_held():
    rb = ReplayBuffer(SPEC, num_environments=2, max_length=10)
    fill(rb, 3)
    assert rb.can_sample(3) and not rb.can_sample(4)
    with pytest.raises(ValueError, match=r"no environment holds 4 steps.*\[3, 3\]"):
        rb.get_batch(2, 4)
    ignoring = ReplayBuffer(SPEC, num_environments=2, max_length=10,
                            num_earliest_frames_ignored=1)
    fill(ignoring, 3)
    assert ignoring.can_sample(2) and not ignoring.can_sample(3)


def leaf_values(rb):
    """The sum tree's leaves (``priority ** alpha``, 0 = not drawable): the registered
    ``_priority`` tensor is a view of them."""
    return rb._priority.view(-1).numpy()


def test_prioritized_frequencies_match_priorities():
    torch.manual_seed(1)
    alpha = 0.7
    rb = ReplayBuffer(SPEC, num_environments=2, max_length=8,
                      sampler=PrioritizedSampler(alpha=alpha))
    fill(rb, 8)
    rng = np.random.default_rng(0)
    prio = rng.random((2, 8)) * 5 + 0.1
    env, pos = np.meshgrid(np.arange(2), np.arange(8), indexing="ij")
    rb.update_priority(torch.tensor(env.ravel()), torch.tensor(pos.ravel()),
                       torch.tensor(prio.ravel()))
    n = 200_000
    _, info = rb.get_batch(n, 1)
    freq = torch.bincount(info.env_ids * 8 + info.positions, minlength=16).double().numpy() / n
    p = (prio ** alpha).ravel()
    p /= p.sum()
    sigma = np.sqrt(p * (1 - p) / n)
    assert np.all(np.abs(freq - p) < 5 * sigma), (freq, p)
    # chi-square against the priorities, 15 degrees of freedom: 99.9 % quantile is 37.7
    chi2 = (((freq - p) * n) ** 2 / (p * n)).sum()
    assert chi2 < 37.7


def test_importance_weights_formula():
    torch.manual_seed(2)
    alpha, beta = 0.6, 0.4
    rb = ReplayBuffer(SPEC, num_environments=2, max_length=6,
                      sampler=PrioritizedSampler(alpha=alpha, beta=beta))
    fill(rb, 6)
    prio = np.arange(1, 13, dtype=np.float64).reshape(2, 6)
    env, pos = np.meshgrid(np.arange(2), np.arange(6), indexing="ij")
    rb.update_priority(torch.tensor(env.ravel()), torch.tensor(pos.ravel()),
                       torch.tensor(prio.ravel()))
    _, info = rb.get_batch(64, 1)
    # Schaul et al. 2016: P(i) = p_i^a / sum_k p_k^a, w_i = (N P(i))^-b / max_j w_j
    P = prio ** alpha / (prio ** alpha).sum()
    w = (12 * P[info.env_ids.numpy(), info.positions.numpy()]) ** -beta
    np.testing.assert_allclose(info.importance_weights.numpy(), w / w.max(), rtol=1e-6)
    # sequences: only valid starts count (N and the normaliser of P)
    _, info = rb.get_batch(64, 3)
    starts = prio[:, :4]
    P = starts ** alpha / (starts ** alpha).sum()
    w = (8 * P[info.env_ids.numpy(), info.positions.numpy()]) ** -beta
    np.testing.assert_allclose(info.importance_weights.numpy(), w / w.max(), rtol=1e-6)
    assert (info.positions <= 3).all()


def test_new_steps_get_max_priority_and_stale_updates_are_ignored():
    rb = ReplayBuffer(SPEC, num_environments=1, max_length=4,
                      sampler=PrioritizedSampler(alpha=1.0))
    fill(rb, 4)
    rb.update_priority(torch.tensor([0]), torch.tensor([1]), torch.tensor([7.0]))
    fill(rb, 4)  # positions 0..3 are overwritten by 4..7, all at the max priority 7
    before = leaf_values(rb).copy()
    np.testing.assert_allclose(before, [7, 7, 7, 7])
    rb.update_priority(torch.tensor([0]), torch.tensor([2]), torch.tensor([0.5]))  # stale
    np.testing.assert_allclose(leaf_values(rb), before)
    rb.update_priority(torch.tensor([0]), torch.tensor([6]), torch.tensor([0.5]))  # live
    np.testing.assert_allclose(leaf_values(rb), [7, 7, 0.5, 7])
    with pytest.raises(ValueError, match="finite"):
        rb.update_priority(torch.tensor([0]), torch.tensor([6]), torch.tensor([float("nan")]))


@pytest.mark.parametrize("prioritized", [False, True])
def test_max_use(prioritized):
    torch.manual_seed(3)
    rb = ReplayBuffer(SPEC, num_environments=1, max_length=4, sampler=(
        PrioritizedSampler(max_use=2) if prioritized else UniformSampler(max_use=2)))
    fill(rb, 4)
    drawn = [int(rb.get_batch(1)[1].positions) for _ in range(8)]
    assert sorted(drawn) == [0, 0, 1, 1, 2, 2, 3, 3]
    with pytest.raises(ValueError, match="max_use=2"):
        rb.get_batch(1)
    fill(rb, 1)  # a new step (position 4, overwriting 0) can be drawn again
    assert int(rb.get_batch(1)[1].positions) == 4


def test_all_priorities_zero_is_one_line_that_does_not_blame_max_use():
    rb = ReplayBuffer(SPEC, num_environments=1, max_length=4,
                      sampler=PrioritizedSampler(alpha=1.0))
    fill(rb, 4)
    rb.update_priority(torch.tensor([0, 0, 0, 0]), torch.tensor([0, 1, 2, 3]), torch.zeros(4))
    with pytest.raises(ValueError, match=r"every eligible step has priority 0, so none can be "
                                         r"drawn; give drawable steps a priority > 0"):
        rb.get_batch(1)


def test_clear_forgets_the_priorities():
    torch.manual_seed(4)
    rb = ReplayBuffer(SPEC, num_environments=1, max_length=4,
                      sampler=PrioritizedSampler(alpha=1.0, max_use=2))
    fill(rb, 4)
    rb.update_priority(torch.tensor([0, 0, 0, 0]), torch.tensor([0, 1, 2, 3]),
                       torch.tensor([2.0, 7.0, 3.0, 4.0]))
    for _ in range(3):
        rb.get_batch(1)
    rb.clear()
    assert int(rb.total_size) == 0 and not rb.can_sample(1)
    fill(rb, 2)
    # new steps get the initial priority 1, not the old maximum 7; the rest hold none
    np.testing.assert_allclose(leaf_values(rb), [1, 1, 0, 0])
    drawn = [int(rb.get_batch(1)[1].positions) for _ in range(4)]
    assert sorted(drawn) == [0, 0, 1, 1]  # each new step max_use times
    assert rb.gather_all()["x"].tolist() == [[0, 1]]


def test_checkpoint_round_trip_partial_and_wrapped():
    for steps in (3, 13):
        torch.manual_seed(4)
        rb = ReplayBuffer(SPEC, num_environments=2, max_length=5,
                          sampler=PrioritizedSampler(max_use=10))
        fill(rb, steps)
        fill(rb, 2, env_ids=[1])
        _, info = rb.get_batch(3, 2)
        rb.update_priority(info.env_ids, info.positions, torch.tensor([0.5, 2.0, 3.0]))
        state = {k: v.clone() for k, v in rb.state_dict().items()}
        assert {"x", "o", "_current_size", "_current_pos"} <= set(state)
        assert state["x"].shape == (2, 5)
        fresh = ReplayBuffer(SPEC, num_environments=2, max_length=5,
                             sampler=PrioritizedSampler(max_use=10))
        fresh.load_state_dict(state)
        for k, v in fresh.state_dict().items():
            assert torch.equal(v, state[k]), k
        assert set(state) >= {"_priority", "_max_priority", "_use_count"}  # ALF's keys
        np.testing.assert_allclose(leaf_values(fresh), leaf_values(rb))
        torch.manual_seed(5)
        a, ia = rb.get_batch(50, 2)
        torch.manual_seed(5)
        b, ib = fresh.get_batch(50, 2)
        assert torch.equal(a["x"], b["x"]) and torch.equal(ia.importance_weights,
                                                            ib.importance_weights)


def test_load_state_dict_bad_keys_leave_buffer_unchanged():
    rb = ReplayBuffer(SPEC, num_environments=2, max_length=5)
    fill(rb, 3)
    before = {k: v.clone() for k, v in rb.state_dict().items()}
    good = {k: torch.zeros_like(v) for k, v in before.items()}
    bad_cases = {
        "missing keys \\['x'\\]": {k: v for k, v in good.items() if k != "x"},
        "unexpected keys \\['y'\\]": {**good, "y": torch.zeros(1)},
        "o: expected \\(2, 5, 3\\) torch.float32, found \\(2, 5, 4\\)":
            {**good, "o": torch.zeros(2, 5, 4)},
        "_current_size": {**good, "_current_pos": torch.tensor([9, 9])},
    }
    for message, state in bad_cases.items():
        with pytest.raises(ValueError, match=message):
            rb.load_state_dict(state)
        for k, v in rb.state_dict().items():
            assert torch.equal(v, before[k]), (message, k)


def test_concurrent_add_and_sample_never_see_half_written_steps():
    rb = ReplayBuffer({"x": TensorSpec((), torch.int64), "o": TensorSpec((4096,))},
                      num_environments=4, max_length=64)
    rb.add_batch({"x": torch.zeros(4, dtype=torch.int64), "o": torch.zeros(4, 4096)})
    stop = threading.Event()
    errors = []

    def actor():
        v = 1
        while not stop.is_set() and v < 20000:
            ids = torch.randperm(4)[:2]
            rb.add_batch({"x": torch.full((2,), v, dtype=torch.int64),
                          "o": torch.full((2, 4096), float(v))}, ids)
            v += 1

    threads = [threading.Thread(target=actor) for _ in range(2)]
    for t in threads:
        t.start()
    try:
        for _ in range(300):
            batch, _ = rb.get_batch(16, 1)
            o = batch["o"]
            if not (torch.equal(o.min(-1).values, batch["x"].float())
                    and torch.equal(o.max(-1).values, batch["x"].float())):
                errors.append(batch["x"])
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert not errors
    assert rb.total_size > 4


def test_one_sampler_given_to_two_buffers_keeps_their_states_apart():
    sampler = PrioritizedSampler(alpha=1.0)
    a = ReplayBuffer(SPEC, num_environments=1, max_length=4, sampler=sampler)
    b = ReplayBuffer(SPEC, num_environments=1, max_length=4, sampler=sampler)
    assert a.sampler is not sampler and a.sampler is not b.sampler
    fill(a, 4)
    fill(b, 4)
    a.update_priority(torch.tensor([0]), torch.tensor([1]), torch.tensor([5.0]))
    np.testing.assert_allclose(leaf_values(a), [1, 5, 1, 1])
    np.testing.assert_allclose(leaf_values(b), [1, 1, 1, 1])
    a.sampler.beta = 1.0  # annealing the bound copy
    assert sampler.beta == 0.4


def test_the_deprecated_sampling_arguments_build_the_same_sampler_and_warn():
    with pytest.warns(DeprecationWarning, match=r"ReplayBuffer\(alpha, max_use, "
                                                r"prioritized_sampling\) is deprecated"):
        old = ReplayBuffer(SPEC, num_environments=1, max_length=4, prioritized_sampling=True,
                           alpha=1.0, max_use=2)
    new = ReplayBuffer(SPEC, num_environments=1, max_length=4,
                       sampler=PrioritizedSampler(alpha=1.0, max_use=2))
    assert set(old.state_dict()) == set(new.state_dict())
    for rb in (old, new):
        fill(rb, 4)
        rb.update_priority(torch.tensor([0, 0]), torch.tensor([1, 2]), torch.tensor([3.0, 9.0]))
    torch.manual_seed(6)
    _, drawn_old = old.get_batch(5, 1)
    torch.manual_seed(6)
    _, drawn_new = new.get_batch(5, 1)
    assert torch.equal(drawn_old.positions, drawn_new.positions)
    # (the deprecated ``beta`` attribute reads and sets the sampler's)
    with pytest.warns(DeprecationWarning, match=r"^ReplayBuffer.beta is deprecated"):
        old.beta = 0.9
    assert old.sampler.beta == 0.9 and old.beta == 0.9
    with pytest.raises(ValueError, match=r"^R: sampler and the deprecated \['max_use'\] are "
                                         r"both given; give the sampler only"):
        ReplayBuffer(SPEC, 1, 4, sampler=UniformSampler(), max_use=2, name="R")
    ReplayBuffer(SPEC, 1, 4, prioritized_sampling=False)  # an old conf's default: no warning
    with pytest.warns(DeprecationWarning, match=r"^ReplayBuffer\(prioritized_sampling\) is "
                                                r"deprecated"):
        assert isinstance(ReplayBuffer(SPEC, 1, 4, True).sampler, PrioritizedSampler)  # positional
    with pytest.raises(ValueError, match=r"^R: sampler must be a rlf.replay Sampler"):
        ReplayBuffer(SPEC, 1, 4, sampler="uniform", name="R")
    with pytest.raises(ValueError, match=r"update_priority needs a PrioritizedSampler \(its "
                                         r"sampler is UniformSampler\)"):
        new_uniform = ReplayBuffer(SPEC, 1, 4)
        fill(new_uniform, 1)
        new_uniform.update_priority(torch.tensor([0]), torch.tensor([0]), torch.tensor([1.0]))
