"""Batch draws and the check of a learner's own draws, with a world of two learners in this
process (no communication: the check and the draws need none)."""

import warnings

import pytest
import torch

from rlf.utils import distributed


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
