"""A check shared by the algorithm tests: an algorithm restored from ``state_dict`` (target
networks, temperature, optimizers and schedules included) makes exactly the update the
original makes."""

import copy

import torch

from rlf import nest
from rlf.data_structures import valid_step_mask


def assert_resumes_exactly(make_alg, train_iters: int, experience_for_update):
    """Trains ``make_alg()`` for ``train_iters`` iterations, restores its ``state_dict`` into a
    fresh ``make_alg()``, then applies the same update to both (same random numbers) and
    asserts every tensor of both state dicts is equal before and after.

    Args:
        make_alg: returns ``(algorithm, env)`` ready to ``train_iter``.
        train_iters: iterations before the checkpoint.
        experience_for_update: ``algorithm -> (batch-major experience, valid)`` to update on.
    """
    alg, env = make_alg()
    for _ in range(train_iters):
        alg.train_iter()
    experience, valid = experience_for_update(alg)
    state = copy.deepcopy(alg.state_dict())
    other, other_env = make_alg()
    other.load_state_dict(state)
    _assert_same(alg.state_dict(), other.state_dict())
    for a in (alg, other):
        torch.manual_seed(123)
        a._training_path()
        a._learner._update(experience, None, valid, 1.0)
    _assert_same(alg.state_dict(), other.state_dict())
    env.close()
    other_env.close()


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for (path, x), y in zip(nest.flatten_with_path(a), nest.flatten(b)):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y), path
        else:
            assert x == y, path


def sampled_experience(alg, num_sequences: int = 16, length: int = 2):
    """``experience_for_update`` of an off-policy algorithm: a batch-major ``[N, L]`` batch
    from its replay buffer and its ``[N, L]`` loss mask."""
    batch, _ = alg.replay_buffer.get_batch(num_sequences, length)
    valid = valid_step_mask(batch.time_step.step_type.transpose(0, 1)).transpose(0, 1)
    return batch, valid
