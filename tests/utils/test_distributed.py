"""Batch draws and the check of a learner's own draws, with a world of two learners in this
process (no communication: the check and the draws need none)."""

import warnings

import pytest
import torch

from rlf.utils import distributed
from rlf.utils.errors import UserError


@pytest.fixture
def two_learners():
    world = distributed.World(rank=1, size=2)
    distributed.set_world(world)
    distributed.fork_shared_generators([torch.device("cpu")])
    distributed._warned_own_draws.clear()
    yield world
    distributed.set_world(distributed.World())
    distributed._warned_own_draws.clear()


def _warnings(block):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        block()
    return [str(w.message) for w in caught if issubclass(w.category, RuntimeWarning)]


def test_a_step_drawing_from_torchs_own_generator_is_named_once(two_learners):
    def plain():
        with two_learners.batch_rows(two_learners.rank_rows(4), 8), \
                two_learners.own_draws_check("Mine.rollout_step"):
            torch.distributions.Categorical(logits=torch.zeros(4, 3)).sample()

    messages = _warnings(plain)
    assert messages == [
        "Mine.rollout_step drew from torch's own generator (a plain torch.rand, randn_like, "
        "Distribution.sample() or dropout): with 2 learners each draws its own, so they no "
        "longer train as one learner would; draw with rlf.utils.distributed's rand_like, "
        "randn_like, randint_like or categorical_sample"]
    assert _warnings(plain) == []  # once per step


def test_batch_draws_pass_the_check_and_are_the_one_learners_rows(two_learners):
    shared = two_learners.generators["cpu"].get_state()

    def batch():
        with two_learners.batch_rows(two_learners.rank_rows(4), 8), \
                two_learners.own_draws_check("Mine.train_step"):
            return (distributed.randn_like(torch.zeros(4, 2)),
                    distributed.randint_like(torch.zeros(4, dtype=torch.int64), 5))

    messages = _warnings(batch)
    assert messages == []
    # rank 1's rows 4..7 of the one learner's draws of 8 rows
    two_learners.generators["cpu"].set_state(shared)
    noise, actions = batch()
    one = torch.Generator().set_state(shared)
    assert torch.equal(noise, torch.randn(8, 2, generator=one)[4:])
    assert torch.equal(actions, torch.randint(5, (8,), generator=one)[4:])


def test_one_learner_checks_nothing_and_draws_torchs_own():
    world = distributed.world()
    assert not world.distributed
    torch.manual_seed(3)
    with world.own_draws_check("Mine.rollout_step"):
        x = distributed.randint_like(torch.zeros(6, dtype=torch.int64), 4)
    torch.manual_seed(3)
    assert torch.equal(x, torch.randint_like(torch.zeros(6, dtype=torch.int64), 4))


def _two_learners_draw(draw, shape_of_rank, time_major):
    """``draw`` on each of two learners (rows 0-2 and 3-5 of 6) and on the one learner, from
    one shared state: ``(rank 0's, rank 1's, the one learner's)``."""
    torch.manual_seed(7)
    state = torch.get_rng_state()
    out = []
    for rank in (0, 1):
        world = distributed.World(rank=rank, size=2)
        distributed.set_world(world)
        torch.set_rng_state(state)
        distributed.fork_shared_generators([torch.device("cpu")])
        with world.batch_rows(world.rank_rows(3), 6, time_major=time_major):
            out.append(draw(torch.zeros(shape_of_rank)))
    distributed.set_world(distributed.World())
    torch.set_rng_state(state)
    return out[0], out[1]


def test_calc_loss_time_major_draws_of_two_learners_are_the_one_learners_columns():
    # [T=5, B=3] on each learner: the one learner's [5, 6] draw, columns 0-2 and 3-5; the
    # old rule took dim 0 (5, not a multiple of 3) and drew each learner's own noise
    torch.manual_seed(7)
    one = torch.randn(5, 6, 2, generator=torch.Generator().set_state(torch.get_rng_state()))
    a, b = _two_learners_draw(distributed.randn_like, (5, 3, 2), time_major=True)
    assert torch.equal(torch.cat([a, b], 1), one)
    # T a multiple of the rows ([6, 3]): still the columns, not 2 steps of 3 rows
    torch.manual_seed(7)
    one = torch.rand(6, 6, generator=torch.Generator().set_state(torch.get_rng_state()))
    a, b = _two_learners_draw(distributed.rand_like, (6, 3), time_major=True)
    assert torch.equal(torch.cat([a, b], 1), one)


def test_a_batch_major_draw_in_calc_loss_keeps_its_rows_with_batch_dim_0():
    # TD3's target noise: a [B, T-1] draw transposed, with T-1 == B, where the shape alone
    # would read dim 1 as the rows
    torch.manual_seed(7)
    one = torch.randn(6, 3, generator=torch.Generator().set_state(torch.get_rng_state()))
    a, b = _two_learners_draw(lambda x: distributed.randn_like(x, batch_dim=0), (3, 3),
                              time_major=True)
    assert torch.equal(torch.cat([a, b], 0), one)


@pytest.mark.parametrize("shape, time_major, batch_dim", [
    ((15,), True, None),     # a flattened [T*B]: its order cannot be told
    ((), False, None),       # a scalar
    ((4, 2), False, None),   # 4 rows where the learner holds 3
    ((5, 3), True, 0),       # dim 0 named, but it is not the rows
])
def test_a_draw_whose_rows_cannot_be_placed_is_refused_in_one_line(two_learners, shape,
                                                                   time_major, batch_dim):
    with two_learners.batch_rows(torch.arange(3, 6), 6, time_major=time_major), \
            pytest.raises(UserError, match=r"^a batch draw \(rlf.utils.distributed\) of shape "
                                           r".*2 learners cannot draw as one would"):
        distributed.randn_like(torch.zeros(shape), batch_dim=batch_dim)


def test_a_world_handed_in_draws_with_its_own_generators_not_the_process_worlds():
    # Two worlds of two learners (one for each of two runs in one process), neither of them
    # the process's: each block draws with its own world's generators and rows.
    assert not distributed.world().distributed
    torch.manual_seed(11)
    first, second = distributed.World(rank=0, size=2), distributed.World(rank=1, size=2)
    first.fork_shared_generators([torch.device("cpu")])
    torch.manual_seed(12)
    second.fork_shared_generators([torch.device("cpu")])
    states = [w.generators["cpu"].get_state() for w in (first, second)]
    with first.batch_rows(first.rank_rows(2), 4):
        a = distributed.randn_like(torch.zeros(2, 3))
        with second.batch_rows(second.rank_rows(2), 4):  # the innermost block's world
            b = distributed.randn_like(torch.zeros(2, 3))
        a2 = distributed.randn_like(torch.zeros(2, 3))
    one = [torch.Generator().set_state(s) for s in states]
    assert torch.equal(a, torch.randn(4, 3, generator=one[0])[:2])
    assert torch.equal(a2, torch.randn(4, 3, generator=one[0])[:2])
    assert torch.equal(b, torch.randn(4, 3, generator=one[1])[2:])
    assert distributed.world().generators == {}  # the process's world is untouched
    with pytest.raises(RuntimeError, match="no shared generator for device type 'cpu'"):
        with distributed.World(rank=0, size=2).batch_rows(torch.arange(2), 4):
            distributed.rand_like(torch.zeros(2))
