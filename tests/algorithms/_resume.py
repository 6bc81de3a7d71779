"""A check shared by the algorithm tests: an algorithm restored from ``state_dict`` (target
networks, temperature, optimizers and schedules included) makes exactly the update the
original makes."""

import copy

import torch

from rlf import nest
from rlf.algorithms.data_paths import Batch
from rlf.algorithms import build_training
from rlf.algorithms.training_loop import RunCheckpoint
from rlf.data_structures import valid_step_mask
from rlf.unrollers import SyncUnroller
from tests.algorithms._learners import learner_of


def assert_resumes_exactly(make_alg, train_iters: int, experience_for_update):
    """Trains ``make_alg()`` for ``train_iters`` iterations, restores its checkpoint state
    (``RunCheckpoint``: the algorithm's and its loop's, as the trainer saves them) into a
    fresh ``make_alg()``, then applies the same update to both (same random numbers) and
    asserts every tensor of both states is equal before and after.

    Args:
        make_alg: returns ``(algorithm, env)``, built with a ``TrainerConfig``.
        train_iters: iterations before the checkpoint.
        experience_for_update: ``loop -> (batch-major experience, valid)`` to update on.
    """
    alg, env = make_alg()
    loop = build_training(alg, SyncUnroller(env, alg))
    for _ in range(train_iters):
        loop.train_iter()
    experience, valid = experience_for_update(loop)
    state = copy.deepcopy(RunCheckpoint(alg, loop).state_dict())
    other, other_env = make_alg()
    other_loop = build_training(other, SyncUnroller(other_env, other))
    RunCheckpoint(other, other_loop).load_state_dict(state)
    _assert_same(state, RunCheckpoint(other, other_loop).state_dict())
    for a, lp in ((alg, loop), (other, other_loop)):
        torch.manual_seed(123)
        learner_of(a).update(Batch(experience, valid, None, 1.0, False,
                               sequences=lp.data_path.sequences))
    _assert_same(RunCheckpoint(alg, loop).state_dict(),
                 RunCheckpoint(other, other_loop).state_dict())
    env.close()
    other_env.close()


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for (path, x), y in zip(nest.flatten_with_path(a), nest.flatten(b)):
        if isinstance(x, torch.Tensor):
            assert torch.equal(x, y), path
        else:
            assert x == y, path


def sampled_experience(loop, num_sequences: int = 16, length: int = 2):
    """``experience_for_update`` of an off-policy algorithm: a batch-major ``[N, L]`` batch
    from its loop's replay buffer and its ``[N, L]`` loss mask."""
    batch, _ = loop.replay_buffer.get_batch(num_sequences, length)
    valid = valid_step_mask(batch.time_step.step_type.transpose(0, 1)).transpose(0, 1)
    return batch, valid
