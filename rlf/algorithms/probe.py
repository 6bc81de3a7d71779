"""A probe step: what an algorithm's ``rollout_step`` returns, learned without acting."""

from __future__ import annotations

from typing import Any

import torch

from rlf import nest
from rlf.algorithms.seams import run_args
from rlf.data_structures import AlgStep, StepType, time_step_spec

__all__ = ["probe_rollout_step"]


def probe_rollout_step(algorithm: Any) -> AlgStep:
    """``algorithm.rollout_step`` on a zero ``FIRST`` step of one environment, in eval mode,
    without gradients, the random state of torch (and of a CUDA device) restored after it:
    what ``actor_modules``, ``offline_layout`` and the replay buffer's spec learn from.

    Args:
        algorithm: an ``RLAlgorithm``.

    Returns:
        Its ``AlgStep``: ``[1, ...]`` output, state and info on its device, each leaf of
        the dtype ``rollout_step`` gives it (float32 outside autocast).

    Raises:
        Exception: whatever ``rollout_step`` raises on that step (the algorithm's mode is
            restored first).
    """
    device = run_args(algorithm).device
    spec = time_step_spec(algorithm.observation_spec, algorithm.action_spec,
                          algorithm.reward_spec)._replace(env_info={})
    time_step = nest.map_structure(lambda s: s.zeros((1,)).to(device), spec)
    time_step = time_step._replace(step_type=torch.full_like(time_step.step_type,
                                                             int(StepType.FIRST)))
    was_training = algorithm.training
    cuda = [device.index or 0] if device.type == "cuda" else []
    with torch.random.fork_rng(devices=cuda), torch.no_grad():
        algorithm.train(False)
        try:
            return algorithm.rollout_step(time_step, algorithm.get_initial_rollout_state(1))
        finally:
            algorithm.train(was_training)
